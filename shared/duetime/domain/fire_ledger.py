"""The fire ledger: every time a job should have fired in a window, matched to what happened.

It is computed, never kept: the times come from the job's schedule as it stood at each moment (its spec now,
walked back through its change history: ``job_history``), the outcomes from its stored runs, found by their
deterministic ids (``ids.make_run_id``). So the ledger cannot drift from the store: it is a reading of it.

Each expected time gets one label:

- ``on_time``: its run started within ``late_after`` of its fire time (nominal + the job's jitter offset);
- ``late``: it started later (``late_seconds`` says by how much);
- ``repeated``: the target was called for it more than once (``attempts``), each call with the run id as the
  idempotency key: a retry after a failed call, or a call again after its worker was lost;
- ``skipped``: it got no call, for a named reason (``SkipReason``): the misfire policy, the overlap policy,
  the job's calendars, the job paused, the team disabled, a daylight-saving gap, the run cancelled;
- ``missed``: it has no run and is past its catch-up window, with why where the store tells (not claimed:
  pollers stopped or behind; the schedule moved past it with no run: a claim records at most 100 skipped
  times, a row lost to a table restore; an edit of the job before it was claimed; its calendars changed
  since, so whether they excluded its date then cannot be told);
- ``pending``: not due yet, due and still inside its catch-up window, or claimed and not started.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import ValidationError

from duetime.domain.claim_plan import DEFAULT_MISFIRE_GRACE, RUN_RETENTION, catchup_window
from duetime.domain.dst import gap_end
from duetime.domain.ids import make_run_id
from duetime.domain.job_history import HIDDEN_CHANGE, JobChange
from duetime.domain.models import CronSchedule, Job, JobSpec, Run, RunStatus
from duetime.domain.schedule import (
    excluded_times_between,
    fire_time,
    next_nominal_after,
    nominals_between,
    rate_anchor,
    skipped_wall_times,
)
from duetime.domain.timeutil import ceil_seconds

DEFAULT_LATE_AFTER_SECONDS = 5  # the start-lateness alarm's threshold (RELIABILITY.md)
DEFAULT_LATE_AFTER = timedelta(seconds=DEFAULT_LATE_AFTER_SECONDS)
MAX_FIRES = 1_000  # fires one answer lists; the rest are asked for from ``next_from``
# The fields that decide a job's times: a change of any of them starts a new period of the ledger.
TIMING_FIELDS = ("schedule", "dst", "exclude", "start_at", "end_at", "jitter_seconds", "exact", "paused")


class FireLabel(StrEnum):
    ON_TIME = "on_time"
    LATE = "late"
    REPEATED = "repeated"
    SKIPPED = "skipped"
    MISSED = "missed"
    PENDING = "pending"


class SkipReason(StrEnum):
    MISFIRE = "misfire"
    OVERLAP = "overlap"
    CALENDAR = "calendar"
    PAUSED = "paused"
    TEAM_DISABLED = "team_disabled"
    DST = "dst"
    CANCELLED = "cancelled"
    OTHER = "other"


class MissReason(StrEnum):
    NOT_CLAIMED = "not_claimed"  # the job still waits for this time: pollers stopped or behind
    NO_RUN_RECORDED = "no_run_recorded"  # the schedule moved past it with no run row
    EDITED_BEFORE_CLAIM = "edited_before_claim"  # the job was rescheduled after it was due, before its claim
    # no run, and the job's calendars changed after this time: the dates they held then are not kept, so
    # whether this date was excluded (skipped on purpose) or not (missed) cannot be told
    CALENDAR_CHANGED = "calendar_changed"


@dataclass(frozen=True)
class Fire:
    """One expected time of a job and what became of it."""

    nominal_at: datetime
    fire_at: datetime
    label: FireLabel
    run_id: str
    reason: str | None = None  # a SkipReason or MissReason value
    detail: str = ""  # in words, for people
    status: RunStatus | None = None  # the run's, when there is one
    started_at: datetime | None = None
    late_seconds: float | None = None  # started_at - fire_at, for a run that started
    attempts: int = 0  # calls the target got (the run's attempt number once it started)


@dataclass(frozen=True)
class Period:
    """A stretch of time over which the job's timing fields were ``spec`` (``paused`` included)."""

    start: datetime
    end: datetime
    spec: JobSpec


