"""The worker's metrics: a run's outcome, its start's lateness, heartbeats that failed
(``ports.metrics.MetricsSink``)."""

from __future__ import annotations

from duetime.execution.worker import WorkOutcome, WorkReport
from duetime.ports.metrics import MetricsSink

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
