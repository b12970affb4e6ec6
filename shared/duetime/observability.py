"""Turning reports into metrics. ``MetricsSink`` is what powertools' ``Metrics`` offers (EMF on Lambda)."""

from __future__ import annotations

from typing import Protocol

from duetime.execution.worker import WorkOutcome, WorkReport
from duetime.scheduling.poller import ClaimReport, RecoveryReport
from duetime.scheduling.preload import FireReport


class MetricsSink(Protocol):
    def add_metric(self, name: str, unit: str, value: float) -> None: ...


def add_counts(metrics: MetricsSink, counts: dict[str, float], unit: str = "Count") -> None:
    """Publish each count that is not zero. A custom metric is billed for every hour it gets a data point,
    so an idle poller publishing zeros would pay for all of them (``capacity/fixed_cost.py``); the stack's
    alarms and dashboard read a missing data point as zero (``infra/cdk/duetime_cdk/observability.py``)."""
    for name, value in counts.items():
        if value:
            metrics.add_metric(name, unit, value)


def record_poll(metrics: MetricsSink, claimed: ClaimReport, recovered: RecoveryReport | None) -> None:
    """A sweep's claims (and its recovery); the preload's claims are ``record_fire``'s: each run claimed
    is counted in ``RunsClaimed`` once, by whichever of the two claimed it. Zeros are not published."""
    add_counts(
        metrics,
        {
            "RunsClaimed": claimed.runs_created,
            "ClaimsLostToRace": claimed.lost_races,
            "RunRowsAlreadyThere": claimed.existing_runs,
            "MisfiredJobs": claimed.misfired_jobs,
            "DueIndexQueries": claimed.queries,
            "UnreadableRows": claimed.unreadable_rows,
        },
    )
    if recovered is not None:
        add_counts(
            metrics,
            {
                "LeasesExpired": recovered.leases_expired,
                "RunsDead": recovered.dead,
                "MessagesRecovered": recovered.messages_resent,
            },
        )


def record_fire(metrics: MetricsSink, fired: FireReport) -> None:
    """The claims the minute preload made at their second (zeros are not published)."""
    add_counts(
        metrics,
        {
            "RunsClaimed": fired.runs_created,
            "ClaimsLostToRace": fired.lost_races,
            "RunRowsAlreadyThere": fired.existing_runs,
            "UnreadableRows": fired.unreadable_rows,
        },
    )


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


INSTALLATION_DIMENSION = "installation"


def installation_dimensions(installation: str) -> dict[str, str]:
    """The default dimensions of every metric duetime publishes (with powertools' ``service``): the
    installation's name, so that two stacks in one account and region share no metric and no alarm."""
    return {INSTALLATION_DIMENSION: installation}