@dataclass(frozen=True)
class Expected:
    nominal_at: datetime
    fire_at: datetime
    skip: SkipReason | None = None  # known to get no run before any run is read (paused, calendar, dst)
    detail: str = ""


@dataclass
class Ledger:
    job_id: str
    start: datetime
    end: datetime
    fires: list[Fire]  # in time order
    next_from: datetime | None = None  # more fires after the last listed: ask again from this instant
    notes: list[str] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        counted = Counter(fire.label.value for fire in self.fires)
        return {label.value: counted.get(label.value, 0) for label in FireLabel}


def window_start(job: Job, start: datetime, now: datetime) -> tuple[datetime, list[str]]:
    """The earliest instant the ledger can speak for: not before the job existed, nor before the oldest run
    the store keeps (``RUN_RETENTION``); with a note when the asked start was cut."""
    earliest = max(job.created_at, now - RUN_RETENTION)
    if start >= earliest:
        return start, []
    why = "the job was created then" if earliest == job.created_at else "runs are kept 30 days"
    return earliest, [f"fires before {earliest.isoformat()} are not listed: {why}"]


def periods(
    job: Job, changes: Sequence[JobChange], start: datetime, end: datetime
) -> tuple[list[Period], list[str]]:
    """The job's timing over [start, end), newest period last: its spec now, and before each change (newest
    first) the spec that change replaced, rebuilt from the change's ``from`` values. A change whose old
    value was not recorded (longer than the history keeps, or hidden) ends the walk: the ledger then starts
    at that change, with a note."""
    spec: JobSpec = job  # a Job is its spec, calendars resolved
    until = end
    found: list[Period] = []
    notes: list[str] = []
    for change in sorted(changes, key=lambda c: c.at, reverse=True):
        if change.at >= until:
            continue
        if change.at <= start:
            break
        timing = {name: value for name, value in change.fields.items() if name in TIMING_FIELDS}
        if change.action in ("pause", "resume") and "paused" not in timing:
            timing["paused"] = {"from": change.action == "resume", "to": change.action == "pause"}
        if not timing:
            continue
        found.append(Period(_first_after(change.at), until, spec))
        before = _spec_before(spec, timing)
        if before is None:
            notes.append(
                f"fires before {change.at.isoformat()} are not listed: "
                "the change made then is not recorded in full"
            )
            return list(reversed(found)), notes
        spec, until = before, change.at
    found.append(Period(max(start, _first_after(job.created_at)), until, spec))
    return [p for p in reversed(found) if p.start < p.end], notes


def _first_after(instant: datetime) -> datetime:
    """The first instant a job written at ``instant`` may run: its next time is strictly after the write's
    second (``claim_plan.initial_state`` from ``ceil_seconds``)."""
    return ceil_seconds(instant) + timedelta(seconds=1)


def _spec_before(spec: JobSpec, timing: Mapping[str, Mapping[str, Any]]) -> JobSpec | None:
    values = spec.model_dump(mode="json", include=set(JobSpec.model_fields))
    for name, moved in timing.items():
        old = moved.get("from")
        if moved == HIDDEN_CHANGE or (isinstance(old, str) and old.startswith("<") and old.endswith("JSON>")):
            return None
        values[name] = old
    try:
        before = JobSpec.model_validate_json(json.dumps(values))
    except ValidationError:
        return None
    if before.calendar_names and spec.calendar_names:
        return before.with_days_off(spec.days_off())
    return None if before.calendar_names else before  # calendars it read then are not known now


