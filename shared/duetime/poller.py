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
from duetime.preload import FireFailed, FireReport, MinutePreload
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
    preload_lead: timedelta | None = timedelta(seconds=10)  # None: no minute preload, 1-second sweeps only


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
    existing_runs: int = 0  # run rows a claim found already there (left alone; the schedule moved on)
    runs: list[Run] = field(default_factory=list)


class SweepFailed(Exception):
    """A sweep's claims committed but queueing their runs failed (the cause); ``report`` counts the runs,
    which exist: their queue deadline brings them back."""

    def __init__(self, report: ClaimReport) -> None:
        super().__init__(f"queueing the {report.runs_created} runs a sweep claimed failed")
        self.report = report


@dataclass
class RecoveryReport:
    leases_expired: int = 0
    dead: int = 0
    messages_resent: int = 0
    queries: int = 0


def find_due_jobs(
    store: JobStore,
    config: PollerConfig,
    now: datetime,
    report: ClaimReport,
    skip: Callable[[Job], bool] | None = None,
) -> list[Job]:
    """Due rows of every partition, from its low-water mark to the current minute; advances the marks.
    Rows ``skip`` says someone else fires (the minute preload) count for the marks but are not returned."""
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
                if skip is None or not skip(job):
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


def claim_due_jobs(
    store: JobStore,
    queue: RunQueue,
    config: PollerConfig,
    now: datetime,
    skip: Callable[[Job], bool] | None = None,
) -> ClaimReport:
    """Claim every due job in the configured partitions and queue the runs the claims created."""
    report = ClaimReport()
    jobs = find_due_jobs(store, config, now, report, skip)
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
    report.existing_runs = outcome.existing_runs
    report.runs = outcome.runs
    report.runs_created = len(outcome.runs)
    if outcome.runs:
        # If we die between the commit and this send, the runs' queue deadline brings them back.
        try:
            queue.send([RunMessage(run.run_id, run.attempt) for run in outcome.runs])
        except Exception as exc:
            raise SweepFailed(report) from exc
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
    """One poller process. Every second it sweeps its partitions (claim what is due, and every few sweeps
    recover runs nobody minds); with the minute preload on, it also fires preloaded rows at their second."""

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
        self.preload = (
            MinutePreload(
                jobs,
                queue,
                list(config.partitions),
                config.preload_lead,
                grace=config.misfire_grace,
                queue_deadline=config.queue_deadline,
            )
            if config.preload_lead is not None
            else None
        )

    def claim(self) -> ClaimReport:
        skip = self.preload.holds if self.preload else None
        return claim_due_jobs(self.jobs, self.queue, self.config, self.clock.now(), skip)

    def recover(self) -> RecoveryReport:
        return recover_runs(self.runs, self.queue, self.alerts, self.config, self.clock.now())

    def fire_preloaded(self) -> FireReport | None:
        """Load the coming minute when it is near, and fire what is due now."""
        if self.preload is None:
            return None
        now = self.clock.now()
        loaded = self.preload.load_upcoming(now)
        try:
            report = self.preload.fire(now)
        except FireFailed as failed:
            failed.report.loaded_rows = loaded
            raise
        report.loaded_rows = loaded
        return report

    def run_until(
        self,
        stop: Callable[[], bool],
        sleep: Callable[[float], object],
        interval: float = 1.0,
        recover_every: int = 5,
        on_report: Callable[[ClaimReport, RecoveryReport | None], None] | None = None,
        on_fire: Callable[[FireReport], None] | None = None,
        on_error: Callable[[Exception], None] | None = None,
        max_backoff: float = 10.0,
    ) -> int:
        """Sweep every ``interval`` seconds (recovering every ``recover_every`` sweeps) and, in between,
        wake at each preloaded fire time; until ``stop()`` says so after a sweep. Returns the sweeps.

        Every run claimed reaches ``on_report`` (claimed by a sweep) or ``on_fire`` (by the preload) once,
        also when what follows the claim fails. A tick that raises (a throttle past the SDK's retries, a
        reset connection) does not end the loop: it is logged with its traceback and given to
        ``on_error``; then ``stop()`` is asked, and the loop goes on after a pause that doubles with each
        failure in a row, from ``interval`` up to ``max_backoff`` seconds."""
        sweeps = 0
        failures = 0
        next_sweep = self.clock.now()
        while True:
            try:
                swept = self._tick(next_sweep, sweeps % recover_every == 0, on_report, on_fire)
            except Exception as exc:
                failures += 1
                pause = min(interval * 2 ** min(failures - 1, 30), max(interval, max_backoff))
                log.exception("poller tick failed (%d in a row); going on in %.1f s", failures, pause)
                if on_error:
                    on_error(exc)
                if stop():
                    return sweeps
                next_sweep = self.clock.now() + timedelta(seconds=pause)
                sleep(pause)
                continue
            failures = 0
            if swept:
                sweeps += 1
                next_sweep = self.clock.now() + timedelta(seconds=interval)
                if stop():
                    return sweeps
            wake = next_sweep
            upcoming = self.preload.next_fire_at() if self.preload else None
            if upcoming is not None:
                wake = min(wake, upcoming)
            sleep(max(0.0, min(interval, (wake - self.clock.now()).total_seconds())))

    def _tick(
        self,
        next_sweep: datetime,
        recover: bool,
        on_report: Callable[[ClaimReport, RecoveryReport | None], None] | None,
        on_fire: Callable[[FireReport], None] | None,
    ) -> bool:
        """Fire what the preload holds for now and, once ``next_sweep`` has come, sweep. True if it swept."""
        try:
            fired = self.fire_preloaded()
        except FireFailed as failed:
            if on_fire:
                on_fire(failed.report)
            raise
        if fired is not None and on_fire and (fired.fired or fired.loaded_rows):
            on_fire(fired)
        if self.clock.now() < next_sweep:
            return False
        try:
            claimed = self.claim()
        except SweepFailed as failed:
            if on_report:
                on_report(failed.report, None)
            raise
        recovered = None
        try:
            recovered = self.recover() if recover else None
        finally:
            if on_report:
                on_report(claimed, recovered)
        return True

    def for_partitions(self, partitions: Sequence[int]) -> Poller:
        """The same poller, on another partition group (one EventBridge rule per group)."""
        config = replace(self.config, partitions=list(partitions))
        return Poller(self.jobs, self.runs, self.queue, self.alerts, self.clock, config)
