"""Success deadlines (``duetime.execution.deadlines``): the real poller and worker on the in-memory twin with
a manual clock. A scheduled time is met when its run succeeded by nominal + deadline; otherwise one ``missed``
alert, and the next time met after it raises ``recovered``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import ValidationError

from duetime.adapters.memory import MemoryAlerts, MemoryQueue, MemoryStore
from duetime.domain.claim_plan import make_claim, plan_claim
from duetime.domain.clock import ManualClock
from duetime.domain.ids import PARTITIONS
from duetime.domain.models import JobSpec, RunResult, RunStatus, Team
from duetime.execution.deadlines import DEADLINE_CHECK_INTERVAL, check_deadlines, met
from duetime.execution.worker import Worker, WorkReport
from duetime.local.system import EventSourceMapping
from duetime.ports import DeadlineWatch, TargetRequest, TargetResponse
from duetime.scheduling.poller import Poller, PollerConfig

from ..twin_support import T0, a_job, at

DEADLINE = 120  # seconds


@dataclass
class Answer:
    status: int = 200

    def call(self, request: TargetRequest) -> TargetResponse:
        return TargetResponse(self.status, "", None, duration_ms=3)


@dataclass
class World:
    clock: ManualClock
    store: MemoryStore
    queue: MemoryQueue
    alerts: MemoryAlerts
    poller: Poller
    target: Answer

    def worker(self) -> Worker:
        return Worker(
            self.store, self.store, self.queue, self.alerts, self.target, self.clock, deadlines=self.store
        )

    def deliver(self) -> list[WorkReport]:
        reports: list[WorkReport] = []
        mapping = EventSourceMapping(self.queue, self.worker(), on_report=reports.append)  # type: ignore[arg-type]
        mapping.poll_once(wait_seconds=0)
        assert not mapping.errors, mapping.errors
        return reports

    def claim_next(self) -> str:
        """Claim what is due at the clock's second; the one run's id."""
        (run,) = self.poller.claim().runs
        return run.run_id

    def check(self) -> None:
        """A deadline check as a poller makes it (every few reap passes)."""
        check_deadlines(self.store, self.store, self.store, self.alerts, range(PARTITIONS), self.clock.now())

    def kinds(self) -> list[str]:
        """The deadline alerts raised, in order (a failed run's own alert left out)."""
        return [a.kind for a in self.alerts.published if a.kind in ("missed", "recovered")]


@pytest.fixture
def world() -> World:
    clock = ManualClock(T0)
    store = MemoryStore()
    store.put_team(Team(team_id="team-a", max_concurrency=5))
    queue = MemoryQueue(clock, visibility_timeout=90)
    alerts = MemoryAlerts()
    config = PollerConfig(partitions=list(range(PARTITIONS)), preload_lead=None)
    poller = Poller(store, store, queue, alerts, clock, config, store, deadlines=store)
    return World(clock, store, queue, alerts, poller, Answer())


def watched_job(world: World, **spec: Any) -> str:
    """A watched 1-minute job due at the clock's second; its id."""
    job = a_job(world.clock.now(), success_deadline_seconds=DEADLINE, **spec)
    world.store.put_job(job, world.clock.now())
    return job.id


def test_a_claimed_run_carries_its_deadline_and_gets_a_watch(world: World) -> None:
    watched_job(world)
    run_id = world.claim_next()

    run = world.store.get_run(run_id)
    assert run is not None and run.success_by == at(DEADLINE)
    world.clock.advance(DEADLINE + 1)
    assert [w.run_id for w in world.store.due_watches(run.partition, world.clock.now(), 10)] == [run_id]


def test_a_job_without_a_deadline_gets_no_watch(world: World) -> None:
    job = a_job(world.clock.now())
    world.store.put_job(job, world.clock.now())
    run_id = world.claim_next()

    run = world.store.get_run(run_id)
    assert run is not None and run.success_by is None
    world.clock.advance(3600)
    assert world.store.due_watches(run.partition, world.clock.now(), 10) == []


def test_a_time_met_raises_nothing_and_its_watch_is_settled_by_the_worker(world: World) -> None:
    watched_job(world)
    run_id = world.claim_next()
    world.clock.advance(5)
    (report,) = world.deliver()
    assert report.run_id == run_id

    world.clock.advance(DEADLINE)
    world.check()
    assert world.alerts.published == []
    run = world.store.get_run(run_id)
    assert run is not None and world.store.due_watches(run.partition, world.clock.now(), 10) == []


def test_a_time_not_succeeded_by_its_deadline_raises_one_missed_alert_and_flags_the_job(world: World) -> None:
    job_id = watched_job(world)
    run_id = world.claim_next()
    world.clock.advance(DEADLINE - 2)
    world.check()
    assert world.alerts.published == []  # not yet

    world.clock.advance(3)
    world.check()
    world.clock.advance(30)
    world.check()

    (alert,) = world.alerts.published
    assert (alert.kind, alert.run_id, alert.job_id, alert.team) == ("missed", run_id, job_id, "team-a")
    assert "queued" in alert.detail
    assert world.store.missing_since(job_id) == T0


def test_a_success_after_the_deadline_is_still_missed(world: World) -> None:
    watched_job(world)
    world.claim_next()
    world.clock.advance(DEADLINE + 10)
    world.deliver()  # succeeds now, late: the worker leaves the watch to the pollers

    world.check()

    (alert,) = world.alerts.published
    assert alert.kind == "missed" and "after its deadline" in alert.detail


def test_a_success_in_the_deadlines_last_second_is_met() -> None:
    job = a_job(T0, success_deadline_seconds=DEADLINE)
    (run,) = make_claim(plan_claim(job, T0), T0).runs
    watch = DeadlineWatch.of(run)
    assert watch is not None
    finished = run.model_copy(update={"status": RunStatus.SUCCEEDED, "finished_at": at(DEADLINE)})
    assert met(finished, watch)
    assert not met(finished.model_copy(update={"finished_at": at(DEADLINE + 1)}), watch)
    assert not met(finished.model_copy(update={"status": RunStatus.DEAD}), watch)


def test_the_next_time_met_after_a_miss_raises_recovered_when_its_run_succeeds(world: World) -> None:
    job_id = watched_job(world)
    world.target.status = 400  # failed: the first time is missed
    world.claim_next()
    world.clock.advance(2)
    world.deliver()
    world.clock.advance(DEADLINE)
    world.check()
    assert world.kinds() == ["missed"]

    world.target.status = 200
    world.clock.set(at(180))  # a later time: run_once runs the latest (180 s), its watch comes with it
    (run,) = world.poller.claim().runs
    assert run.success_by == at(180 + DEADLINE)
    world.clock.advance(1)
    world.deliver()

    assert world.kinds() == ["missed", "recovered"]  # at once, from the worker
    recovered = world.alerts.published[-1]
    assert recovered.job_id == job_id and "missing since" in recovered.detail
    assert world.store.missing_since(job_id) is None
    world.clock.advance(DEADLINE * 2)
    world.check()
    assert world.kinds() == ["missed", "recovered"]  # nothing more


def test_misses_in_a_row_raise_one_alert_each_and_keep_the_first_flag(world: World) -> None:
    job_id = watched_job(world)
    world.claim_next()
    world.clock.advance(60)
    world.claim_next()
    world.clock.advance(DEADLINE + 1)

    world.check()

    assert world.kinds() == ["missed", "missed"]
    assert world.store.missing_since(job_id) == T0


def test_a_watch_of_a_deleted_job_or_a_run_never_made_is_dropped_without_an_alert(world: World) -> None:
    job_id = watched_job(world)
    run_id = world.claim_next()
    with world.store.lock:  # the job deleted (the API's catalog would)
        del world.store._jobs[job_id]
    world.clock.advance(DEADLINE + 1)

    world.check()

    assert world.alerts.published == []
    run = world.store.get_run(run_id)
    assert run is not None and world.store.due_watches(run.partition, world.clock.now(), 10) == []


def test_skipped_times_are_not_watched(world: World) -> None:
    job = a_job(at(-120), success_deadline_seconds=DEADLINE, misfire="skip")
    world.store.put_job(job, world.clock.now())
    report = world.poller.claim()  # -120 s is past the 60 s window: skipped; -60 s and now run
    assert (report.runs_skipped, len(report.runs)) == (1, 2)
    world.clock.advance(DEADLINE * 3)
    world.check()
    assert sorted(a.run_id for a in world.alerts.published) == sorted(r.run_id for r in report.runs)


def test_the_poller_checks_deadlines_at_its_first_reap_pass_and_then_every_30_seconds(world: World) -> None:
    checked = []
    for _ in range(13):  # a reap pass every 5 s for a minute
        checked.append(world.poller.recover().deadlines is not None)
        world.clock.advance(5)
    assert DEADLINE_CHECK_INTERVAL.total_seconds() == 30
    assert checked == [True, False, False, False, False, False] * 2 + [True]


@pytest.mark.parametrize("value", [0, 59, 30 * 86_400 + 1, 1.5, "an hour"])
def test_a_deadline_out_of_range_is_refused_naming_the_field(value: object) -> None:
    spec = {"name": "n", "schedule": {"rate": "1 minute"}, "target": {"url": "https://example.com/x"}}
    with pytest.raises(ValidationError) as refused:
        JobSpec.model_validate({**spec, "success_deadline_seconds": value})
    assert refused.value.errors()[0]["loc"] == ("success_deadline_seconds",)


def test_a_run_without_a_deadline_has_no_watch() -> None:
    job = a_job(T0)
    (run,) = make_claim(plan_claim(job, T0), T0).runs
    assert DeadlineWatch.of(run) is None
    assert DeadlineWatch.of(run.model_copy(update={"result": RunResult(duration_ms=1)})) is None


def test_a_check_stops_when_its_budget_runs_out_and_the_poller_goes_on_at_its_next_pass(world: World) -> None:
    for _ in range(3):
        watched_job(world)
    runs = world.poller.claim().runs
    assert len(runs) == 3
    world.clock.advance(DEADLINE + 1)
    answers = iter([False])  # asked before the second watch: the first is always settled
    cut = check_deadlines(
        world.store,
        world.store,
        world.store,
        world.alerts,
        range(PARTITIONS),
        world.clock.now(),
        keep_going=lambda: next(answers, False),
    )
    assert (cut.checked, cut.missed, cut.cut) == (1, 1, True)

    slow = ManualClock(world.clock.now())
    world.poller.clock = slow
    world.poller.deadlines = _Slow(world.store, slow)  # each watch read takes a whole second
    first = world.poller.recover().deadlines
    assert first is not None and first.cut and first.checked == 1
    slow.advance(5)
    again = world.poller.recover().deadlines  # the next pass, not 30 s later
    assert again is not None and again.checked >= 1
    assert len([a for a in world.alerts.published if a.kind == "missed"]) == 1 + first.checked + again.checked


class _Slow:
    """The twin's deadline store, each read of due watches moving the clock a second (a slow store)."""

    def __init__(self, store: MemoryStore, clock: ManualClock) -> None:
        self.store = store
        self.clock = clock

    def due_watches(self, partition: int, now: Any, limit: int) -> Any:
        found = self.store.due_watches(partition, now, limit)
        if found:
            self.clock.advance(1)
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)
