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
from datetime import UTC, datetime, timedelta
from typing import Protocol

from duetime.domain.claim_plan import (
    DEFAULT_MISFIRE_GRACE,
    DEFAULT_QUEUE_DEADLINE,
    active_run_ids,
    make_claim,
    plan_claim,
)
from duetime.domain.clock import Clock
from duetime.domain.models import Job, Run, RunResult, RunStatus
from duetime.domain.timeutil import minute_bucket, parse_minute_bucket, whole_seconds
from duetime.execution.deadlines import (
    DEADLINE_CHECK_BUDGET,
    DEADLINE_CHECK_INTERVAL,
    DeadlineReport,
    check_deadlines,
)
from duetime.execution.notifications import BackgroundDelivery
from duetime.execution.team_cache import TeamCache
from duetime.ports import (
    Alert,
    AlertSink,
    CalendarReader,
    DeadlineStore,
    JobStore,
    PollerLeaseStore,
    QuarantineRecord,
    ReapCandidate,
    RunMessage,
    RunQueue,
    RunStore,
    TeamStore,
    UnreadableRow,
)
from duetime.ports.functions import HelperLauncher
from duetime.scheduling.calendar_days import CalendarDays, resolve_calendars
from duetime.scheduling.claim_pace import ClaimPace
from duetime.scheduling.fan_out import FanOut, FanOutPolicy, FanOutSetting
from duetime.scheduling.low_water import LowWaterMarks
from duetime.scheduling.preload import FireFailed, FireReport, MinutePreload
from duetime.scheduling.quarantine import Quarantine

log = logging.getLogger(__name__)
MINUTE = timedelta(minutes=1)
# Pages of the coming minute read per step of the loop, between fires: one Query (up to the preload's page
# size, 250 rows, or 1 MB) is all a row due meanwhile waits for.
LOAD_PAGES_PER_STEP = 1


@dataclass(frozen=True)
class PollerConfig:
    partitions: Sequence[int]
    # Rows a sweep reads of one partition at a time, and so claims of it at once: a poller behind a midnight
    # spike claims its partitions a page at a time, and the page's claims (then their results) land on the
    # partition's keys together. 250 kept the hottest at 670-730 write units a second in simulations of
    # 500,000 jobs (500: 1,000, DynamoDB's limit per key; BENCHMARKS.md, "Midnight at full scale").
    page_size: int = 250
    max_claims_per_tick: int = 10_000
    misfire_grace: timedelta = DEFAULT_MISFIRE_GRACE
    queue_deadline: timedelta = DEFAULT_QUEUE_DEADLINE
    bucket_settle: timedelta = timedelta(seconds=30)
    reap_page_size: int = 100
    preload_lead: timedelta | None = timedelta(seconds=10)  # None: no minute preload, 1-second sweeps only
    # A minute with this many rows due is busy: its holder keeps the next invocation waiting as a hot standby
    # rather than handing over early (``duetime.scheduling.poller_lease``). About a second of one poller's
    # claims.
    busy_rows: int = 500
    # The most claims a second (``duetime.scheduling.claim_pace``: this poller's share of the tables' write
    # capacity); None: unpaced.
    claims_per_second: float | None = None


@dataclass
class ClaimReport:
    due_rows: int = 0
    queries: int = 0
    claimed_jobs: int = 0
    runs_created: int = 0
    lost_races: int = 0
    misfired_jobs: int = 0
    dropped_runs: int = 0
    write_requests: int = 0  # requests the claims' writes took
    existing_runs: int = 0  # run rows a claim found already there (left alone)
    runs_requeued: int = 0  # of those, rows whose claim moved the schedule: sent again
    runs_skipped: int = 0  # due times recorded as skipped runs (misfires, disabled teams): never sent
    disabled_team_jobs: int = 0  # due jobs of disabled teams: claimed without runs
    unreadable_rows: int = 0  # due rows that could not be read, first reported by this sweep (quarantined)
    runs: list[Run] = field(default_factory=list)


