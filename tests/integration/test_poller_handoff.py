"""Poller invocations that overlap, on DynamoDB Local: two "invocations" (threads, each with its own client,
its own store clock, one of them on a machine clock five minutes fast) serve one partition group through
its lease. Every second is claimed by exactly one of them, preloaded exact jobs due around the handover
second run once, a holder that dies is replaced within a few seconds, and one that wakes after being
replaced claims nothing.

Shorter lease timings than the deployed ones keep each test under half a minute; the protocol is the same.
The only timing asserted is "within its second"; everything else is who claimed what."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from duetime.adapters.aws.store_clock import StoreClock
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.domain.claim_plan import Claim
from duetime.domain.ids import make_run_id, partition_of
from duetime.domain.models import Job
from duetime.domain.timeutil import ceil_seconds
from duetime.ports import ClaimOutcome
from duetime.scheduling.poller import Poller, PollerConfig
from duetime.scheduling.poller_lease import LeaseTimings, PollerShift, ShiftReport, group_label

from ..job_support import create_job
from .conftest import Stack, new_clients, wait_until

TIMINGS = LeaseTimings(
    lease_seconds=3,
    renew_every=1,
    standby_poll=0.25,
    handover_lead=1.5,
    decide_before=0.5,
    stop_guard=0.2,
    expiry_guard=0.5,
    retire_before=4,
    release_before=1,
    hot_standby=True,  # the scenes below place the handover by the end of the first run
)
EARLY = replace(TIMINGS, hot_standby=False)


class Recorder:
    """One invocation's store, recording up to which instant (by its own store clock) each sweep claimed,
    and each claim's instant and the runs it created."""

    def __init__(self, store: DynamoStore, name: str) -> None:
        self.store = store
        self.name = name
        self.clock: StoreClock | None = None
        self.sweeps: list[datetime] = []  # each sweep's instant, once per partition bucket read
        self.claimed: list[tuple[datetime, list[str]]] = []  # (the claim's now, run ids created)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.store, attribute)

    def store_now(self) -> datetime:
        assert self.clock is not None
        return self.clock.now()

    def due_jobs(self, partition: int, bucket: str, until: datetime, *args: Any, **kwargs: Any) -> list[Job]:
        # A sweep reads each partition's buckets up to its instant: the second it claims is that instant's,
        # not the instant of the read (on a busy machine a sweep's last reads can come a second later).
        self.sweeps.append(until)
        return self.store.due_jobs(partition, bucket, until, *args, **kwargs)

    def claim(self, claims: Sequence[Claim], now: datetime) -> ClaimOutcome:
        outcome = self.store.claim(claims, now)
        self.claimed.append((now, [run.run_id for run in outcome.runs]))
        return outcome


@dataclass
class Invocation:
    """A thread that serves the group as one Lambda invocation would, until its run ends. Its waits can be
    frozen (the process is stopped: it neither claims nor renews) and thawed again."""

    name: str
    recorder: Recorder
    shift: PollerShift
    report: ShiftReport | None = None
    frozen: threading.Event = field(default_factory=threading.Event)
    thawed: threading.Event = field(default_factory=threading.Event)
    froze_at: datetime | None = None
    thread: threading.Thread | None = None

    @property
    def clock(self) -> StoreClock:
        assert self.recorder.clock is not None
        return self.recorder.clock

    def sleep(self, seconds: float) -> None:
        if self.frozen.is_set():
            self.froze_at = self.clock.now()
            self.thawed.wait()
            self.frozen.clear()
        time.sleep(seconds)

    def start(self, run_seconds: float) -> None:
        def serve() -> None:
            self.report = self.shift.serve(self.name, None, run_seconds, self.sleep)

        self.thread = threading.Thread(target=serve, name=self.name, daemon=True)
        self.thread.start()

    def join(self) -> ShiftReport:
        assert self.thread is not None
        self.thread.join(timeout=60)
        assert self.report is not None, f"{self.name} did not finish"
        return self.report

    def seconds_claimed(self) -> set[datetime]:
        instants = self.recorder.sweeps + [now for now, _ in self.recorder.claimed]
        return {instant.replace(microsecond=0) for instant in instants}


