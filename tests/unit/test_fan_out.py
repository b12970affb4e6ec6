"""Claims that scale out (``duetime.scheduling.fan_out``), on the in-memory twin with a manual clock: a holder
hands a busy minute's slices to helpers, leaves alone the partitions of live helpers, takes back a dead
helper's, and a helper serves its slice for its minute and gives its lease back."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from duetime.adapters.aws.lambda_helpers import LambdaHelperLauncher
from duetime.adapters.memory import MemoryStore
from duetime.domain.claim_plan import initial_state
from duetime.domain.clock import ManualClock
from duetime.domain.ids import make_run_id, new_job_id, partition_of
from duetime.domain.models import Job, JobSpec, Team
from duetime.ports.functions import HelperAssignment, helper_lease_name
from duetime.scheduling.events import HelperEvent
from duetime.scheduling.fan_out import FanOut, FanOutPolicy, plan_helpers, slices_of
from duetime.scheduling.poller import Poller, PollerConfig
from duetime.scheduling.poller_lease import LeaseTimings, PollerShift, group_label

from .test_poller_lease_loop import NoAlerts, Queue

MINUTE_START = datetime(2026, 12, 2, 0, 0, 0, tzinfo=UTC)  # the busy minute
PARTITIONS = [0, 1, 2, 3]


@dataclass
class Launches:
    """A launcher that records each assignment (and, given ``on_launch``, acts as the helper would)."""

    assignments: list[HelperAssignment] = field(default_factory=list)
    refuse: bool = False
    on_launch: Any = None

    def launch(self, assignment: HelperAssignment) -> None:
        if self.refuse:
            raise RuntimeError("TooManyRequestsException")
        self.assignments.append(assignment)
        if self.on_launch is not None:
            self.on_launch(assignment)


def jobs_in(store: MemoryStore, partition: int, count: int, at: datetime = MINUTE_START) -> list[Job]:
    """``count`` exact jobs due at ``at`` whose ids fall in ``partition`` (created as the service would,
    with ids drawn until one lands there)."""
    body = {"name": "x", "schedule": {"at": at.isoformat()}, "target": {"url": "https://example.com/x"}}
    created = at - timedelta(minutes=5)
    spec = JobSpec.model_validate({**body, "exact": True}, context={"now": created})
    made: list[Job] = []
    while len(made) < count:
        job_id = new_job_id()
        if partition_of(job_id) != partition:
            continue
        job = Job(**spec.model_dump(), id=job_id, team="team-a", created_at=created, updated_at=created)
        job = job.model_copy(update={"state": initial_state(job, created)})
        store.put_job(job, created)
        made.append(job)
    return made


@pytest.fixture
def store() -> MemoryStore:
    store = MemoryStore()
    store.put_team(Team(team_id="team-a", max_concurrency=1000))
    return store


# --- the plan -----------------------------------------------------------------------------------------


def test_a_minute_that_fits_the_holder_starts_no_helper() -> None:
    assert plan_helpers({0: 100, 1: 200, 2: 0, 3: 50}, slices_of(PARTITIONS, 1), holder_rows=350) == []


def test_the_biggest_slices_go_to_helpers_until_what_is_left_fits_the_holder() -> None:
    counts = {0: 900, 1: 100, 2: 700, 3: 300}
    assert plan_helpers(counts, slices_of(PARTITIONS, 1), holder_rows=500) == [[0], [2]]  # 400 left
    assert plan_helpers(counts, slices_of(PARTITIONS, 2), holder_rows=500) == [[0, 1], [2, 3]]
    assert plan_helpers(counts, slices_of(PARTITIONS, 1), holder_rows=50) == [[0], [1], [2], [3]]


def test_a_slice_without_rows_is_never_delegated() -> None:
    assert plan_helpers({0: 9000}, slices_of(PARTITIONS, 1), holder_rows=1) == [[0]]


def test_the_slices_and_their_leases_are_fixed_by_the_group() -> None:
    """Every holder of a group names the same helper leases (so one that took over finds them), and a
    helper's lease is never a group's own."""
    assert slices_of([3, 1, 2, 0, 4], 2) == [[0, 1], [2, 3], [4]]
    assert helper_lease_name("0-15", [4, 5]) == "0-15~4-5"
    assert "~" not in group_label(PARTITIONS)


# --- the holder's side ----------------------------------------------------------------------------------


def fan_out(store: MemoryStore, launches: Launches, holder_rows: int = 3) -> FanOut:
    policy = FanOutPolicy(holder_rows=holder_rows, partitions_per_helper=1)
    return FanOut(store, store, launches, PARTITIONS, policy)


def test_helpers_are_started_once_launch_lead_before_a_busy_minute(store: MemoryStore) -> None:
    jobs_in(store, 0, 4)
    jobs_in(store, 2, 2)
    launches = Launches()
    holder = fan_out(store, launches)
    assert holder.step(MINUTE_START - timedelta(seconds=31), busy=False) == frozenset()
    assert launches.assignments == []  # not counted yet: 31 s ahead
    holder.step(MINUTE_START - timedelta(seconds=30), busy=False)
    holder.step(MINUTE_START - timedelta(seconds=29), busy=False)
    (assignment,) = launches.assignments  # 6 rows: the 4 of partition 0 go, 2 are left (fits 3)
    assert assignment.partitions == [0] and assignment.minute == MINUTE_START
    assert assignment.group == "0-3" and assignment.lease_name == "0-3~0"
    assert assignment.serve_until == MINUTE_START + timedelta(seconds=60 + 90)
    assert holder.helpers_launched == 1


def test_a_quiet_minute_starts_no_helper_and_reads_no_lease(store: MemoryStore) -> None:
    jobs_in(store, 1, 2)
    reads: list[str] = []
    original = store.read_poller_leases
    store.read_poller_leases = lambda groups: reads.extend(groups) or original(groups)  # type: ignore[method-assign]
    launches = Launches()
    holder = fan_out(store, launches)
    for second in range(-40, 60, 1):
        holder.step(MINUTE_START + timedelta(seconds=second), busy=False)
    assert launches.assignments == [] and reads == []


def test_a_refused_launch_leaves_the_slice_with_the_holder(store: MemoryStore) -> None:
    jobs_in(store, 3, 5)
    holder = fan_out(store, Launches(refuse=True))
    assert holder.step(MINUTE_START - timedelta(seconds=20), busy=False) == frozenset()
    assert holder.launch_failures == 1 and holder.helpers_launched == 0


def test_a_count_that_fails_is_made_again_at_the_next_step(store: MemoryStore) -> None:
    jobs_in(store, 0, 5)
    launches = Launches()
    holder = fan_out(store, launches)
    original = store.count_due
    store.count_due = lambda partition, bucket: (_ for _ in ()).throw(RuntimeError("throttled"))  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        holder.step(MINUTE_START - timedelta(seconds=30), busy=False)
    store.count_due = original  # type: ignore[method-assign]
    holder.step(MINUTE_START - timedelta(seconds=29), busy=False)
    assert [a.partitions for a in launches.assignments] == [[0]]


def test_the_holder_leaves_a_live_helpers_slice_alone_and_takes_it_back_once_its_lease_expires(
    store: MemoryStore,
) -> None:
    jobs_in(store, 0, 5)
    launches = Launches()
    holder = fan_out(store, launches)
    launch_at = MINUTE_START - timedelta(seconds=30)
    holder.step(launch_at, busy=False)
    (assignment,) = launches.assignments
    # The helper starts 2 s later and takes its lease; it then dies (never renews: expiry at +8 s).
    taken = launch_at + timedelta(seconds=2)
    assert holder.step(taken - timedelta(seconds=0.5), busy=False) == frozenset()  # not taken yet
    assert store.acquire_poller_lease(assignment.lease_name, "helper", taken, taken + timedelta(seconds=6))
    assert holder.step(taken + timedelta(seconds=1), busy=False) == {0}
    assert holder.step(taken + timedelta(seconds=6), busy=False) == {0}
    assert holder.step(taken + timedelta(seconds=7), busy=False) == frozenset()  # expired: the holder's again


def test_a_holder_that_took_over_finds_the_helpers_its_predecessor_started(store: MemoryStore) -> None:
    at = MINUTE_START + timedelta(seconds=5)
    name = helper_lease_name("0-3", [2])
    assert store.acquire_poller_lease(name, "helper", at, at + timedelta(seconds=6))
    successor = fan_out(store, Launches())
    successor.new_reign()
    assert successor.step(at + timedelta(seconds=1), busy=False) == {2}


def test_a_busy_minute_makes_the_holder_look_for_helpers_it_did_not_start(store: MemoryStore) -> None:
    at = MINUTE_START + timedelta(seconds=5)
    assert store.acquire_poller_lease("0-3~1", "helper", at, at + timedelta(seconds=6))
    holder = fan_out(store, Launches())
    assert holder.step(at, busy=False) == frozenset()  # a quiet holder reads no lease
    assert holder.step(at + timedelta(seconds=1), busy=True) == {1}


# --- the whole loop: holder, helper, a dead helper ------------------------------------------------------


def holder_poller(store: MemoryStore, clock: ManualClock, queue: Queue, launches: Launches) -> Poller:
    config = PollerConfig(partitions=PARTITIONS, preload_lead=timedelta(seconds=10))
    return Poller(
        store,
        store,
        queue,
        NoAlerts(),
        clock,
        config,
        leases=store,
        helpers=launches,
        fan_out=FanOutPolicy(holder_rows=3, partitions_per_helper=1),
    )


def claimed_at(store: MemoryStore, jobs: list[Job]) -> dict[str, datetime]:
    """Each job's run: when it was claimed (created)."""
    runs = {job.id: store.get_run(make_run_id(job.id, MINUTE_START)) for job in jobs}
    assert all(run is not None for run in runs.values()), "a run was lost"
    return {job_id: run.created_at for job_id, run in runs.items() if run is not None}


