"""Success deadlines: a dead-man's switch per job (``success_deadline_seconds``).

Every run a claim creates for a job with a success deadline carries ``Run.success_by`` (nominal time +
deadline), and the claim writes a *watch* for it (``ports.DeadlineStore``) in an index by (partition,
deadline) that pollers read, never a Scan. The rules:

* A scheduled time is **met** when its run succeeded at or before ``success_by`` (the store's clock, as
  ``finished_at`` records it).
* Otherwise, once the deadline has passed, it is **missed**: one ``missed`` alert for that time, and the job
  is flagged missing since that nominal time (unless it already is). Running, retrying, dead, failed or
  cancelled at the deadline, or succeeded after it: all missed.
* A met time later than the flag's clears the flag; the one writer that clears it raises ``recovered``.

Who checks: the pollers, for their partitions, at a reap pass every ``DEADLINE_CHECK_INTERVAL`` (30
seconds); and a worker, at once, for each watched run it has just recorded succeeded within its deadline, so
``recovered`` comes when the run succeeds, not at its deadline. A settled watch is dropped. A ``missed``
alert is published before its watch is dropped, so a checker that dies between the two leaves the watch to
be checked again: at least once, and a repeat names the same run. A watch is dropped without an alert when
its job was deleted or no longer has a deadline, or its run does not exist (the claim that wrote the watch
lost its race to an edit).

Not watched: due times the job skipped (misfire, overlap, a disabled team: they are recorded as skipped
runs, and no run was meant to succeed), manual runs and backfills.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime.domain.models import Run, RunStatus
from duetime.domain.timeutil import iso_z
from duetime.ports import Alert, AlertSink, DeadlineStore, DeadlineWatch, JobStore, RunStore

log = logging.getLogger(__name__)

DEADLINE_CHECK_INTERVAL = timedelta(seconds=30)  # a poller's reap passes check deadlines this often
DEADLINE_PAGE_SIZE = 100  # watches read per partition per check
DEADLINE_CHECK_BUDGET = timedelta(milliseconds=500)  # a poller's check stops after this, to check again soon


@dataclass
class DeadlineReport:
    checked: int = 0
    met: int = 0
    missed: int = 0
    recovered: int = 0
    dropped: int = 0  # watches of deleted jobs, jobs no longer watched, runs never created
    cut: bool = False  # stopped by ``keep_going`` with watches perhaps left: check again soon


def met(run: Run, watch: DeadlineWatch) -> bool:
    """Whether ``run`` succeeded by the watch's deadline."""
    return (
        run.status is RunStatus.SUCCEEDED
        and run.finished_at is not None
        and run.finished_at <= watch.deadline_at
    )


def check_deadlines(
    deadlines: DeadlineStore,
    runs: RunStore,
    jobs: JobStore,
    alerts: AlertSink,
    partitions: Sequence[int],
    now: datetime,
    limit: int = DEADLINE_PAGE_SIZE,
    keep_going: Callable[[], bool] | None = None,
) -> DeadlineReport:
    """Settle the watches of ``partitions`` whose deadline passed before ``now`` (a poller's check), up to
    ``limit`` a partition; ``keep_going`` is asked before each watch but the first, and a False stops the
    check (``cut``):
    a poller gives it a time budget, so that many missed times at once (a target down for many watched
    jobs) delay their alerts, never its claims."""
    report = DeadlineReport()
    for partition in partitions:
        for watch in deadlines.due_watches(partition, now, limit):
            if report.checked and keep_going is not None and not keep_going():  # one at least, each check
                report.cut = True
                return report
            report.checked += 1
            _settle(deadlines, runs, jobs, alerts, watch, now, report)
    return report


def settle_succeeded(
    deadlines: DeadlineStore, alerts: AlertSink, succeeded: Sequence[Run], now: datetime
) -> DeadlineReport:
    """A worker's part: the watches of runs it has just recorded succeeded at ``now``, settled at once when
    ``now`` is within their deadline (a late success is left to the pollers' check, which finds it
    missed). Failures are logged, never raised: the watch stays and the pollers settle it at its deadline."""
    report = DeadlineReport()
    for run in succeeded:
        watch = DeadlineWatch.of(run)
        if watch is None or now > watch.deadline_at:
            continue
        try:
            report.checked += 1
            report.met += 1
            _recover_if_missing(deadlines, alerts, watch, run, now, report)
            deadlines.drop_watch(watch)
        except Exception:
            log.warning("settling a success deadline failed; the pollers will", exc_info=True)
    return report


def _settle(
    deadlines: DeadlineStore,
    runs: RunStore,
    jobs: JobStore,
    alerts: AlertSink,
    watch: DeadlineWatch,
    now: datetime,
    report: DeadlineReport,
) -> None:
    run = runs.get_run(watch.run_id)
    job = jobs.get_job(watch.job_id)
    if run is None or job is None or job.success_deadline_seconds is None:
        report.dropped += 1
    elif met(run, watch):
        report.met += 1
        _recover_if_missing(deadlines, alerts, watch, run, run.finished_at or now, report)
    else:
        report.missed += 1
        if deadlines.missing_since(watch.job_id) is None:
            deadlines.flag_missing(watch.job_id, watch.nominal_at)  # a lost race: someone flagged it first
        why = _why_missed(run, watch)
        alerts.publish(Alert("missed", run.team, run.job_id, run.run_id, run.attempt, why, now))
    deadlines.drop_watch(watch)


def _recover_if_missing(
    deadlines: DeadlineStore,
    alerts: AlertSink,
    watch: DeadlineWatch,
    run: Run,
    succeeded_at: datetime,
    report: DeadlineReport,
) -> None:
    since = deadlines.missing_since(watch.job_id)
    if since is None or since >= watch.nominal_at:
        return
    if deadlines.clear_missing(watch.job_id, since):
        report.recovered += 1
        detail = f"{iso_z(watch.nominal_at)} succeeded by its deadline; missing since {iso_z(since)}"
        recovered = Alert("recovered", run.team, run.job_id, run.run_id, run.attempt, detail, succeeded_at)
        alerts.publish(recovered)


def _why_missed(run: Run, watch: DeadlineWatch) -> str:
    deadline = iso_z(watch.deadline_at)
    if run.status is RunStatus.SUCCEEDED and run.finished_at is not None:
        return f"succeeded at {iso_z(run.finished_at)}, after its deadline {deadline}"
    return f"not succeeded by its deadline {deadline}: {run.status.value}, attempt {run.attempt}"