class SweepFailed(Exception):
    """A sweep's claims were written but queueing their runs failed (the cause); ``report`` counts the runs,
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
    deadlines: DeadlineReport | None = None  # this pass checked success deadlines (every 30 s)


def find_due_jobs(
    store: JobStore,
    config: PollerConfig,
    now: datetime,
    report: ClaimReport,
    skip: Callable[[Job], bool] | None = None,
    known_marks: LowWaterMarks | None = None,
    quarantine: Quarantine | None = None,
) -> list[Job]:
    """Due rows of every partition, from its low-water mark to the current minute; advances the marks.
    Rows ``skip`` says someone else fires (the minute preload) count for the marks but are not returned.
    ``known_marks``: the poller's copy of the marks (``duetime.scheduling.low_water``), read from the store
    only when it lacks one; without it, the marks are read at every call. A row that cannot be read is
    quarantined (``duetime.scheduling.quarantine``: reported once by ``quarantine``, left in place) and
    does not hold its bucket's mark back: a settled bucket of only such rows is done."""
    current = minute_bucket(now)
    if known_marks is None:
        marks, read = store.low_water_marks(config.partitions), True
    else:
        marks, read = known_marks.read(store, config.partitions)
    report.queries += read
    due: dict[str, Job] = {}
    unreadable: list[UnreadableRow] = []
    advanced: dict[int, str] = {}
    for partition in config.partitions:
        mark = marks.get(partition, current)
        bucket_start = parse_minute_bucket(mark)
        new_mark = mark
        after: str | None = None  # within a bucket, past a page of rows that cannot be read only
        while minute_bucket(bucket_start) <= current and len(due) < config.max_claims_per_tick:
            bucket = minute_bucket(bucket_start)
            limit = min(config.page_size, config.max_claims_per_tick - len(due))  # a paced sweep reads less
            refused: list[UnreadableRow] = []
            rows = store.due_jobs(partition, bucket, now, limit, after, unreadable=refused)
            report.queries += 1
            unreadable += refused
            for job in rows:
                if skip is None or not skip(job):
                    due.setdefault(job.id, job)
            if len(rows) + len(refused) == limit:
                if not rows:  # quarantined rows only: they never leave the bucket, so read on past them
                    after = refused[-1].due_key
                    continue
                break  # the bucket has more; the next tick reads on after these are claimed
            settled = bucket_start + MINUTE + config.bucket_settle <= now
            if not rows and settled and new_mark == bucket:
                # empty for good but for rows that cannot be read (left there, quarantined): not read again
                new_mark = minute_bucket(bucket_start + MINUTE)
            bucket_start += MINUTE
            after = None
        if new_mark != mark:
            advanced[partition] = new_mark
    if advanced:
        # a few requests for all of them; each from the mark swept from (WATERMARK_BEHIND_AS_READ)
        not_moved = store.advance_low_water_marks(advanced, {p: marks[p] for p in advanced if p in marks})
        if known_marks is not None:
            for partition, new_mark in advanced.items():
                known_marks.moved(partition, new_mark)
            if not_moved:  # raised by another, or lowered since the read (``duetime restore``): read again
                known_marks.forget()
    report.due_rows = len(due)
    report.unreadable_rows = (quarantine or Quarantine(remember=0)).note(unreadable)
    return list(due.values())