def expected_fires(job_id: str, created_at: datetime, period: Period, limit: int) -> list[Expected]:
    """The times the job should have fired in ``period``, in order (at most ``limit``): its nominal times
    with their fire times, each skipped one (paused, an excluded date, a spring-forward gap) with why."""
    spec = period.spec
    anchor = rate_anchor(spec, created_at)
    nominals = nominals_between(spec, anchor, period.start, period.end, limit)
    found: list[Expected] = []
    for i, nominal in enumerate(nominals):
        following = nominals[i + 1] if i + 1 < len(nominals) else next_nominal_after(spec, anchor, nominal)
        fire = fire_time(job_id, spec, nominal, following)
        if spec.paused:
            found.append(Expected(nominal, fire, SkipReason.PAUSED, "the job was paused"))
        else:
            found.append(Expected(nominal, fire))
    for own, became in excluded_times_between(spec, period.start, period.end, limit).items():
        if not became and period.start <= own < period.end:
            found.append(
                Expected(own, own, SkipReason.CALENDAR, "its date is excluded by the job's calendars")
            )
    if isinstance(spec.schedule, CronSchedule):
        zone = ZoneInfo(spec.schedule.timezone)
        for naive in skipped_wall_times(spec, period.start, period.end):
            at = gap_end(naive, zone)
            why = (
                f"wall time {naive.isoformat()} did not exist (spring forward); the job's dst policy skips it"
            )
            found.append(Expected(at, at, SkipReason.DST, why))
    return sorted(found, key=lambda e: e.nominal_at)[:limit]


def is_miss(fire: Fire) -> bool:
    """Whether the scheduler, not the job's own settings, kept this time from running as due: ``missed``, or
    ``skipped`` by the misfire policy (it was due while nothing claimed it, past its catch-up window). An
    audit lists both; a pause, a calendar, an overlap or a disabled team are choices, not misses."""
    return fire.label is FireLabel.MISSED or (
        fire.label is FireLabel.SKIPPED and fire.reason == SkipReason.MISFIRE.value
    )


def classify_skip(error: str | None) -> SkipReason:
    """The reason a skipped run's stored text gives (``claim_plan``'s words, read tolerantly)."""
    text = error or ""
    if text.startswith("missed"):
        return SkipReason.MISFIRE
    if text.startswith("overlap"):
        return SkipReason.OVERLAP
    if "team is disabled" in text:
        return SkipReason.TEAM_DISABLED
    if "excluded by the job's calendars" in text:
        return SkipReason.CALENDAR
    return SkipReason.OTHER


def label_fire(
    job: Job,
    expected: Expected,
    run: Run | None,
    now: datetime,
    late_after: timedelta,
    grace: timedelta,
    changes: Sequence[JobChange] = (),
    calendars_changed_at: datetime | None = None,
) -> Fire:
    """What became of one expected time, from its run (None: no run row). ``calendars_changed_at``: the
    latest change of the job's calendars (None: it uses none, or none changed), which the ledger reads as
    they are now."""
    run_id = make_run_id(job.id, expected.nominal_at)
    base: dict[str, Any] = {"nominal_at": expected.nominal_at, "fire_at": expected.fire_at, "run_id": run_id}
    if run is not None:
        return _from_run(run, base, late_after)
    calendars_changed = calendars_changed_at is not None and calendars_changed_at > expected.fire_at
    if expected.skip is not None:
        detail = expected.detail
        if expected.skip is SkipReason.CALENDAR and calendars_changed:
            assert calendars_changed_at is not None
            detail += f" (as the calendars are now; they changed at {calendars_changed_at.isoformat()})"
        return Fire(**base, label=FireLabel.SKIPPED, reason=expected.skip.value, detail=detail)
    overdue = now - expected.fire_at
    window = catchup_window(job, grace)
    waiting = job.state.next_nominal_at is not None and job.state.next_nominal_at <= expected.nominal_at
    if expected.fire_at > now:
        return Fire(**base, label=FireLabel.PENDING, detail="not due yet")
    if waiting and overdue <= window:
        return Fire(
            **base, label=FireLabel.PENDING, detail="due, inside its catch-up window, not claimed yet"
        )
    if waiting:
        detail = (
            f"not claimed: {overdue.total_seconds():.0f} s past its fire time, beyond the catch-up window of "
            f"{window.total_seconds():g} s (pollers stopped or behind); when claimed, the misfire policy "
            f"{job.misfire.value} applies"
        )
        return Fire(**base, label=FireLabel.MISSED, reason=MissReason.NOT_CLAIMED.value, detail=detail)
    edit = next(
        (c for c in changes if expected.fire_at <= c.at and set(c.fields) & set(TIMING_FIELDS)),
        None,
    )
    if edit is not None and edit.at - expected.fire_at <= window:
        detail = (
            f"the job was changed at {edit.at.isoformat()}, after this time was due and before it was claimed"
        )
        return Fire(
            **base, label=FireLabel.MISSED, reason=MissReason.EDITED_BEFORE_CLAIM.value, detail=detail
        )
    if calendars_changed:
        assert calendars_changed_at is not None
        detail = (
            f"no run, and the job's calendars changed at {calendars_changed_at.isoformat()}, after this "
            "time: if they excluded its date then, it was skipped on purpose (a calendar's earlier dates are "
            "not kept)"
        )
        return Fire(**base, label=FireLabel.MISSED, reason=MissReason.CALENDAR_CHANGED.value, detail=detail)
    detail = (
        "the schedule moved past this time with no run recorded (a claim records at most 100 skipped times; "
        "or the run's row is gone: lost to a table restore)"
    )
    return Fire(**base, label=FireLabel.MISSED, reason=MissReason.NO_RUN_RECORDED.value, detail=detail)