def test_a_dead_helpers_rows_are_claimed_by_the_holder_late_but_every_one(store: MemoryStore) -> None:
    """The helper takes its lease and dies before its minute: the holder leaves the slice alone until the
    lease expires, then its sweep claims the slice's rows (once each); the other partitions fire on time."""
    delegated = jobs_in(store, 0, 5)
    kept = jobs_in(store, 1, 2)
    clock = ManualClock(MINUTE_START - timedelta(seconds=35))
    dies_at = MINUTE_START + timedelta(seconds=3)

    def helper_that_dies(assignment: HelperAssignment) -> None:
        assert store.acquire_poller_lease(assignment.lease_name, "h", clock.now(), dies_at)

    queue = Queue()
    poller = holder_poller(store, clock, queue, Launches(on_launch=helper_that_dies))
    poller.run_until(stop=lambda: clock.now() >= MINUTE_START + timedelta(seconds=15), sleep=clock.advance)
    late = claimed_at(store, delegated)
    on_time = claimed_at(store, kept)
    assert all(dies_at <= at <= dies_at + timedelta(seconds=2) for at in late.values())
    assert all(at == MINUTE_START for at in on_time.values())
    assert len(queue.sent) == len({m.run_id for m in queue.sent}) == 7


def test_a_helper_serves_its_slice_for_its_minute_and_gives_its_lease_back(store: MemoryStore) -> None:
    mine = jobs_in(store, 2, 3)
    theirs = jobs_in(store, 3, 2)
    clock = ManualClock(MINUTE_START - timedelta(seconds=28))
    assignment = HelperAssignment(
        group="0-3", partitions=[2], minute=MINUTE_START, serve_until=MINUTE_START + timedelta(seconds=150)
    )
    queue = Queue()
    shift = PollerShift(holder_poller(store, clock, queue, Launches(refuse=True)), store, LeaseTimings())
    report = shift.serve_helper("helper-1", assignment, sleep=clock.advance)
    assert all(at == MINUTE_START for at in claimed_at(store, mine).values())  # fired at their second
    assert {m.run_id for m in queue.sent} == {make_run_id(j.id, MINUTE_START) for j in mine}
    assert all(store.get_run(make_run_id(j.id, MINUTE_START)) is None for j in theirs)
    assert report.group == "0-3~2" and store.read_poller_lease("0-3~2").holder is None  # given back
    assert clock.now() < MINUTE_START + timedelta(seconds=64)  # returned once the minute was claimed


# --- the event and the launcher -------------------------------------------------------------------------


def test_a_helper_event_round_trips_from_the_launcher_to_the_poller_tick() -> None:
    calls: list[dict[str, Any]] = []

    class Client:
        def invoke(self, **kwargs: Any) -> None:
            calls.append(kwargs)

    assignment = HelperAssignment(
        group="0-15", partitions=[4, 5], minute=MINUTE_START, serve_until=MINUTE_START + timedelta(minutes=3)
    )
    LambdaHelperLauncher(Client(), "duetime-helper").launch(assignment)
    (call,) = calls
    assert call["FunctionName"] == "duetime-helper" and call["InvocationType"] == "Event"
    event = HelperEvent.model_validate(json.loads(call["Payload"]))
    assert event.helper == assignment


def test_a_helper_event_without_partitions_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError) as refused:
        HelperEvent.model_validate(
            {
                "helper": {
                    "group": "0-15",
                    "partitions": [],
                    "minute": "2026-12-02T00:00:00Z",
                    "serve_until": "x",
                }
            }
        )
    fields = {".".join(str(p) for p in error["loc"]) for error in refused.value.errors()}
    assert fields == {"helper.partitions", "helper.serve_until"}
