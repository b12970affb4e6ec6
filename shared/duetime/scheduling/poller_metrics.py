"""The pollers' metrics: a sweep's and the preload's claims, a tick's errors (``ports.metrics``)."""

from __future__ import annotations

from duetime.ports.metrics import MetricsSink, add_counts
from duetime.scheduling.poller import ClaimReport, RecoveryReport
from duetime.scheduling.preload import FireReport


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
