"""Deciding what a claim does, as a pure function of (job, now).

A claim turns the job's due nominal time(s) into runs and moves the schedule forward. Misfire policy applies
when the fire time is older than the job's catch-up window (``catchup_window_seconds``, or the poller's
``grace`` when the job has none): the scheduler (or this job's partition) was not polling then. The due
times that get no run (the misfire policy dropped them, or the team is disabled) are recorded as runs with
status ``skipped`` (the latest ``MAX_SKIPPED_RECORDED`` of a claim), written once the schedule move landed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from duetime.domain.ids import make_run_id, partition_of
from duetime.domain.models import Job, JobState, MisfirePolicy, OverlapPolicy, Run, RunResult, RunStatus
from duetime.domain.schedule import fire_time, first_nominal, next_nominal_after, rate_anchor
from duetime.domain.timeutil import whole_seconds

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
    waits_for: str | None = None  # buffer_one: the run id this run starts after (``Run.waits_for``)


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
        waits_for=planned.waits_for,
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
    runs = tuple(
        watched(plan.job, new_run(plan.job, planned, now, now + queue_deadline)) for planned in plan.runs
    )
    return Claim(plan, runs, tuple(skipped_run(plan.job, skipped, now) for skipped in plan.skipped))


def watched(job: Job, run: Run) -> Run:
    """A scheduled run of a job with a success deadline, carrying the instant it must succeed by
    (``Run.success_by``: nominal + deadline); the claim writes its deadline watch
    (``duetime.execution.deadlines``). Only the runs a claim creates are watched: skipped times, manual runs
    and backfills are not."""
    if job.success_deadline_seconds is None:
        return run
    return run.model_copy(
        update={"success_by": run.nominal_at + timedelta(seconds=job.success_deadline_seconds)}
    )


def catchup_window(job: Job, default: timedelta) -> timedelta:
    """How late a run of ``job`` may still start: its own window, or the installation's ``default``."""
    seconds = job.catchup_window_seconds
    return default if seconds is None else timedelta(seconds=seconds)


def plan_claim(
    job: Job,
    now: datetime,
    grace: timedelta = DEFAULT_MISFIRE_GRACE,
    team_active: bool = True,
    active: Run | None = None,
) -> ClaimPlan:
    """What claiming ``job`` at ``now`` creates. The job must be due (its fire time <= now). ``grace``: the
    catch-up window of a job without its own. A job of a disabled team (``team_active`` False) gets no runs:
    its due times pass (recorded as skipped), and the schedule moves on. ``active``: the job's active run
    (``JobState.active_run``) as read before the claim, for a job whose overlap policy is not allow."""
    grace = catchup_window(job, grace)
    state = job.state
    if job.calendar_names and (moved := _excluded_since_planned(job)) is not None:
        return moved
    due, nominal, fire = _due_times(job, now)
    late = [r for r in due if now - r.fire_at > grace]
    on_time = [r for r in due if now - r.fire_at <= grace]
    runs, why = _misfire_runs(job, due, on_time, grace) if late else (on_time, "")
    if not team_active:
        runs, why = [], "the team is disabled"
    chosen = set(runs)
    skipped = [SkippedTime(r, why) for r in due if r not in chosen]
    runs, overlapping = apply_overlap(job, runs, active)
    skipped = sorted([*skipped, *overlapping], key=lambda t: t.planned.nominal_at)[-MAX_SKIPPED_RECORDED:]

    next_state = JobState(
        next_nominal_at=nominal,
        next_fire_at=fire if nominal is not None else None,
        last_scheduled_at=due[-1].nominal_at,
        version=state.version + 1,
        active_run=make_run_id(job.id, runs[-1].nominal_at) if runs and guarded(job) else state.active_run,
    )
    return ClaimPlan(
        job, tuple(runs), next_state, missed=len(late), dropped=len(due) - len(runs), skipped=tuple(skipped)
    )


def _excluded_since_planned(job: Job) -> ClaimPlan | None:
    """For a job that uses calendars (resolved with their dates as they are now): None when its stored next
    time is still one of its times; else a plan with no run that records that time as skipped and moves the
    job to its next time under the dates as they are now. It covers the moments between a calendar change
    and the re-plan of its jobs (``duetime.api.service.JobService.replan_calendar_users``), and a re-plan cut
    short: a claim never runs a time the job's calendars exclude when it claims."""
    state = job.state
    assert state.next_nominal_at is not None and state.next_fire_at is not None, "job is not scheduled"
    anchor = rate_anchor(job, job.created_at)
    current = next_nominal_after(job, anchor, state.next_nominal_at - timedelta(seconds=1))
    if current is not None and current <= state.next_nominal_at:
        return None  # still its time (or an earlier one a change allowed: the re-plan moves it)
    planned = PlannedRun(state.next_nominal_at, state.next_fire_at)
    fire = None
    if current is not None:
        fire = fire_time(job.id, job, current, next_nominal_after(job, anchor, current))
    next_state = JobState(
        next_nominal_at=current,
        next_fire_at=fire,
        last_scheduled_at=state.next_nominal_at,
        version=state.version + 1,
        active_run=state.active_run,
    )
    why = "its date is excluded by the job's calendars, changed since the time was planned"
    return ClaimPlan(job, (), next_state, missed=0, dropped=1, skipped=(SkippedTime(planned, why),))


def _due_times(job: Job, now: datetime) -> tuple[list[PlannedRun], datetime | None, datetime | None]:
    """Every nominal time of ``job`` whose fire time has come, starting with the stored one (at most
    ``MISSED_SCAN_LIMIT``); and the nominal time after them with its fire time (None: the schedule ends)."""
    state = job.state
    assert state.next_nominal_at is not None and state.next_fire_at is not None, "job is not scheduled"
    anchor = rate_anchor(job, job.created_at)
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
    return due, nominal, fire