def refined_stores(stack: Stack, skews: dict[str, float]) -> dict[str, Recorder]:
    """Per name, a store on its own client with a refined store clock over a machine clock ``skew`` seconds
    off (the probes run side by side)."""
    made: dict[str, Recorder] = {}
    for name, skew in skews.items():
        dynamodb, _ = new_clients()
        store = DynamoStore(dynamodb, stack.names)
        made[name] = recorder = Recorder(store, name)
        recorder.clock = StoreClock(
            dynamodb,
            local_time=lambda skew=skew: time.time() + skew,  # type: ignore[misc]
            sync=lambda store=store: store.low_water_marks([0]),  # type: ignore[misc]
        )
    with ThreadPoolExecutor(len(made)) as probes:
        assert all(probes.map(lambda r: r.clock.refine(), made.values()))
    return made


def invocation(
    stack: Stack, recorder: Recorder, partitions: list[int], timings: LeaseTimings = TIMINGS
) -> Invocation:
    """An invocation serving ``partitions``, as a Lambda invocation would."""
    assert recorder.clock is not None
    config = PollerConfig(partitions=partitions, preload_lead=timedelta(seconds=10))
    poller = Poller(recorder, recorder.store, stack.queue, stack.alerts, recorder.clock, config)  # type: ignore[arg-type]
    return Invocation(recorder.name, recorder, PollerShift(poller, recorder.store, timings))


def exact_jobs(stack: Stack, due: list[datetime]) -> dict[datetime, Job]:
    """One exact one-off job due at each instant (an unroutable target: nobody works the runs here)."""
    jobs = {}
    for at in due:
        body = {
            "name": "at",
            "schedule": {"at": at.isoformat()},
            "target": {"url": "http://127.0.0.1:1024/x"},
        }
        jobs[at] = create_job(stack.store, "team-a", {**body, "exact": True}, stack.clock.now())
    return jobs


@dataclass
class Scene:
    """Exact one-off jobs due every second from ``base`` on, and the invocations serving their partitions."""

    base: datetime
    due: list[datetime]
    jobs: dict[datetime, Job]
    group: str
    invocations: list[Invocation]

    def holder_is(self, stack: Stack, name: str) -> Callable[[], bool]:
        return lambda: stack.store.read_poller_lease(self.group).holder == name


def scene(
    stack: Stack, lead: int, count: int, skews: dict[str, float], timings: LeaseTimings = TIMINGS
) -> Scene:
    """The stores and clocks first (refining the clocks takes a few seconds), then the jobs, due from
    ``lead`` seconds on, then the invocations on the jobs' partitions."""
    stores = refined_stores(stack, skews)
    base = ceil_seconds(next(iter(stores.values())).store_now()) + timedelta(seconds=lead)
    due = [base + timedelta(seconds=i) for i in range(count)]
    jobs = exact_jobs(stack, due)
    partitions = sorted({partition_of(job.id) for job in jobs.values()})
    made = [invocation(stack, recorder, partitions, timings) for recorder in stores.values()]
    return Scene(base, due, jobs, group_label(partitions), made)


def hold_while_jobs_fire(stack: Stack, s: Scene, inv: Invocation, run_seconds: float) -> None:
    """Start ``inv``, the first invocation: it takes the free lease; return once the scene's jobs have
    been firing for two seconds."""
    inv.start(run_seconds)
    wait_until(s.holder_is(stack, inv.name))
    wait_until(lambda: inv.clock.now() >= s.base + timedelta(seconds=2), timeout=30)


def claimers(invs: list[Invocation]) -> dict[datetime, set[str]]:
    seconds: dict[datetime, set[str]] = {}
    for inv in invs:
        for second in inv.seconds_claimed():
            seconds.setdefault(second, set()).add(inv.name)
    return seconds


def run_ids_claimed_by(inv: Invocation) -> list[str]:
    return [run_id for _, run_ids in inv.recorder.claimed for run_id in run_ids]