def claim_due_jobs(
    store: JobStore,
    queue: RunQueue,
    config: PollerConfig,
    now: datetime,
    skip: Callable[[Job], bool] | None = None,
    team_active: Callable[[str], bool] | None = None,
    known_marks: LowWaterMarks | None = None,
    calendars: CalendarDays | None = None,
    quarantine: Quarantine | None = None,
) -> ClaimReport:
    """Claim every due job in the configured partitions and queue the runs the claims created. Jobs of
    teams ``team_active`` says are disabled are claimed without runs. Jobs that use calendars get their
    dates from ``calendars``, read after the jobs (``duetime.scheduling.calendar_days``)."""
    report = ClaimReport()
    jobs = find_due_jobs(store, config, now, report, skip, known_marks, quarantine)
    if not jobs:
        return report
    jobs = resolve_calendars(jobs, calendars)
    claims = []
    running = store.active_runs(active_run_ids(jobs))
    for job in jobs:
        active = team_active(job.team) if team_active else True
        report.disabled_team_jobs += not active
        plan = plan_claim(job, now, config.misfire_grace, active, running.get(job.state.active_run or ""))
        if plan.missed:
            report.misfired_jobs += 1
        report.dropped_runs += plan.dropped
        claims.append(make_claim(plan, now, config.queue_deadline))
    outcome = store.claim(claims, now)
    report.claimed_jobs = outcome.claimed_jobs
    report.lost_races = outcome.lost_races
    report.write_requests = outcome.write_requests
    report.existing_runs = outcome.existing_runs
    report.runs = outcome.runs
    report.runs_created = len(outcome.runs)
    report.runs_requeued = len(outcome.requeued)
    report.runs_skipped = len(outcome.skipped)
    to_send = [*outcome.runs, *outcome.requeued]
    if to_send:
        # If we die between the writes and this send, the runs' queue deadline brings them back.
        try:
            # A run created here travels with its message (the worker's lease checks it against the row);
            # one found in the way travels by name.
            messages = [RunMessage.carrying(run) for run in outcome.runs]
            queue.send(messages + [RunMessage(run.run_id, run.attempt) for run in outcome.requeued])
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


@dataclass(frozen=True)
class ClaimWindow:
    """When a poller may claim its partitions: sweeps and preloaded fires start at or after ``start`` and
    before ``end``, and preloaded rows due at or after ``end`` are left to whoever claims after it."""

    start: datetime
    end: datetime


ALWAYS = ClaimWindow(datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC))