def _misfire_runs(
    job: Job, due: list[PlannedRun], on_time: list[PlannedRun], grace: timedelta
) -> tuple[list[PlannedRun], str]:
    """The runs the job's misfire policy keeps of ``due`` when some are past the catch-up window ``grace``,
    and why the others get none."""
    window = f"past the catch-up window of {grace.total_seconds():g} s"
    if job.misfire is MisfirePolicy.RUN_ALL:
        if len(due) > RUN_ALL_CAP:
            log.warning(
                "run_all misfire capped",
                extra={"job_id": job.id, "missed": len(due), "cap": RUN_ALL_CAP},
            )
        return due[:RUN_ALL_CAP], f"missed: run_all runs at most {RUN_ALL_CAP} missed times a claim"
    if job.misfire is MisfirePolicy.RUN_ONCE:
        return [due[-1]], f"missed ({window}): run_once runs only the latest missed time"
    return on_time, f"missed ({window}): misfire policy skip"


def active_run_ids(jobs: Sequence[Job]) -> list[str]:
    """The active runs to read before claiming ``jobs``: those of jobs held to an overlap policy."""
    return [job.state.active_run for job in jobs if guarded(job) and job.state.active_run is not None]


def sets_active_run(claim: Claim) -> bool:
    """Whether ``claim`` creates runs of a job held to an overlap policy: its run rows and the job's new
    active run must then be written together, all or none (a store writes them in one transaction)."""
    return bool(claim.runs) and claim.plan.next_state.active_run != claim.plan.job.state.active_run


def guarded(job: Job) -> bool:
    """Whether the job's runs are held to an overlap policy (its claims keep ``JobState.active_run``)."""
    return job.overlap is not OverlapPolicy.ALLOW


# The runs a claim may create under an overlap policy, by the state of the job's active run: finished (or
# none), unfinished, or a buffered run that has not started.
OVERLAP_ROOM = {
    OverlapPolicy.SKIP: {"free": 1, "unfinished": 0, "buffered": 0},
    OverlapPolicy.BUFFER_ONE: {"free": 2, "unfinished": 1, "buffered": 0},
}


def apply_overlap(
    job: Job, runs: list[PlannedRun], active: Run | None
) -> tuple[list[PlannedRun], list[SkippedTime]]:
    """The runs an overlap policy lets a claim create (in order, each buffered one naming the run it waits
    for), and the times it skips. ``active``: the job's latest scheduled run as read before the claim.

    - allow: all of them.
    - skip: the first one if the active run is finished (or there is none); otherwise none.
    - buffer_one: if the active run is finished, the first one, and a second one waiting for it; if the
      active run is unfinished and not itself waiting (it is queued without ``waits_for``, running or waiting
      to retry), one waiting for it; if it is a buffered run that has not started, none.
    """
    if not guarded(job) or not runs:
        return runs, []
    free = active is None or active.status.terminal
    buffered = active is not None and active.status is RunStatus.QUEUED and active.waits_for is not None
    room = OVERLAP_ROOM[job.overlap]["free" if free else "buffered" if buffered else "unfinished"]
    kept: list[PlannedRun] = []
    previous = None if free or active is None else active.run_id
    for planned in runs[:room]:
        kept.append(replace(planned, waits_for=previous))
        previous = make_run_id(job.id, planned.nominal_at)
    if active is not None and not free:
        why = f"overlap {job.overlap.value}: run {active.run_id} is {active.status.value}"
    else:
        why = f"overlap {job.overlap.value}: an earlier time of this claim runs"
    return kept, [SkippedTime(planned, why) for planned in runs[room:]]


def initial_state(job: Job, now: datetime, version: int = 0) -> JobState:
    """Schedule a new, edited or resumed job from ``now`` (never earlier)."""
    nominal = first_nominal(job, job.created_at, now)
    if nominal is None:
        return JobState(
            last_scheduled_at=job.state.last_scheduled_at, version=version, active_run=job.state.active_run
        )
    following = next_nominal_after(job, rate_anchor(job, job.created_at), nominal)
    return JobState(
        next_nominal_at=nominal,
        next_fire_at=fire_time(job.id, job, nominal, following),
        last_scheduled_at=job.state.last_scheduled_at,
        version=version,
        active_run=job.state.active_run,  # an edit keeps the overlap guard: the run may still be unfinished
    )


def replanned_state(job: Job, now: datetime) -> JobState:
    """The state of a job whose calendars changed (``job`` resolved with their new dates), one version up: its
    next time computed again from where it stands, after its last claimed time and from ``now`` on, or from
    its stored next time when that is due already (an unclaimed due time the new dates still allow stays
    due). A claimed time is never touched; a time the new dates allow before ``now`` is not run."""
    state = job.state
    if state.next_nominal_at is None:
        return state.model_copy(update={"version": state.version + 1})
    after = min(whole_seconds(now), state.next_nominal_at - timedelta(seconds=1))
    if state.last_scheduled_at is not None:
        after = max(after, state.last_scheduled_at)
    anchor = rate_anchor(job, job.created_at)
    nominal = next_nominal_after(job, anchor, after)
    if nominal is None:
        return state.model_copy(
            update={"next_nominal_at": None, "next_fire_at": None, "version": state.version + 1}
        )
    following = next_nominal_after(job, anchor, nominal)
    return state.model_copy(
        update={
            "next_nominal_at": nominal,
            "next_fire_at": fire_time(job.id, job, nominal, following),
            "version": state.version + 1,
        }
    )
