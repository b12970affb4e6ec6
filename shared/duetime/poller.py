"""The poller: claim due jobs in its partitions, queue their runs, and recover runs nobody is minding.

Finding due work (no Scan, ever): the due index is keyed by (partition, minute bucket) and sorted by fire
time, so "what is due in partition p" is a Query per bucket from p's low-water mark up to the current
minute. Writers never file a row in a bucket older than the minute they write in, so once a past bucket
is seen empty (and has settled, allowing for index propagation and clock error) the mark moves past it
for good. An idle partition therefore costs one or two small Queries a tick.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from duetime.claim_plan import DEFAULT_MISFIRE_GRACE, DEFAULT_QUEUE_DEADLINE, make_claim, plan_claim
from duetime.clock import Clock
from duetime.models import Job, Run, RunResult, RunStatus
from duetime.ports import Alert, AlertSink, JobStore, ReapCandidate, RunMessage, RunQueue, RunStore
from duetime.timeutil import minute_bucket, parse_minute_bucket

log = logging.getLogger(__name__)
MINUTE = timedelta(minutes=1)


@dataclass(frozen=True)
class PollerConfig:
    partitions: Sequence[int]
    page_size: int = 500
    max_claims_per_tick: int = 10_000
    misfire_grace: timedelta = DEFAULT_MISFIRE_GRACE
    queue_deadline: timedelta = DEFAULT_QUEUE_DEADLINE
    bucket_settle: timedelta = timedelta(seconds=30)
    reap_page_size: int = 100


@dataclass
class ClaimReport:
    due_rows: int = 0
    queries: int = 0
    claimed_jobs: int = 0
    runs_created: int = 0
    lost_races: int = 0
    misfired_jobs: int = 0
    dropped_runs: int = 0
    transactions: int = 0
    runs: list[Run] = field(default_factory=list)


@dataclass
class RecoveryReport:
    leases_expired: int = 0
    dead: int = 0
    messages_resent: int = 0
    queries: int = 0


def find_due_jobs(store: JobStore, config: PollerConfig, now: datetime, report: ClaimReport) -> list[Job]:
    """Due rows of every partition, from its low-water mark to the current minute; advances the marks."""
    current = minute_bucket(now)
    marks = store.low_water_marks(config.partitions)
    report.queries += 1
    due: dict[str, Job] = {}
    for partition in config.partitions:
        mark = marks.get(partition, current)
        bucket_start = parse_minute_bucket(mark)
        new_mark = mark
        while minute_bucket(bucket_start) <= current and len(due) < config.max_claims_per_tick:
            bucket = minute_bucket(bucket_start)
            rows = store.due_jobs(partition, bucket, now, config.page_size)
            report.queries += 1
            for job in rows:
                due.setdefault(job.id, job)
            settled = bucket_start + MINUTE + config.bucket_settle <= now
            if not rows and settled and new_mark == bucket:
                new_mark = minute_bucket(bucket_start + MINUTE)  # empty for good: never read it again
            if len(rows) == config.page_size:
                break  # the bucket has more; the next tick reads on after these are claimed
            bucket_start += MINUTE
        if new_mark != mark:
            store.advance_low_water_mark(partition, new_mark)
    report.due_rows = len(due)
    return list(due.values())


def claim_due_jobs(store: JobStore, queue: RunQueue, config: PollerConfig, now: datetime) -> ClaimReport:
    """Claim every due job in the configured partitions and queue the runs the claims created."""
    report = ClaimReport()
    jobs = find_due_jobs(store, config, now, report)
    if not jobs:
        return report
    claims = []
    for job in jobs:
        plan = plan_claim(job, now, config.misfire_grace)
        if plan.missed:
            report.misfired_jobs += 1
        report.dropped_runs += plan.dropped
        claims.append(make_claim(plan, now, config.queue_deadline))
    outcome = store.claim(claims, now)
    report.claimed_jobs = outcome.claimed_jobs
    report.lost_races = outcome.lost_races
    report.transactions = outcome.transactions
    report.runs = outcome.runs
    report.runs_created = len(outcome.runs)
    if outcome.runs:
        # If we die between the commit and this send, the runs' queue deadline brings them back.
        queue.send([RunMessage(run.run_id, run.attempt) for run in outcome.runs])
    return report


def recover_runs(
    store: RunStore, queue: RunQueue, alerts: AlertSink, config: PollerConfig, now: datetime
) -> RecoveryReport:
    """Re-queue runs whose lease expired (next attempt, or dead when none is left) and re-send the message
    of runs that waited past their queue deadline (the message was lost)."""
    report = RecoveryReport()
    messages: list[RunMessage] = []
    for partition in config.partitions:
        candidates = store.runs_needing_attention(partition, now, config.reap_page_size)
        report.queries += 1
        for candidate in candidates:
            message = _recover_one(store, alerts, candidate, now, config, report)
            if message is not None:
                messages.append(message)
    if messages:
        queue.send(messages)
    return report


def _recover_one(
    store: RunStore,
    alerts: AlertSink,
    candidate: ReapCandidate,
    now: datetime,
    config: PollerConfig,
    report: RecoveryReport,
) -> RunMessage | None:
    deadline = now + config.queue_deadline
    if candidate.status is RunStatus.RUNNING:
        if candidate.attempt < candidate.max_attempts:
            run = store.requeue_expired_lease(candidate, now, deadline)
            if run is None:
                return None
            report.leases_expired += 1
            return RunMessage(run.run_id, run.attempt)
        result = RunResult(duration_ms=0, error="lease expired on the last attempt (worker lost)")
        dead = store.bury_expired_lease(candidate, now, result)
        if dead is not None:
            report.leases_expired += 1
            report.dead += 1
            alerts.publish(
                Alert("run_dead", dead.team, dead.job_id, dead.run_id, dead.attempt, result.error or "", now)
            )
        return None
    if candidate.status in (RunStatus.QUEUED, RunStatus.RETRY_WAIT):
        run = store.renew_queue_deadline(candidate, now, deadline)
        if run is None:
            return None
        report.messages_resent += 1
        return RunMessage(run.run_id, run.attempt)
    return None


class Poller:
    """One poller process: ``tick()`` claims and, every few ticks, recovers."""

    def __init__(
        self,
        jobs: JobStore,
        runs: RunStore,
        queue: RunQueue,
        alerts: AlertSink,
        clock: Clock,
        config: PollerConfig,
    ) -> None:
        self.jobs = jobs
        self.runs = runs
        self.queue = queue
        self.alerts = alerts
        self.clock = clock
        self.config = config

    def claim(self) -> ClaimReport:
        return claim_due_jobs(self.jobs, self.queue, self.config, self.clock.now())

    def recover(self) -> RecoveryReport:
        return recover_runs(self.runs, self.queue, self.alerts, self.config, self.clock.now())

    def run_until(
        self,
        stop: Callable[[], bool],
        sleep: Callable[[float], object],
        interval: float = 1.0,
        recover_every: int = 5,
        on_report: Callable[[ClaimReport, RecoveryReport | None], None] | None = None,
    ) -> int:
        """Tick (claim; every ``recover_every`` ticks also recover) then sleep ``interval``, until
        ``stop()`` says so after a tick. Returns the number of ticks (at least one)."""
        ticks = 0
        while True:
            claimed = self.claim()
            recovered = self.recover() if ticks % recover_every == 0 else None
            ticks += 1
            if on_report:
                on_report(claimed, recovered)
            if stop():
                return ticks
            sleep(interval)

    def for_partitions(self, partitions: Sequence[int]) -> Poller:
        """The same poller, on another partition group (one EventBridge rule per group)."""
        config = replace(self.config, partitions=list(partitions))
        return Poller(self.jobs, self.runs, self.queue, self.alerts, self.clock, config)