def _from_run(run: Run, base: dict[str, Any], late_after: timedelta) -> Fire:
    known: dict[str, Any] = {**base, "status": run.status, "started_at": run.started_at}
    if run.status is RunStatus.SKIPPED:
        error = run.result.error if run.result else None
        return Fire(**known, label=FireLabel.SKIPPED, reason=classify_skip(error).value, detail=error or "")
    if run.started_at is None:
        if run.status is RunStatus.CANCELLED:
            return Fire(
                **known, label=FireLabel.SKIPPED, reason=SkipReason.CANCELLED.value, detail="cancelled"
            )
        if run.status.terminal:  # dead before any worker started it
            detail = run.result.error if run.result and run.result.error else run.status.value
            return Fire(**known, label=FireLabel.MISSED, reason=run.status.value, detail=detail or "")
        return Fire(**known, label=FireLabel.PENDING, detail=f"claimed, {run.status.value}, not started yet")
    late = (run.started_at - run.fire_at).total_seconds()
    attempts = run.attempt
    known.update(late_seconds=max(0.0, late), attempts=attempts)
    if attempts > 1:
        detail = f"the target was called {attempts} times under run id {run.run_id}"
        return Fire(**known, label=FireLabel.REPEATED, detail=detail)
    if late > late_after.total_seconds():
        return Fire(**known, label=FireLabel.LATE, detail=f"started {late:.0f} s after its fire time")
    return Fire(**known, label=FireLabel.ON_TIME)


def ledger(
    job: Job,
    changes: Sequence[JobChange],
    runs_of: Callable[[list[str]], Mapping[str, Run]],
    start: datetime,
    end: datetime,
    now: datetime,
    late_after: timedelta = DEFAULT_LATE_AFTER,
    grace: timedelta = DEFAULT_MISFIRE_GRACE,
    limit: int = MAX_FIRES,
    calendars_changed_at: datetime | None = None,
) -> Ledger:
    """The job's fires in [start, end), in time order, at most ``limit`` (``next_from`` then says where the
    rest begin). ``runs_of``: run ids -> the stored runs among them (a batch read). ``job`` must have its
    calendars resolved; ``changes`` are its history entries since ``start`` (any order);
    ``calendars_changed_at``: when its calendars last changed (``label_fire``)."""
    start, notes = window_start(job, start, now)
    found, period_notes = periods(job, changes, start, end)
    notes += period_notes
    if period_notes and found:
        start = max(start, found[0].start)
    expected: list[Expected] = []
    for period in found:
        if len(expected) > limit:
            break
        expected += [
            e
            for e in expected_fires(job.id, job.created_at, period, limit + 1 - len(expected))
            if start <= e.nominal_at < end
        ]
    listed, rest = expected[:limit], expected[limit:]
    runs = runs_of([make_run_id(job.id, e.nominal_at) for e in listed]) if listed else {}
    fires = [
        label_fire(
            job,
            e,
            runs.get(make_run_id(job.id, e.nominal_at)),
            now,
            late_after,
            grace,
            changes,
            calendars_changed_at,
        )
        for e in listed
    ]
    return Ledger(job.id, start, end, fires, rest[0].nominal_at if rest else None, notes)
