"""A job is never held back by a run row in its way: manual runs have ids of their own, and a claim that finds
its run row already there moves the schedule on anyway (DynamoDB Local)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from duetime.adapters.dynamodb.catalog import DynamoCatalog
from duetime.api.service import JobService
from duetime.domain.claim_plan import DEFAULT_QUEUE_DEADLINE, PlannedRun, make_claim, new_run, plan_claim
from duetime.domain.clock import ManualClock
from duetime.domain.ids import make_run_id, partition_of
from duetime.domain.models import Job, MisfirePolicy, RunStatus, Team
from duetime.domain.timeutil import iso_z
from duetime.scheduling.poller import PollerConfig, claim_due_jobs
from duetime.wiring import run_budget

from .conftest import Stack

START = datetime(2026, 12, 1, 10, 0, 30, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def service(stack: Stack, clock: ManualClock) -> JobService:
    catalog = DynamoCatalog(stack.dynamodb, stack.names)
    return JobService(catalog, stack.store, stack.queue, clock, run_budget=run_budget(catalog))


@pytest.fixture
def team(stack: Stack) -> Team:
    team = stack.store.get_team("team-a")
    assert team is not None
    return team


def every_minute(service: JobService, team: Team, **spec: object) -> Job:
    body = {"name": "m", "schedule": {"cron": "* * * * *"}, "target": {"url": "https://example.com/x"}}
    return service.create_job(team, {**body, **spec})


def unjittered(service: JobService, team: Team, **spec: object) -> tuple[Job, datetime]:
    """An every-minute job that fires at its nominal times, and its first one."""
    job = every_minute(service, team, jitter_seconds=0, **spec)
    assert job.state.next_nominal_at is not None
    return job, job.state.next_nominal_at


def claim_at(stack: Stack, job: Job, now: datetime) -> int:
    config = PollerConfig(partitions=[partition_of(job.id)], preload_lead=None)
    report = claim_due_jobs(stack.store, stack.queue, config, now)
    assert report.lost_races == 0
    return report.runs_created


def test_a_trigger_in_the_jobs_own_nominal_second_does_not_freeze_its_schedule(
    stack: Stack, service: JobService, team: Team, clock: ManualClock
) -> None:
    job = every_minute(service, team, jitter_seconds=45)
    nominal, fire = job.state.next_nominal_at, job.state.next_fire_at
    assert nominal is not None and fire is not None and fire >= nominal
    clock.set(nominal)  # "run now", pressed during the second the schedule names
    manual = service.trigger(team, job.id)
    assert manual.run_id != make_run_id(job.id, nominal)
    assert re.fullmatch(rf"{job.id}@{iso_z(nominal)}~manual-[0-9a-f]{{10}}", manual.run_id)

    assert claim_at(stack, job, fire) == 1  # the scheduled run of that very second
    stored = stack.store.get_job(job.id)
    assert stored is not None and stored.state.next_nominal_at == nominal + MINUTE
    assert claim_at(stack, job, stored.state.next_fire_at or fire) == 1  # and the schedule goes on
    assert stack.store.get_run(manual.run_id) == manual


def test_two_triggers_in_one_second_are_two_runs(service: JobService, team: Team, stack: Stack) -> None:
    job = every_minute(service, team)
    first, second = service.trigger(team, job.id), service.trigger(team, job.id)
    assert first.run_id != second.run_id
    assert first.nominal_at == second.nominal_at == START.replace(microsecond=0)
    assert [stack.store.get_run(r.run_id) for r in (first, second)] == [first, second]


def test_a_claim_that_finds_its_run_row_already_there_still_moves_the_schedule(
    stack: Stack, service: JobService, team: Team
) -> None:
    job, nominal = unjittered(service, team)
    # The row is there before any claim (a table restored to an older job item, a row written by hand).
    already = new_run(job, PlannedRun(nominal, nominal), START, START + DEFAULT_QUEUE_DEADLINE)
    assert service.catalog.insert_run(already)

    config = PollerConfig(partitions=[partition_of(job.id)], preload_lead=None)
    report = claim_due_jobs(stack.store, stack.queue, config, nominal)
    assert (report.claimed_jobs, report.lost_races, report.existing_runs, report.runs) == (1, 0, 1, [])
    stored = stack.store.get_job(job.id)
    assert stored is not None and stored.state.next_nominal_at == nominal + MINUTE
    assert stack.store.get_run(already.run_id) == already  # left exactly as it was
    # Sent again: a row in the way of a claim that moved the schedule may never have been sent (a claim cut
    # between its run rows and its schedule move); a worker drops the message if the run is not waiting.
    assert [m.run_id for m in stack.messages()] == [already.run_id]
    assert claim_at(stack, job, nominal + MINUTE) == 1  # the next minute is claimed as usual


def test_a_catch_up_claim_creates_the_missing_runs_around_one_that_exists(
    stack: Stack, service: JobService, team: Team
) -> None:
    job, first = unjittered(service, team, misfire=MisfirePolicy.RUN_ALL)
    middle = first + MINUTE
    already = new_run(job, PlannedRun(middle, middle), START, START + DEFAULT_QUEUE_DEADLINE)
    assert service.catalog.insert_run(already)
    now = first + 2 * MINUTE + timedelta(minutes=5)  # three nominal times missed, and more

    outcome = stack.store.claim([make_claim(plan_claim(job, now), now)], now)
    assert outcome.claimed_jobs == 1 and outcome.existing_runs == 1 and outcome.lost_races == 0
    created = sorted(run.nominal_at for run in outcome.runs)
    assert middle not in created and created[0] == first and len(created) == 7
    assert all(stack.store.get_run(r.run_id) is not None for r in outcome.runs)
    middle_row = stack.store.get_run(already.run_id)
    assert middle_row is not None and middle_row.status is RunStatus.QUEUED and middle_row == already
    stored = stack.store.get_job(job.id)
    assert stored is not None and stored.state.next_nominal_at == first + 8 * MINUTE


def test_a_claim_that_lost_to_another_poller_is_still_a_lost_race(
    stack: Stack, service: JobService, team: Team
) -> None:
    job, nominal = unjittered(service, team)
    winner = stack.store.claim([make_claim(plan_claim(job, nominal), nominal)], nominal)
    loser = stack.store.claim([make_claim(plan_claim(job, nominal), nominal)], nominal)  # the same stale read
    assert winner.claimed_jobs == 1 and len(winner.runs) == 1
    assert (loser.claimed_jobs, loser.lost_races, loser.existing_runs, loser.runs) == (0, 1, 0, [])
