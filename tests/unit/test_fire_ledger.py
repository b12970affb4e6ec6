"""The fire ledger on the in-memory twin: the real ``JobService``, ``Poller`` and ``Worker`` on a manual
clock, then ``FireLedgerService`` reading what they stored. Each test makes one thing happen to a job's fires
(a late start, pollers stopped, a pause, a lost worker, an edit, a restore that lost rows) and reads back the
label it must get."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest

from duetime.adapters.memory import InMemoryCatalog, MemoryAlerts, MemoryQueue, MemoryStore
from duetime.api.fires import FireLedgerService
from duetime.api.service import JobService
from duetime.domain.clock import ManualClock
from duetime.domain.errors import InvalidInput
from duetime.domain.fire_ledger import Fire, FireLabel
from duetime.domain.ids import PARTITIONS, make_run_id
from duetime.domain.models import Job, Team
from duetime.execution.worker import Worker
from duetime.local.system import EventSourceMapping
from duetime.ports import TargetRequest, TargetResponse
from duetime.scheduling.poller import Poller, PollerConfig

from ..api_twin import serving_twin
from ..lambda_support import api_request
from ..twin_support import T0

MINUTELY = {"name": "minutely", "schedule": {"rate": "1 minute"}, "target": {"url": "https://example.com/h"}}


@dataclass
class Target:
    during: Any = None
    requests: list[TargetRequest] = field(default_factory=list)

    def call(self, request: TargetRequest) -> TargetResponse:
        self.requests.append(request)
        if self.during is not None:
            during, self.during = self.during, None
            during(request)
        return TargetResponse(200, "ok", None, duration_ms=3)


@dataclass
class World:
    clock: ManualClock
    store: MemoryStore
    queue: MemoryQueue
    service: JobService
    ledger: FireLedgerService
    team: Team
    poller: Poller
    target: Target = field(default_factory=Target)

    def job(self, **fields: Any) -> Job:
        return self.service.create_job(self.team, {**MINUTELY, "exact": True, **fields})

    def claim_and_work(self) -> None:
        """A poller sweep now, then a worker takes what it queued."""
        self.poller.claim()
        self.work()

    def work(self, owner: str = "worker-a") -> None:
        alerts = MemoryAlerts()
        worker = Worker(self.store, self.store, self.queue, alerts, self.target, self.clock, owner=owner)
        mapping = EventSourceMapping(self.queue, worker)  # type: ignore[arg-type]
        mapping.poll_once(wait_seconds=0)
        assert not mapping.errors, mapping.errors

    def minutes(self, count: int, late_by: float = 0) -> None:
        """``count`` minutes, each claimed and worked ``late_by`` seconds after its whole minute."""
        for _ in range(count):
            now = self.clock.now()
            self.clock.set(now.replace(second=0, microsecond=0) + timedelta(minutes=1, seconds=late_by))
            self.claim_and_work()

    def fires(self, job: Job, since: datetime = T0, **kwargs: Any) -> list[Fire]:
        return self.ledger.fires(
            self.team, job.id, since, self.clock.now() + timedelta(seconds=1), **kwargs
        ).fires

    def labels(self, job: Job, **kwargs: Any) -> list[tuple[str, str, str | None]]:
        return [(f.nominal_at.strftime("%H:%M"), f.label.value, f.reason) for f in self.fires(job, **kwargs)]


@pytest.fixture
def world() -> World:
    clock = ManualClock(T0)
    store = MemoryStore()
    queue = MemoryQueue(clock, visibility_timeout=90)
    catalog = InMemoryCatalog(store)
    service = JobService(catalog, store, queue, clock)
    team, _ = service.create_team("alpha")
    config = PollerConfig(partitions=list(range(PARTITIONS)), preload_lead=None)
    poller = Poller(store, store, queue, MemoryAlerts(), clock, config, store, calendars=catalog)
    return World(clock, store, queue, service, FireLedgerService(service), team, poller)


def test_runs_started_on_time_are_on_time_and_one_started_late_says_by_how_much(world: World) -> None:
    job = world.job()
    world.minutes(2)
    world.minutes(1, late_by=12)

    fires = world.fires(job)

    assert [f.label for f in fires] == [FireLabel.ON_TIME, FireLabel.ON_TIME, FireLabel.LATE]
    assert fires[2].late_seconds == 12 and "12 s" in fires[2].detail
    assert [f.run_id for f in fires] == [make_run_id(job.id, f.nominal_at) for f in fires]


def test_fires_while_pollers_are_stopped_are_missed_then_skipped_by_the_misfire_policy_once_claimed(
    world: World,
) -> None:
    job = world.job(misfire="run_once")
    world.minutes(2)  # 10:01, 10:02 on time
    world.clock.set(T0 + timedelta(minutes=7))  # pollers stopped for five minutes

    during = world.labels(job)
    assert during == [
        ("10:01", "on_time", None),
        ("10:02", "on_time", None),
        ("10:03", "missed", "not_claimed"),
        ("10:04", "missed", "not_claimed"),
        ("10:05", "missed", "not_claimed"),
        ("10:06", "pending", None),  # 60 s overdue: still inside the catch-up window
        ("10:07", "pending", None),
    ]
    assert "misfire policy run_once" in world.fires(job)[2].detail

    world.claim_and_work()  # the pollers are back: run_once runs the latest time only

    assert world.labels(job) == [
        ("10:01", "on_time", None),
        ("10:02", "on_time", None),
        ("10:03", "skipped", "misfire"),
        ("10:04", "skipped", "misfire"),
        ("10:05", "skipped", "misfire"),
        ("10:06", "skipped", "misfire"),
        ("10:07", "on_time", None),
    ]


def test_times_while_the_job_was_paused_are_skipped_as_paused(world: World) -> None:
    job = world.job()
    world.minutes(1)
    world.clock.advance(10)
    world.service.update_job(world.team, job.id, {"paused": True})
    world.clock.set(T0 + timedelta(minutes=4, seconds=30))
    world.service.update_job(world.team, job.id, {"paused": False})
    world.minutes(1)

    assert world.labels(job) == [
        ("10:01", "on_time", None),
        ("10:02", "skipped", "paused"),
        ("10:03", "skipped", "paused"),
        ("10:04", "skipped", "paused"),
        ("10:05", "on_time", None),
    ]


def test_a_run_whose_worker_was_lost_mid_call_is_repeated_with_its_attempts(world: World) -> None:
    job = world.job()

    def lose_the_worker(_: TargetRequest) -> None:
        world.clock.advance(62)  # past the 60 s lease: the reaper gives the run to the next attempt
        assert world.poller.recover().leases_expired == 1

    world.target.during = lose_the_worker
    world.minutes(1)
    world.work("worker-b")

    fire = world.fires(job)[0]
    assert (fire.label, fire.attempts) == (FireLabel.REPEATED, 2)
    assert len([r for r in world.target.requests if r.headers["Idempotency-Key"] == fire.run_id]) == 2


def test_an_edit_changes_the_times_from_then_on_and_the_times_before_keep_the_old_schedule(
    world: World,
) -> None:
    job = world.job()
    world.minutes(2)  # 10:01, 10:02 under "every minute"
    world.clock.advance(5)
    world.service.update_job(world.team, job.id, {"schedule": {"rate": "5 minutes"}})
    world.clock.set(T0 + timedelta(minutes=15))
    world.claim_and_work()

    times = [(time, label) for time, label, _ in world.labels(job)]
    assert times[:2] == [("10:01", "on_time"), ("10:02", "on_time")]
    assert all(int(time[-2:]) % 5 == 0 for time, _ in times[2:])  # the rate counts from creation
    assert len(times) > 2


def test_a_run_row_lost_to_a_restore_is_missed_and_says_the_schedule_moved_past_it(world: World) -> None:
    job = world.job()
    world.minutes(3)
    lost = make_run_id(job.id, T0 + timedelta(minutes=2))
    with world.store.lock:
        del world.store._runs[lost]

    fire = world.fires(job)[1]

    assert (fire.label, fire.reason, fire.run_id) == (FireLabel.MISSED, "no_run_recorded", lost)


def test_a_time_the_overlap_policy_skips_is_named_and_a_claimed_unstarted_run_is_pending(
    world: World,
) -> None:
    job = world.job(overlap="skip")
    world.clock.set(T0 + timedelta(minutes=1))
    world.poller.claim()  # 10:01 queued, never worked
    world.clock.set(T0 + timedelta(minutes=2))
    world.poller.claim()  # 10:02 skipped: 10:01 is unfinished

    assert world.labels(job) == [("10:01", "pending", None), ("10:02", "skipped", "overlap")]
    assert "not started" in world.fires(job)[0].detail


def test_times_of_a_disabled_team_are_skipped_as_team_disabled(world: World) -> None:
    job = world.job()
    world.minutes(1)
    world.service.teams.set_disabled(world.team.team_id, True)
    world.minutes(1)

    assert world.labels(job) == [("10:01", "on_time", None), ("10:02", "skipped", "team_disabled")]


def test_the_window_must_run_forward_and_is_cut_at_the_jobs_creation(world: World) -> None:
    job = world.job()
    world.minutes(1)
    with pytest.raises(InvalidInput) as refused:
        world.ledger.fires(world.team, job.id, T0 + timedelta(hours=1), T0)
    assert refused.value.field == "from"

    found = world.ledger.fires(world.team, job.id, T0 - timedelta(days=3), world.clock.now())
    assert found.start == job.created_at and "created" in found.notes[0]


def test_a_long_window_is_paged_in_time_order(world: World) -> None:
    job = world.job()
    world.clock.set(T0 + timedelta(minutes=30))

    first = world.ledger.fires(world.team, job.id, T0, world.clock.now(), limit=10)
    rest = world.ledger.fires(world.team, job.id, first.next_from, world.clock.now(), limit=100)

    times = [f.nominal_at for f in first.fires + rest.fires]
    assert len(first.fires) == 10 and rest.next_from is None
    assert times == sorted(times) and len(set(times)) == 29


def test_the_api_serves_a_jobs_fires_and_the_teams_audit_and_names_a_bad_window_field() -> None:
    with serving_twin(T0) as twin:
        job = twin.service.create_job(twin.service.team("alpha"), {**MINUTELY, "exact": True})
        twin.clock.set(T0 + timedelta(minutes=5))  # nothing claimed: pollers stopped

        def get(path: str, query: dict[str, str]) -> tuple[int, Any]:
            response = api_request("GET", path, twin.token, None, query)
            return response["statusCode"], json.loads(response["body"])

        status, fires = get(f"/v1/jobs/{job.id}/fires", {"from": "2026-12-01T10:00:00Z"})
        assert status == 200, fires
        assert [f["label"] for f in fires["fires"]] == ["missed"] * 3 + ["pending"]  # to: now, exclusive
        assert fires["counts"]["missed"] == 3 and fires["fires"][0]["reason"] == "not_claimed"

        status, audit = get("/v1/audit", {"from": "2026-12-01T10:00:00Z"})
        assert status == 200, audit
        assert [j["job_id"] for j in audit["jobs_with_misses"]] == [job.id]
        assert audit["counts"]["missed"] == 3 and audit["jobs_checked"] == 1

        status, refused = get(f"/v1/jobs/{job.id}/fires", {"from": "2026-12-01T10:00:00"})
        assert status == 422 and refused["error"]["field"] == "from", refused
        status, refused = get(
            f"/v1/jobs/{job.id}/fires", {"from": "2026-12-01T11:00:00Z", "to": "2026-12-01T10:00:00Z"}
        )
        assert status == 422 and refused["error"]["field"] == "from", refused
        status, refused = get(f"/v1/jobs/{job.id}/fires", {"late_after_seconds": "-1"})
        assert status == 422 and "late_after_seconds" in json.dumps(refused), refused


def test_the_audit_lists_a_job_whose_times_the_misfire_policy_dropped_after_an_outage_and_not_a_paused_one(
    world: World,
) -> None:
    world.job(name="outage", misfire="run_once")
    paused = world.job(name="paused")
    world.minutes(1)
    world.service.update_job(world.team, paused.id, {"paused": True})
    world.clock.set(T0 + timedelta(minutes=5))  # pollers stopped for 4 minutes
    world.claim_and_work()

    page = world.ledger.audit(world.team, T0, world.clock.now() + timedelta(seconds=1))

    by_name = {one.job.name: one for one in page.jobs}
    assert by_name["outage"].missed == 3  # 10:02-10:04 skipped by run_once; 10:05 ran
    assert [f.reason for f in by_name["outage"].misses] == ["misfire"] * 3
    assert by_name["paused"].missed == 0 and by_name["paused"].counts["skipped"] == 4


@pytest.mark.parametrize("bad", ["0.5", "1733000000", "2026-13-01T00:00:00Z", "yesterday", "2026-12-01"])
def test_a_window_bound_that_is_not_an_instant_with_an_offset_is_refused_naming_it(bad: str) -> None:
    with serving_twin(T0) as twin:
        job = twin.service.create_job(twin.service.team("alpha"), {**MINUTELY, "exact": True})
        for name in ("from", "to"):
            response = api_request("GET", f"/v1/jobs/{job.id}/fires", twin.token, None, {name: bad})
            body = json.loads(response["body"])
            assert response["statusCode"] == 422 and name in json.dumps(body["error"]), (name, bad, body)


def test_a_time_its_calendar_excluded_then_is_not_called_missed_after_the_calendar_changes_but_said_unknown(
    world: World,
) -> None:
    """The ledger reads a job's calendars as they are now (a calendar's earlier dates are not kept): a time
    with no run whose calendar changed since is `missed: calendar_changed`, never a plain miss; a time with a
    run is what its run says, whatever the calendar now excludes."""
    today, far = T0.date().isoformat(), (T0 + timedelta(days=400)).date().isoformat()
    calendars = world.service.calendars
    calendars.create(world.team.team_id, {"name": "closed", "source": {"dates": [today]}}, "test")
    calendars.create(world.team.team_id, {"name": "later", "source": {"dates": [far]}}, "test")
    every_minute = {"cron": "* * * * *", "timezone": "UTC"}
    closed = world.job(name="closed", schedule=every_minute, exclude={"calendars": ["closed"]})
    open_ = world.job(name="open", schedule=every_minute, exclude={"calendars": ["later"]})
    world.minutes(3)
    assert {(label, reason) for _, label, reason in world.labels(closed)} == {("skipped", "calendar")}
    assert {(label, reason) for _, label, reason in world.labels(open_)} == {("on_time", None)}

    world.clock.advance(10)
    calendars.update(world.team.team_id, "closed", {"source": {"dates": [far]}}, "test")
    calendars.update(world.team.team_id, "later", {"source": {"dates": [today]}}, "test")

    closed_fires = world.fires(closed)
    assert {(f.label, f.reason) for f in closed_fires} == {(FireLabel.MISSED, "calendar_changed")}
    assert "skipped on purpose" in closed_fires[0].detail
    assert {(label, reason) for _, label, reason in world.labels(open_)} == {("on_time", None)}
