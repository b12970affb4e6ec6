"""The poller loop under a lease, on the in-memory twin with a manual clock (the loop's waits move the
clock): it claims only inside the window its gate gives, preloaded rows due before the window are left to
the sweep and rows due at its end to the next holder; one invocation takes a free lease, serves, and gives
it back."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from duetime.adapters.memory import MemoryStore
from duetime.domain.claim_plan import Claim
from duetime.domain.clock import ManualClock
from duetime.domain.ids import make_run_id, partition_of
from duetime.domain.models import Job, Team
from duetime.ports import Alert, ClaimOutcome, RunMessage
from duetime.scheduling.poller import ClaimReport, ClaimWindow, Poller, PollerConfig
from duetime.scheduling.poller_lease import LeaseTimings, PollerShift, group_label
from duetime.scheduling.preload import FireReport

from ..job_support import create_job

NOW = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)


@pytest.fixture
def store() -> Iterator[MemoryStore]:
    """The in-memory twin (held to DynamoDB's conditions by tests/integration/test_store_contract.py). Not
    moto: moto's PartiQL cannot parse the claim's batched writes (parameters in an INSERT's VALUE, or SET
    with REMOVE in an UPDATE)."""
    store = MemoryStore()
    store.put_team(Team(team_id="team-a", max_concurrency=5))
    yield store


@dataclass
class Queue:
    sent: list[RunMessage] = field(default_factory=list)

    def send(self, messages: Sequence[RunMessage], delay_seconds: int = 0) -> None:
        self.sent.extend(messages)


class NoAlerts:
    def publish(self, alert: Alert) -> None:
        raise AssertionError(alert)


class ClaimLog:
    """The store, recording the instant of every claim call (sweeps' and the preload's)."""

    def __init__(self, store: MemoryStore, clock: ManualClock) -> None:
        self.store = store
        self.clock = clock
        self.claims_at: list[datetime] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def claim(self, claims: Sequence[Claim], now: datetime) -> ClaimOutcome:
        self.claims_at.append(self.clock.now())
        return self.store.claim(claims, now)


@dataclass
class FixedGate:
    """A gate with one window that opens at ``opens`` (seen from then on) and is done at ``done_at``."""

    shows_from: datetime
    claims: ClaimWindow
    done_at: datetime
    clock: ManualClock

    @property
    def done(self) -> bool:
        return self.clock.now() >= self.done_at

    def step(self, now: datetime) -> None:
        pass

    def window(self) -> ClaimWindow | None:
        return self.claims if self.clock.now() >= self.shows_from else None

    def next_step_at(self) -> datetime | None:
        return self.done_at


def exact_job_due(store: MemoryStore, due: datetime) -> Job:
    body = {"name": "x", "schedule": {"at": due.isoformat()}, "target": {"url": "https://example.com/x"}}
    return create_job(store, "team-a", {**body, "exact": True}, NOW - timedelta(minutes=5))


def make_poller(store: Any, clock: ManualClock, queue: Queue, jobs: list[Job]) -> Poller:
    config = PollerConfig(
        partitions=sorted({partition_of(j.id) for j in jobs}), preload_lead=timedelta(seconds=10)
    )
    return Poller(store, store, queue, NoAlerts(), clock, config)


def test_the_loop_claims_only_inside_its_window_and_leaves_the_rows_at_either_side(
    store: MemoryStore,
) -> None:
    """A successor whose window opens at X = NOW + 5 and ends (the next handover) before X + 5: the row due
    before X was the old holder's (here nobody claimed it, so the sweep takes it at X), the rows due from X
    to X + 4 fire from the preload at their second, and the row due at X + 5 is left to the next holder."""
    start, handover = NOW + timedelta(seconds=5), NOW + timedelta(seconds=10)
    before, first, last, after = (
        exact_job_due(store, at)
        for at in (start - timedelta(seconds=1), start, handover - timedelta(seconds=1), handover)
    )
    clock = ManualClock(NOW)
    claims = ClaimLog(store, clock)
    queue = Queue()
    poller = make_poller(claims, clock, queue, [before, first, last, after])
    window = ClaimWindow(start, handover - timedelta(seconds=0.2))
    fired: list[FireReport] = []
    swept: list[ClaimReport] = []
    sweeps = poller.run_until(
        stop=lambda: False,
        sleep=clock.advance,
        on_report=lambda claimed, _: swept.append(claimed),
        on_fire=fired.append,
        gate=FixedGate(NOW + timedelta(seconds=2), window, handover + timedelta(seconds=3), clock),
    )
    assert claims.claims_at and min(claims.claims_at) == start  # nothing before the window...
    assert max(claims.claims_at) < window.end  # ...nor after it
    assert sweeps == 5 and sum(r.runs_created for r in swept) == 1  # sweeps at X .. X + 4, on the second
    assert sum(f.runs_created for f in fired) == 2 and max(f.max_lateness_seconds for f in fired) == 0
    claimed = {m.run_id for m in queue.sent}
    assert claimed == {make_run_id(j.id, j.state.next_nominal_at) for j in (before, first, last)}  # type: ignore[arg-type]
    assert store.get_run(make_run_id(after.id, handover)) is None


def test_one_invocation_takes_the_free_lease_serves_and_gives_it_back(store: MemoryStore) -> None:
    due = exact_job_due(store, NOW + timedelta(seconds=3))
    clock = ManualClock(NOW)
    queue = Queue()
    shift = PollerShift(make_poller(store, clock, queue, [due]), store, LeaseTimings())
    report = shift.serve("inv-1", None, 20, sleep=clock.advance)
    assert [m.run_id for m in queue.sent] == [make_run_id(due.id, NOW + timedelta(seconds=3))]
    (reign,) = report.reigns
    assert reign.start == NOW and reign.end == NOW + timedelta(seconds=20 - 2 - 0.2)
    assert report.sweeps == 18 and report.errors == 0 and report.handovers == report.takeovers == 0
    lease = store.read_poller_lease(report.group)
    assert lease.holder is None and lease.term == 1  # given back: the next invocation takes it at once


def test_a_standby_invocation_takes_over_a_lease_its_holder_stopped_renewing(store: MemoryStore) -> None:
    due = exact_job_due(store, NOW + timedelta(seconds=8))
    clock = ManualClock(NOW)
    queue = Queue()
    poller = make_poller(store, clock, queue, [due])
    group = group_label(poller.config.partitions)
    assert store.acquire_poller_lease(group, "dead", NOW - timedelta(seconds=1), NOW + timedelta(seconds=5))
    report = PollerShift(poller, store, LeaseTimings()).serve("heir", None, 30, sleep=clock.advance)
    (reign,) = report.reigns
    assert report.takeovers == 1 and NOW + timedelta(seconds=5) < reign.start <= NOW + timedelta(seconds=5.5)
    assert [m.run_id for m in queue.sent] == [make_run_id(due.id, NOW + timedelta(seconds=8))]
    assert store.read_poller_lease(group).term == 2


class BusyClock(ManualClock):
    """A busy machine: every read of the clock finds it ``per_read`` seconds later than the last."""

    def __init__(self, start: datetime, per_read: float) -> None:
        super().__init__(start)
        self.per_read = per_read

    def now(self) -> datetime:
        return self.advance(self.per_read)


class SweepLog(ClaimLog):
    """The store, recording the instant each sweep reads its partitions up to."""

    def __init__(self, store: MemoryStore, clock: ManualClock) -> None:
        super().__init__(store, clock)
        self.swept_until: list[datetime] = []

    def due_jobs(self, partition: int, bucket: str, until: datetime, *args: Any, **kwargs: Any) -> list[Job]:
        self.swept_until.append(until)
        return self.store.due_jobs(partition, bucket, until, *args, **kwargs)


@pytest.mark.parametrize("ends_before_handover", [0.2, 0.5, 0.75, 0.85, 0.95])
def test_a_sweep_claims_up_to_the_instant_checked_against_its_window_even_when_the_clock_moves_on(
    store: MemoryStore, ends_before_handover: float
) -> None:
    """A holder's window ends before a handover at X (0.2 s before it when deployed). On a busy machine the
    clock moves on between the loop's check "is it still my window" and the sweep (here every read of the
    clock finds it 0.25 s later): the sweep reads up to the instant checked, never a later one, so it claims
    nothing at or after the window's end, whatever the window's end is on the clock's second."""
    handover = NOW + timedelta(seconds=5)
    mine = exact_job_due(store, handover - timedelta(seconds=2))
    clock = BusyClock(NOW, per_read=0.25)
    log = SweepLog(store, clock)
    queue = Queue()
    config = PollerConfig(partitions=[partition_of(mine.id)], preload_lead=None)
    poller = Poller(log, log, queue, NoAlerts(), clock, config)
    window = ClaimWindow(NOW + timedelta(seconds=1), handover - timedelta(seconds=ends_before_handover))
    poller.run_until(
        stop=lambda: False,
        sleep=clock.advance,
        gate=FixedGate(NOW, window, handover + timedelta(seconds=2), clock),
    )
    assert log.swept_until and max(log.swept_until) < window.end
    assert [m.run_id for m in queue.sent] == [make_run_id(mine.id, handover - timedelta(seconds=2))]