def assert_each_job_ran_once(stack: Stack, jobs: dict[datetime, Job], invs: list[Invocation]) -> None:
    expected = {make_run_id(job.id, at) for at, job in jobs.items()}
    claimed = Counter(run_id for inv in invs for run_id in run_ids_claimed_by(inv))
    assert set(claimed) == expected and set(claimed.values()) == {1}
    assert Counter(m.run_id for m in stack.messages()) == Counter(expected)  # one message each
    for run_id in expected:
        assert stack.store.get_run(run_id) is not None


def test_two_overlapping_invocations_claim_every_second_once_and_hand_over_at_a_whole_second(
    stack: Stack,
) -> None:
    s = scene(stack, lead=4, count=12, skews={"first": 0.0, "second": 300.0})
    base, due, jobs = s.base, s.due, s.jobs
    first, second = s.invocations
    started = first.clock.now()
    first.start(run_seconds=(base - started).total_seconds() + 5)  # offers the group at base + 1 or so
    wait_until(s.holder_is(stack, "first"))
    second.start(run_seconds=(base - started).total_seconds() + 14)
    reports = [first.join(), second.join()]

    (held_first,), (held_second,) = (r.reigns for r in reports)
    handover = held_second.start
    assert handover.microsecond == 0 and held_first.end == handover - timedelta(seconds=TIMINGS.stop_guard)
    assert reports[0].handovers == 1 and reports[1].takeovers == 0
    # Who claimed each second: exactly one invocation, every second from the first sweep to the last.
    seconds = claimers([first, second])
    span = [
        min(seconds) + timedelta(seconds=i)
        for i in range(int((max(seconds) - min(seconds)).total_seconds()) + 1)
    ]
    assert [s for s in span if s not in seconds] == [], "a second nobody claimed"
    assert {s: names for s, names in seconds.items() if len(names) > 1} == {}, "a second claimed by both"
    assert max(first.seconds_claimed()) < handover <= min(second.seconds_claimed())
    # The exact jobs around the handover ran once, each by the invocation holding its second.
    assert_each_job_ran_once(stack, jobs, [first, second])
    for inv, mine in (
        (first, [at for at in due if at < handover]),
        (second, [at for at in due if at >= handover]),
    ):
        assert sorted(run_ids_claimed_by(inv)) == sorted(make_run_id(jobs[at].id, at) for at in mine)
    assert any(at == handover for at in due) and any(at == handover - timedelta(seconds=1) for at in due)
    claimed_at = {
        run_id: now for inv in (first, second) for now, run_ids in inv.recorder.claimed for run_id in run_ids
    }
    lateness = [(claimed_at[make_run_id(jobs[at].id, at)] - at).total_seconds() for at in due]
    assert all(0 <= late < 1.0 for late in lateness), lateness  # within its second (the store's), never early


def test_the_next_invocation_takes_over_as_soon_as_its_minute_is_loaded_and_the_holder_returns(
    stack: Stack,
) -> None:
    s = scene(stack, lead=4, count=14, skews={"first": 0.0, "second": 300.0}, timings=EARLY)
    base, due, jobs = s.base, s.due, s.jobs
    first, second = s.invocations
    run_seconds = (base - first.clock.now()).total_seconds() + 20  # neither run ends in the scene
    hold_while_jobs_fire(stack, s, first, run_seconds)
    arrived = second.clock.now()
    second.start(run_seconds)
    report = first.join()  # the first returns at its handover, long before its run's end
    returned = first.clock.now()

    (held_first,) = report.reigns
    assert report.handovers == 1 and returned - arrived < timedelta(seconds=8)
    reports = [report, second.join()]  # the second serves to the end of its run
    (held_second,) = reports[1].reigns
    handover = held_second.start
    assert handover.microsecond == 0 and held_first.end == handover - timedelta(seconds=TIMINGS.stop_guard)
    assert base < handover < due[-1], "the handover fell among the jobs' seconds"
    seconds = claimers([first, second])
    assert {s: names for s, names in seconds.items() if len(names) > 1} == {}, "a second claimed by both"
    assert max(first.seconds_claimed()) < handover <= min(second.seconds_claimed())
    assert_each_job_ran_once(stack, jobs, [first, second])


