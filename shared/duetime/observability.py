"""Turning reports into metrics. ``MetricsSink`` is what powertools' ``Metrics`` offers (EMF on Lambda)."""

from __future__ import annotations

from typing import Protocol

from duetime.poller import ClaimReport, RecoveryReport
from duetime.preload import FireReport
from duetime.worker import WorkOutcome, WorkReport


class MetricsSink(Protocol):
    def add_metric(self, name: str, unit: str, value: float) -> None: ...


def record_poll(metrics: MetricsSink, claimed: ClaimReport, recovered: RecoveryReport | None) -> None:
    """A sweep's claims (and its recovery); the preload's claims are ``record_fire``'s: each run claimed
    is counted in ``RunsClaimed`` once, by whichever of the two claimed it."""
    metrics.add_metric("RunsClaimed", "Count", claimed.runs_created)
    metrics.add_metric("ClaimsLostToRace", "Count", claimed.lost_races)
    metrics.add_metric("RunRowsAlreadyThere", "Count", claimed.existing_runs)
    metrics.add_metric("MisfiredJobs", "Count", claimed.misfired_jobs)
    metrics.add_metric("DueIndexQueries", "Count", claimed.queries)
    if recovered is not None:
        metrics.add_metric("LeasesExpired", "Count", recovered.leases_expired)
        metrics.add_metric("RunsDead", "Count", recovered.dead)
        metrics.add_metric("MessagesRecovered", "Count", recovered.messages_resent)


def record_fire(metrics: MetricsSink, fired: FireReport) -> None:
    """The claims the minute preload made at their second."""
    metrics.add_metric("RunsClaimed", "Count", fired.runs_created)
    metrics.add_metric("ClaimsLostToRace", "Count", fired.lost_races)
    metrics.add_metric("RunRowsAlreadyThere", "Count", fired.existing_runs)


def record_poller_error(metrics: MetricsSink) -> None:
    """A poller tick raised (the poller logged it and went on)."""
    metrics.add_metric("PollerErrors", "Count", 1)


_OUTCOME_METRIC = {
    WorkOutcome.SUCCEEDED: "RunsSucceeded",
    WorkOutcome.FAILED: "RunsFailed",
    WorkOutcome.DEAD: "RunsDead",
    WorkOutcome.RETRY_SCHEDULED: "RunsRetried",
    WorkOutcome.DUPLICATE: "DuplicateMessagesDropped",
    WorkOutcome.DEFERRED: "RunsDeferredByTeamCap",
    WorkOutcome.STALE: "StaleWritesRejected",
}


def record_work(metrics: MetricsSink, report: WorkReport) -> None:
    metrics.add_metric(_OUTCOME_METRIC[report.outcome], "Count", 1)
    if report.outcome not in (WorkOutcome.DUPLICATE, WorkOutcome.DEFERRED):
        metrics.add_metric("RunsStarted", "Count", 1)
    if report.heartbeat_errors:
        metrics.add_metric("HeartbeatErrors", "Count", report.heartbeat_errors)
    if report.start_lateness_seconds is not None:
        metrics.add_metric("StartLateness", "Seconds", max(0.0, report.start_lateness_seconds))
