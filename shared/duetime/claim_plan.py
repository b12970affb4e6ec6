"""Deciding what a claim does, as a pure function of (job, now).

A claim turns the job's due nominal time(s) into runs and moves the schedule forward. Misfire policy applies
when the fire time is older than the job's catch-up window (``catchup_window_seconds``, or the poller's
``grace`` when the job has none): the scheduler (or this job's partition) was not polling then. The due
times that get no run (the misfire policy dropped them, or the team is disabled) are recorded as runs with
status ``skipped`` (the latest ``MAX_SKIPPED_RECORDED`` of a claim), written once the schedule move landed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime.ids import make_run_id, partition_of
from duetime.models import Job, JobState, MisfirePolicy, Run, RunResult, RunStatus
from duetime.schedule import fire_time, first_nominal, next_nominal_after, rate_anchor

log = logging.getLogger(__name__)

DEFAULT_MISFIRE_GRACE = timedelta(seconds=60)
RUN_RETENTION = timedelta(days=30)
DEFAULT_QUEUE_DEADLINE = timedelta(minutes=10)
RUN_ALL_CAP = 48  # runs a single claim creates for run_all (one transaction holds at most 100 items)
MISSED_SCAN_LIMIT = 100_000  # nominal times examined when catching up a long outage
MAX_SKIPPED_RECORDED = 100  # skipped due times a claim records as runs (the latest); the rest only counted


@dataclass(frozen=True)
class PlannedRun:
    nominal_at: datetime
    fire_at: datetime


@dataclass(frozen=True)
class SkippedTime:
    """A due time that gets no run, and why (the skipped run's ``result.error``)."""

    planned: PlannedRun
    reason: str


@dataclass(frozen=True)
class ClaimPlan:
    job: Job
    runs: tuple[PlannedRun, ...]
    next_state: JobState
    missed: int  # due nominal times that were older than the catch-up window
    dropped: int  # due nominal times that get no run (skip, run_once, or over the run_all cap)
    skipped: tuple[SkippedTime, ...] = ()  # of those, the ones recorded as skipped runs (the latest)


@dataclass(frozen=True)
class Claim:
    """A plan made concrete: the run rows to create and the schedule move, written in one transaction."""

    plan: ClaimPlan
    runs: tuple[Run, ...]
    skipped: tuple[Run, ...] = ()  # status skipped: written after the schedule move, never queued


def new_run(
    job: Job, planned: PlannedRun, now: datetime, queue_deadline: datetime, run_id: str | None = None
) -> Run:
    """A queued run row for one planned (nominal, fire) time, carrying the job's payload. Its id is the
    scheduled run id of that nominal time unless ``run_id`` says otherwise (a manual run)."""
    return Run(
        run_id=run_id or make_run_id(job.id, planned.nominal_at),
        job_id=job.id,
        team=job.team,
        partition=partition_of(job.id),
        nominal_at=planned.nominal_at,
        fire_at=planned.fire_at,
        status=RunStatus.QUEUED,
        attempt=1,
        max_attempts=job.retry.max_attempts,
        queue_deadline=queue_deadline,
        target=job.target,
        timeout_seconds=job.timeout_seconds,
        retry=job.retry,
        created_at=now,
        updated_at=now,
        expires_at_epoch=int((now + RUN_RETENTION).timestamp()),
    )


def skipped_run(job: Job, skipped: SkippedTime, now: datetime) -> Run:
    """The record of a due time that gets no call: a finished run with status skipped and the reason as its
    result's error, under the time's scheduled run id (so a backfill leaves it alone)."""
    run = new_run(job, skipped.planned, now, now)
    return run.model_copy(
        update={
            "status": RunStatus.SKIPPED,
            "queue_deadline": None,
            "finished_at": now,
            "result": RunResult(duration_ms=0, error=skipped.reason),
        }
    )


def make_claim(plan: ClaimPlan, now: datetime, queue_deadline: timedelta = DEFAULT_QUEUE_DEADLINE) -> Claim:
    runs = tuple(new_run(plan.job, planned, now, now + queue_deadline) for planned in plan.runs)
    return Claim(plan, runs, tuple(skipped_run(plan.job, skipped, now) for skipped in plan.skipped))


def catchup_window(job: Job, default: timedelta) -> timedelta:
    """How late a run of ``job`` may still start: its own window, or the installation's ``default``."""
    seconds = job.catchup_window_seconds
    return default if seconds is None else timedelta(seconds=seconds)


def plan_claim(
    job: Job, now: datetime, grace: timedelta = DEFAULT_MISFIRE_GRACE, team_active: bool = True
) -> ClaimPlan:
    """What claiming ``job`` at ``now`` creates. The job must be due (its fire time <= now). ``grace``: the
    catch-up window of a job without its own. A job of a disabled team (``team_active`` False) gets no runs:
    its due times pass (recorded as skipped), and the schedule moves on."""
    grace = catchup_window(job, grace)
    state = job.state
    assert state.next_nominal_at is not None and state.next_fire_at is not None, "job is not scheduled"
    anchor = rate_anchor(job, job.created_at)

    # Every nominal time whose fire time has come, starting with the stored one.
    due = [PlannedRun(state.next_nominal_at, state.next_fire_at)]
    nominal = next_nominal_after(job, anchor, state.next_nominal_at)
    fire = None
    while nominal is not None:
        following = next_nominal_after(job, anchor, nominal)
        fire = fire_time(job.id, job, nominal, following)
        if fire > now or len(due) >= MISSED_SCAN_LIMIT:
            break
        due.append(PlannedRun(nominal, fire))
        nominal = following

    late = [r for r in due if now - r.fire_at > grace]
    on_time = [r for r in due if now - r.fire_at <= grace]
    window = f"past the catch-up window of {grace.total_seconds():g} s"
    if not late:
        runs, why = on_time, ""
    elif job.misfire is MisfirePolicy.RUN_ALL:
        runs, why = due[:RUN_ALL_CAP], f"missed: run_all runs at most {RUN_ALL_CAP} missed times a claim"
        if len(due) > RUN_ALL_CAP:
            log.warning(
                "run_all misfire capped",
                extra={"job_id": job.id, "missed": len(due), "cap": RUN_ALL_CAP},
            )
    elif job.misfire is MisfirePolicy.RUN_ONCE:
        runs, why = [due[-1]], f"missed ({window}): run_once runs only the latest missed time"
    else:
        runs, why = on_time, f"missed ({window}): misfire policy skip"
    if not team_active:
        runs, why = [], "the team is disabled"
    chosen = set(runs)
    skipped = [SkippedTime(r, why) for r in due if r not in chosen][-MAX_SKIPPED_RECORDED:]

    next_state = JobState(
        next_nominal_at=nominal,
        next_fire_at=fire if nominal is not None else None,
        last_scheduled_at=due[-1].nominal_at,
        version=state.version + 1,
    )
    return ClaimPlan(
        job, tuple(runs), next_state, missed=len(late), dropped=len(due) - len(runs), skipped=tuple(skipped)
    )


def initial_state(job: Job, now: datetime, version: int = 0) -> JobState:
    """Schedule a new, edited or resumed job from ``now`` (never earlier)."""
    nominal = first_nominal(job, job.created_at, now)
    if nominal is None:
        return JobState(last_scheduled_at=job.state.last_scheduled_at, version=version)
    following = next_nominal_after(job, rate_anchor(job, job.created_at), nominal)
    return JobState(
        next_nominal_at=nominal,
        next_fire_at=fire_time(job.id, job, nominal, following),
        last_scheduled_at=job.state.last_scheduled_at,
        version=version,
    )