class ClaimGate(Protocol):
    """Who claims when: ``duetime.scheduling.poller_lease.GroupLease`` gives a poller the windows in which it
    holds its partition group's lease. The loop calls ``step`` before every tick and claims only inside
    ``window()``."""

    @property
    def done(self) -> bool:
        """No window will open any more (handed over, or the run is over): the loop ends."""
        ...

    def step(self, now: datetime) -> None:
        """Do the lease work due at ``now`` (renew, register, hand over, take over); may raise."""
        ...

    def window(self) -> ClaimWindow | None:
        """The current or next window (its start may lie ahead); None while none is in sight."""
        ...

    def next_step_at(self) -> datetime | None:
        """When ``step`` next has something to do."""
        ...


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
        teams: TeamStore | None = None,
        deadlines: DeadlineStore | None = None,
        notifications: BackgroundDelivery | None = None,
        leases: PollerLeaseStore | None = None,
        helpers: HelperLauncher | None = None,
        fan_out: FanOutPolicy | None = None,
        calendars: CalendarReader | None = None,
        quarantine_record: QuarantineRecord | None = None,
    ) -> None:
        """``teams``: where to look up whether a job's team is disabled (none: every team is active).
        ``deadlines``: where success-deadline watches are (none: they are not checked). ``notifications``:
        the delivery of job notifications, started at each reap pass (none: not delivered here).
        ``helpers`` (with ``leases``): where a busy minute's helpers are started
        (``duetime.scheduling.fan_out``, with the ``fan_out`` policy); none: the poller claims every minute
        alone. ``calendars``: where the team calendars that jobs use are read (none: a job that uses one
        runs as if it excluded nothing, logged). ``quarantine_record``: where unreadable rows are kept for the
        operator (none: they are logged and counted only)."""
        self.jobs = jobs
        self.quarantine_record = quarantine_record
        self.calendars = calendars
        self.calendar_days = CalendarDays(calendars) if calendars is not None else None
        self.runs = runs
        self.queue = queue
        self.alerts = alerts
        self.clock = clock
        self.config = config
        self.teams = teams
        self.deadlines = deadlines
        self.notifications = notifications
        self.leases = leases
        self.helpers = helpers
        self.fan_out_policy = fan_out
        self.fan_out = (
            FanOut(jobs, leases, helpers, config.partitions, fan_out, config.claims_per_second)
            if helpers is not None and leases is not None
            else None
        )
        self.excluded: frozenset[int] = frozenset()  # partitions live helpers serve: left alone
        rate = config.claims_per_second
        self.pace = ClaimPace(rate, clock.now()) if rate else None
        self._next_deadline_check: datetime | None = None  # the first reap pass checks deadlines
        self.team_active = TeamCache(teams, clock).active if teams is not None else None
        self.known_marks = LowWaterMarks()  # read once a reign (``duetime.scheduling.low_water``)
        # Unreadable rows reported, each once (the sweep's and the preload's), and kept for the operator.
        keep = (
            (lambda rows: quarantine_record.record_unreadable(rows, clock.now()))
            if quarantine_record is not None
            else None
        )
        self.quarantine = Quarantine(keep=keep)
        self._coming_count: tuple[str, int] | None = None  # (the coming minute's bucket, rows due in it)
        self.preload = (
            MinutePreload(
                jobs,
                queue,
                list(config.partitions),
                config.preload_lead,
                grace=config.misfire_grace,
                queue_deadline=config.queue_deadline,
                team_active=self.team_active,
                calendars=self.calendar_days,
                quarantine=self.quarantine,
            )
            if config.preload_lead is not None
            else None
        )

    def claim(self, now: datetime | None = None) -> ClaimReport:
        """Sweep: claim every job due at ``now`` (by default the clock's now) that the preload does not hold.
        A loop that checked ``now`` against its claim window passes that same instant: read again, the clock
        may have passed the window's end in between (a busy machine), and the sweep would claim seconds that
        are no longer this poller's."""
        skip = self.preload.holds if self.preload else None
        now = now or self.clock.now()
        config = self._served()
        if self.pace is not None:
            allowance = self.pace.allowance(now)
            config = replace(config, max_claims_per_tick=max(1, min(config.max_claims_per_tick, allowance)))
        report = claim_due_jobs(
            self.jobs,
            self.queue,
            config,
            now,
            skip,
            self.team_active,
            self.known_marks,
            self.calendar_days,
            self.quarantine,
        )
        if self.pace is not None:
            self.pace.spend(report.claimed_jobs, now)
        return report

    def _served(self) -> PollerConfig:
        """The config of the partitions this poller claims and reaps now: its own less those live helpers
        serve (``duetime.scheduling.fan_out``)."""
        if not self.excluded:
            return self.config
        return replace(self.config, partitions=[p for p in self.config.partitions if p not in self.excluded])

    def _step_fan_out(self, now: datetime) -> None:
        """Start the coming minute's helpers if it is busy, and leave the partitions of live helpers alone
        (``duetime.scheduling.fan_out``). Reading the helpers' leases failing takes every partition back: a
        partition claimed twice is a lost race, one claimed by nobody is late."""
        if self.fan_out is None:
            return
        busy = self.preload is not None and self.preload.held_rows >= self.config.busy_rows
        try:
            excluded = self.fan_out.step(now, busy)
        except Exception:
            log.warning("fan-out step failed; the holder claims every partition", exc_info=True)
            excluded = frozenset()
        if self.pace is not None:
            self.pace.rate = self.fan_out.holder_claims_per_second(now) or self.pace.rate
        if excluded != self.excluded:
            self.excluded = excluded
            self.known_marks.forget()  # the helpers moved their partitions' marks
            if self.preload is not None:
                self.preload.exclude(excluded, now)

    def ready_to_hold(self, now: datetime) -> bool:
        """Whether this poller could take its partitions over at ``now`` and fire on time: the preload (if
        on) holds the current minute, and the coming one once it is within the preload's lead."""
        return self.preload is None or self.preload.ready(now)

    def busy(self) -> bool:
        """Whether this minute or the next is busy (``busy_rows`` due or more): the preload holds that many
        rows still to fire, or the coming minute's bucket holds that many (read once a minute, when first
        asked: a Query per partition until the count is reached). Asked when a successor is there to take
        over; a read that fails answers True (keep the standby)."""
        if self.preload is None:
            return False
        if self.preload.held_rows >= self.config.busy_rows:
            return True
        try:
            return self._rows_due_in_the_coming_minute() >= self.config.busy_rows
        except Exception:
            log.warning("counting the coming minute's rows failed; treated as busy", exc_info=True)
            return True

    def _rows_due_in_the_coming_minute(self) -> int:
        coming = self.clock.now().replace(second=0, microsecond=0) + MINUTE
        bucket = minute_bucket(coming)
        if self._coming_count is None or self._coming_count[0] != bucket:
            rows = 0
            for partition in self.config.partitions:
                wanted = self.config.busy_rows - rows
                rows += len(
                    self.jobs.due_rows(partition, bucket, coming + MINUTE - timedelta(seconds=1), wanted)
                )
                if rows >= self.config.busy_rows:
                    break
            self._coming_count = (bucket, rows)
        return self._coming_count[1]

    def recover(self) -> RecoveryReport:
        """A reap pass (``recover_runs``); the first, and then one every ``DEADLINE_CHECK_INTERVAL``, also
        settles the success deadlines that passed (``duetime.execution.deadlines``), for at most
        ``DEADLINE_CHECK_BUDGET`` (a check cut short goes on at the next pass). Each starts a delivery of
        the job notifications due, in the background (``duetime.execution.notifications``)."""
        if self.notifications is not None:
            self.notifications.kick()
        now = self.clock.now()
        report = recover_runs(self.runs, self.queue, self.alerts, self._served(), now)
        due = self._next_deadline_check is None or now >= self._next_deadline_check
        if self.deadlines is not None and due:
            budget_end = now + DEADLINE_CHECK_BUDGET
            report.deadlines = check_deadlines(
                self.deadlines,
                self.runs,
                self.jobs,
                self.alerts,
                self._served().partitions,
                now,
                keep_going=lambda: self.clock.now() < budget_end,
            )
            # A check cut by its budget goes on at the next reap pass; a whole one, in 30 s.
            self._next_deadline_check = now if report.deadlines.cut else now + DEADLINE_CHECK_INTERVAL
        return report

    def fire_preloaded(
        self,
        before: datetime | None = None,
        keep_going: Callable[[], bool] | None = None,
        now: datetime | None = None,
    ) -> FireReport | None:
        """Fire what is due now (and before ``before``), then read one page of the coming minute when it is
        near. Firing comes first and reading goes a page at a time, so a row due while the next minute is
        read waits for one Query at most, not for the whole minute (``run_until`` comes straight back while
        pages are left). ``now``: as for ``claim``. With a claim pace, at most its allowance is fired."""
        if self.preload is None:
            return None
        now = now or self.clock.now()
        allowance = self.pace.allowance(now) if self.pace is not None else None
        report = self.preload.fire(now, before, keep_going, max_rows=allowance)
        if self.pace is not None:
            self.pace.spend(report.fired, now)
        report.loaded_rows = self.preload.load_upcoming(self.clock.now(), max_pages=LOAD_PAGES_PER_STEP)
        if report.loaded_rows:
            report.loaded_bucket = self.preload.last_read_bucket
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
        gate: ClaimGate | None = None,
    ) -> int:
        """Sweep every ``interval`` seconds (recovering every ``recover_every`` sweeps) and, in between,
        wake at each preloaded fire time; until ``stop()`` says so after a sweep. Returns the sweeps.

        Every run claimed reaches ``on_report`` (claimed by a sweep) or ``on_fire`` (by the preload) once,
        also when what follows the claim fails. A tick that raises (a throttle past the SDK's retries, a
        reset connection) does not end the loop: it is logged with its traceback and given to
        ``on_error``; then ``stop()`` is asked, and the loop goes on after a pause that doubles with each
        failure in a row, from ``interval`` up to ``max_backoff`` seconds.

        With a ``gate`` (a partition group's lease, ``duetime.scheduling.poller_lease``) the loop does the
        gate's work before each tick and claims only inside the window it gives: the first sweep at the
        window's start (where the preload drops the rows due before it: they were someone else's), then sweeps
        on the clock's whole seconds, and no preloaded row due at or after the window's end. While it waits
        for a window it keeps the preload loaded. ``stop()`` is asked after every tick, pauses after a failure
        stay under ``interval`` (the lease must be renewed), and the loop ends when the gate is done."""
        sweeps = failures = 0
        # Each poller's reap passes at its own phase of the cadence (by its partitions): a busy minute's
        # claimers, started together, would otherwise settle their reap tickets in the same second.
        phase = sum(self.config.partitions) % max(1, recover_every)
        next_sweep = self.clock.now()
        reign: datetime | None = None  # the start of the gate's window being served
        window: ClaimWindow | None = ALWAYS
        while True:
            try:
                if gate is not None:
                    window, reign, next_sweep = self._follow_gate(gate, reign, next_sweep)
                reap = sweeps == 0 or (sweeps + phase) % recover_every == 0
                swept = self._tick(next_sweep, reap, on_report, on_fire, window, gate)
            except Exception as exc:
                failures += 1
                pause = _pause_after_failures(failures, interval, max_backoff, gated=gate is not None)
                log.exception("poller tick failed (%d in a row); going on in %.1f s", failures, pause)
                if on_error:
                    on_error(exc)
                if stop() or (gate is not None and gate.done):
                    return sweeps
                next_sweep = self.clock.now() + timedelta(seconds=pause)
                sleep(pause)
                continue
            failures = 0
            if swept:
                sweeps += 1
                next_sweep = self._next_sweep(interval, aligned=gate is not None)
            if ((swept or gate is not None) and stop()) or (gate is not None and gate.done):
                return sweeps
            wake = self._wake_at(next_sweep, window, gate)
            sleep(max(0.0, min(interval, (wake - self.clock.now()).total_seconds())))

    def _follow_gate(
        self, gate: ClaimGate, reign: datetime | None, next_sweep: datetime
    ) -> tuple[ClaimWindow | None, datetime | None, datetime]:
        """Do the gate's work due now; its window, the start of the reign being served, and the next sweep. A
        new reign begins once its window's start has come: the holder before's traces are forgotten."""
        gate.step(self.clock.now())
        window = gate.window()
        if window is not None and window.start != reign:
            next_sweep = window.start  # the first sweep right at the start
            if self.clock.now() >= window.start:
                reign = window.start
                self.known_marks.forget()  # the holder before may have moved them
                if self.fan_out is not None:
                    self.fan_out.new_reign()  # find the helpers the holder before started
                if self.preload is not None:
                    self.preload.forget_before(window.start)
        return window, reign, next_sweep

    def _next_sweep(self, interval: float, aligned: bool) -> datetime:
        now = self.clock.now()
        if not aligned:
            return now + timedelta(seconds=interval)
        at = whole_seconds(now) + timedelta(seconds=interval)  # on the clock's grid: holders meet without gap
        while at <= now:
            at += timedelta(seconds=interval)
        return at

    def _wake_at(self, next_sweep: datetime, window: ClaimWindow | None, gate: ClaimGate | None) -> datetime:
        """The next instant the loop has something to do: a sweep or a preloaded fire time inside the window,
        the window's start or end, or the gate's next step."""
        now = self.clock.now()
        upcoming = self.preload.next_fire_at() if self.preload else None
        wakes = [] if gate is None else [at for at in (gate.next_step_at(),) if at is not None]
        if window is not None and now < window.start:
            wakes.append(window.start)
        elif window is not None and now < window.end:
            behind = upcoming is not None and upcoming <= now
            if behind and self.pace is not None:
                upcoming = self.pace.next_claim_at(now)  # rows due wait for the pace's next claim
            sweep_at = None if behind else next_sweep  # no sweep while the preload fires what is due
            wakes += [at for at in (sweep_at, upcoming) if at is not None and at < window.end]
            if self.preload is not None and self.preload.loading:
                wakes.append(now)  # the coming minute's next page
            if gate is not None:
                wakes.append(window.end)
        return min(wakes, default=now + timedelta(days=1))

    def _tick(
        self,
        next_sweep: datetime,
        recover: bool,
        on_report: Callable[[ClaimReport, RecoveryReport | None], None] | None,
        on_fire: Callable[[FireReport], None] | None,
        window: ClaimWindow | None = ALWAYS,
        gate: ClaimGate | None = None,
    ) -> bool:
        """Fire what the preload holds for now and, once ``next_sweep`` has come, sweep; all only inside
        ``window`` (outside it, keep the preload loaded). True if it swept."""
        now = self.clock.now()
        if window is None or now < window.start:
            if self.preload is not None:
                self.preload.load_upcoming(now)  # waiting to take over: have the minute ready by then
            return False
        if now >= window.end:
            return False
        self._step_fan_out(now)
        try:
            fired = self.fire_preloaded(window.end, self._still_claiming(gate), now)
        except FireFailed as failed:
            if on_fire:
                on_fire(failed.report)
            raise
        if fired is not None and on_fire and (fired.fired or fired.loaded_rows):
            on_fire(fired)
        now = self.clock.now()
        if now < next_sweep or now >= window.end:
            return False
        if self.preload is not None and self.preload.behind(now):
            # Still firing rows already due (a paced or long fire): a sweep now would re-read the rows the
            # preload holds, a Query page a partition; it sweeps once the preload has caught up.
            return False
        try:
            claimed = self.claim(now)  # the instant checked against the window, not a later one
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

    def _still_claiming(self, gate: ClaimGate | None) -> Callable[[], bool] | None:
        """Asked between the chunks of a long preloaded fire (a midnight second): do the gate's work that
        has come due (renew the lease) and say whether the window is still open."""
        if gate is None:
            return None

        def still_claiming() -> bool:
            now = self.clock.now()
            try:
                gate.step(now)
            except Exception:
                log.warning("poller lease step failed during a long fire", exc_info=True)
            window = gate.window()
            return window is not None and window.start <= self.clock.now() < window.end

        return still_claiming

    def fan_out_setting(self) -> FanOutSetting:
        """Whether this poller's busy minutes start helpers, and past how many rows (what its invocations
        log: ``duetime.scheduling.fan_out.POLLER_INVOCATION_LOG``)."""
        if self.fan_out is None:
            return FanOutSetting(helpers=False)
        return FanOutSetting(helpers=True, holder_rows=self.fan_out.policy.holder_rows)

    def alone(self, partitions: Sequence[int], claims_per_second: float | None = None) -> Poller:
        """The same poller on ``partitions`` that never starts helpers, paced to ``claims_per_second``: a
        helper's (``duetime.scheduling.fan_out``)."""
        config = replace(self.config, partitions=list(partitions), claims_per_second=claims_per_second)
        return self._with(config, helpers=None)

    def for_partitions(self, partitions: Sequence[int]) -> Poller:
        """The same poller, on another partition group (one EventBridge rule per group)."""
        return self._with(replace(self.config, partitions=list(partitions)), self.helpers)

    def _with(self, config: PollerConfig, helpers: HelperLauncher | None) -> Poller:
        return Poller(
            self.jobs,
            self.runs,
            self.queue,
            self.alerts,
            self.clock,
            config,
            self.teams,
            self.deadlines,
            self.notifications,
            self.leases,
            helpers,
            self.fan_out_policy,
            self.calendars,
            self.quarantine_record,
        )


def _pause_after_failures(failures: int, interval: float, max_backoff: float, gated: bool) -> float:
    """The pause after ``failures`` failed ticks in a row: doubling from ``interval`` up to ``max_backoff``
    seconds; at most ``interval`` when ``gated`` (the lease must be renewed)."""
    pause: float = min(interval * 2 ** min(failures - 1, 30), max(interval, max_backoff))
    return min(pause, interval) if gated else pause
