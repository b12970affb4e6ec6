"""The overlap policies as claims apply them (``claim_plan.apply_overlap``): what a due time does while the
job's previous scheduled run is unfinished. Pure: the job, its active run as read, and ``now``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from duetime.domain.claim_plan import (
    PlannedRun,
    initial_state,
    make_claim,
    new_run,
    plan_claim,
    sets_active_run,
)
from duetime.domain.ids import make_run_id
from duetime.domain.models import Job, JobSpec, OverlapPolicy, Run, RunStatus

CREATED = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
DUE = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
JOB_ID = "01JDZ3K6R2V9Q8T7S6P5N4M3K2"


def minutely(overlap: str, **extra: object) -> Job:
    spec = JobSpec.model_validate(
        {
            "name": "sync",
            "schedule": {"rate": "1 minute"},
            "target": {"url": "https://example.com"},
            "exact": True,
            "overlap": overlap,
            **extra,
        }
    )
    job = Job(**spec.model_dump(), id=JOB_ID, team="t", created_at=CREATED, updated_at=CREATED)
    state = initial_state(job, DUE - timedelta(seconds=1))
    return job.model_copy(update={"state": state})


def run_of(job: Job, nominal: datetime, status: RunStatus, waits_for: str | None = None) -> Run:
    run = new_run(job, PlannedRun(nominal, nominal, waits_for), CREATED, CREATED + timedelta(minutes=10))
    return run.model_copy(update={"status": status})


def with_active(job: Job, run: Run) -> Job:
    return job.model_copy(update={"state": job.state.model_copy(update={"active_run": run.run_id})})


def test_allow_runs_every_time_and_keeps_no_active_run() -> None:
    job = minutely("allow")
    plan = plan_claim(job, DUE + timedelta(seconds=1))
    claim = make_claim(plan, DUE + timedelta(seconds=1))
    assert len(plan.runs) == 1 and plan.next_state.active_run is None and not sets_active_run(claim)


@pytest.mark.parametrize("overlap", ["skip", "buffer_one"])
def test_a_first_run_becomes_the_active_run_in_the_claims_own_write(overlap: str) -> None:
    job = minutely(overlap)
    plan = plan_claim(job, DUE + timedelta(seconds=1))
    claim = make_claim(plan, DUE + timedelta(seconds=1))
    assert [r.waits_for for r in claim.runs] == [None]
    assert plan.next_state.active_run == make_run_id(JOB_ID, DUE) and sets_active_run(claim)


@pytest.mark.parametrize("status", [RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.RETRY_WAIT])
def test_skip_records_a_skipped_time_while_the_previous_run_is_unfinished(status: RunStatus) -> None:
    job = minutely("skip")
    previous = run_of(job, DUE - timedelta(minutes=1), status)
    plan = plan_claim(with_active(job, previous), DUE + timedelta(seconds=1), active=previous)
    assert plan.runs == () and [s.planned.nominal_at for s in plan.skipped] == [DUE]
    assert plan.skipped[0].reason == f"overlap skip: run {previous.run_id} is {status.value}"
    assert plan.next_state.active_run == previous.run_id  # still the one to wait out
    assert plan.next_state.next_nominal_at == DUE + timedelta(minutes=1)  # the schedule moves on


@pytest.mark.parametrize("status", [RunStatus.SUCCEEDED, RunStatus.DEAD, RunStatus.CANCELLED, None])
def test_skip_runs_once_the_previous_run_finished_or_is_gone(status: RunStatus | None) -> None:
    job = minutely("skip")
    previous = run_of(job, DUE - timedelta(minutes=1), status or RunStatus.SUCCEEDED)
    plan = plan_claim(
        with_active(job, previous), DUE + timedelta(seconds=1), active=previous if status else None
    )
    assert [r.nominal_at for r in plan.runs] == [DUE] and plan.runs[0].waits_for is None
    assert plan.next_state.active_run == make_run_id(JOB_ID, DUE)


def test_buffer_one_queues_one_run_behind_an_unfinished_one_and_skips_while_it_waits() -> None:
    job = minutely("buffer_one")
    running = run_of(job, DUE - timedelta(minutes=1), RunStatus.RUNNING)
    plan = plan_claim(with_active(job, running), DUE + timedelta(seconds=1), active=running)
    assert [(r.nominal_at, r.waits_for) for r in plan.runs] == [(DUE, running.run_id)]
    buffered = run_of(job, DUE, RunStatus.QUEUED, waits_for=running.run_id)
    later = DUE + timedelta(minutes=1)
    job = with_active(job.model_copy(update={"state": plan.next_state}), buffered)
    again = plan_claim(job, later + timedelta(seconds=1), active=buffered)
    assert again.runs == () and [s.planned.nominal_at for s in again.skipped] == [later]
    assert again.skipped[0].reason == f"overlap buffer_one: run {buffered.run_id} is queued"
    started = buffered.model_copy(update={"status": RunStatus.RUNNING})  # the buffered one has started
    third = plan_claim(job, later + timedelta(seconds=1), active=started)
    assert [(r.nominal_at, r.waits_for) for r in third.runs] == [(later, buffered.run_id)]


def test_a_catch_up_of_several_times_keeps_one_run_or_one_and_its_buffer() -> None:
    """After an outage with run_all, an overlap policy still holds: skip keeps the first missed time, and
    buffer_one the first two (the second waiting for the first); the rest are skipped."""
    now = DUE + timedelta(minutes=3, seconds=1)
    skip = plan_claim(minutely("skip", misfire="run_all"), now)
    assert [r.nominal_at.minute for r in skip.runs] == [0] and len(skip.skipped) == 3
    assert skip.skipped[0].reason == "overlap skip: an earlier time of this claim runs"
    buffer = plan_claim(minutely("buffer_one", misfire="run_all"), now)
    first = make_run_id(JOB_ID, DUE)
    assert [(r.nominal_at.minute, r.waits_for) for r in buffer.runs] == [(0, None), (1, first)]
    assert buffer.next_state.active_run == make_run_id(JOB_ID, DUE + timedelta(minutes=1))


def test_an_edit_keeps_the_active_run() -> None:
    job = minutely("skip")
    previous = run_of(job, DUE - timedelta(minutes=1), RunStatus.RUNNING)
    assert initial_state(with_active(job, previous), DUE).active_run == previous.run_id


def test_overlap_is_one_of_three_policies() -> None:
    assert [p.value for p in OverlapPolicy] == ["allow", "skip", "buffer_one"]
    with pytest.raises(ValueError, match="overlap"):
        minutely("never")