def test_a_holder_that_dies_is_replaced_within_a_few_seconds_and_claims_nothing_when_it_wakes(
    stack: Stack,
) -> None:
    s = scene(stack, lead=3, count=10, skews={"holder": 0.0, "standby": 300.0})
    base, jobs = s.base, s.jobs
    holder, standby = s.invocations
    run_seconds = (base - holder.clock.now()).total_seconds() + 20
    holder.start(run_seconds)
    wait_until(s.holder_is(stack, "holder"))
    standby.start(run_seconds)
    wait_until(lambda: holder.clock.now() >= base + timedelta(seconds=2), timeout=30)
    holder.frozen.set()  # it stops between two ticks, as a killed or frozen process would
    wait_until(lambda: holder.froze_at is not None)
    wait_until(s.holder_is(stack, "standby"), timeout=20)
    took_over = standby.clock.now()
    assert holder.froze_at is not None and took_over - holder.froze_at < timedelta(
        seconds=TIMINGS.lease_seconds + 2
    )

    claims_before_waking = len(holder.recorder.claimed), len(holder.recorder.sweeps)
    holder.thawed.set()  # it wakes after the takeover, believing for a moment it still holds the lease
    reports = [holder.join(), standby.join()]
    assert (len(holder.recorder.claimed), len(holder.recorder.sweeps)) == claims_before_waking  # nothing
    assert reports[1].takeovers == 1 and len(reports[0].reigns) == 1
    assert reports[0].reigns[0].end <= reports[1].reigns[0].start  # one after the other, never both
    assert max(holder.seconds_claimed()) < min(standby.seconds_claimed())
    assert_each_job_ran_once(stack, jobs, [holder, standby])

    # A claim the old holder had already sent when it froze would still be harmless: its preloaded rows
    # carry the versions it read, and the standby has moved every one of them on.
    stale = holder.shift.poller.preload
    assert stale is not None and stale.next_fire_at() is not None
    fired = stale.fire(base + timedelta(seconds=60))
    assert fired.fired > 0 and fired.runs_created == 0 and fired.lost_races == fired.fired


def test_with_no_standby_the_runs_a_dead_holder_leaves_are_claimed_late_by_the_next_invocation_once_each(
    stack: Stack,
) -> None:
    s = scene(stack, lead=3, count=12, skews={"holder": 0.0, "next": 300.0}, timings=EARLY)
    base, due, jobs = s.base, s.due, s.jobs
    holder, later = s.invocations
    hold_while_jobs_fire(stack, s, holder, (base - holder.clock.now()).total_seconds() + 25)
    holder.frozen.set()  # killed mid-reign in a quiet minute: nobody stands by
    wait_until(lambda: holder.froze_at is not None)
    wait_until(lambda: later.clock.now() >= holder.froze_at + timedelta(seconds=6), timeout=30)  # type: ignore[operator]
    started = later.clock.now()  # the next EventBridge tick, well after the dead holder's lease expired
    later.start((due[-1] - started).total_seconds() + 8)
    report = later.join()

    assert report.takeovers == 1 and holder.froze_at is not None
    (reign,) = report.reigns
    assert reign.start - started < timedelta(seconds=3)  # it took the expired lease at once
    assert_each_job_ran_once(stack, jobs, [holder, later])  # the dead holder's seconds: late, not lost
    claimed_at = {run_id: now for now, run_ids in later.recorder.claimed for run_id in run_ids}
    orphaned = [at for at in due if holder.froze_at <= at < reign.start]
    assert orphaned, "some jobs fell due while nobody held the group"
    for at in orphaned:
        assert claimed_at[make_run_id(jobs[at].id, at)] >= reign.start  # claimed by the next, on taking over
    holder.thawed.set()
    holder.join()
