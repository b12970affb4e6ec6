"""Precision on demand: a minute's due rows, loaded just before the minute starts, fired at their second.

Shortly before minute M (``lead``), the poller reads M's bucket of each of its partitions, grouping the rows
by fire second (a min-heap of the seconds). It then sleeps until the next fire second, claims everything due
at that second in chunks and queues it. The reading can go a page at a time (``load_upcoming(now,
max_pages=1)``), so that a poller firing the last seconds of minute M-1 reads M in between, never making a
row due at :50 wait for the whole of M to be read. Nothing is claimed by loading, so a restarted poller
simply loads the minute again; and at midnight the preload spares the store a burst of index reads. Rows
written after the load (a job created in the last seconds before M) are still found by the regular
per-second sweep.

What is held is what firing needs: per row a compact ``DueRow`` from the store (fire time, job id, version,
and the rest of the job packed in a few hundred bytes). The ``Job`` model is built only when its row is
fired, a chunk at a time, so a poller holding the midnight minute holds rows, not models (``duetime bench
preload`` measures the bytes per row).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from typing import Any, Protocol

from duetime.domain.claim_plan import active_run_ids, make_claim, plan_claim
from duetime.domain.ids import partition_of
from duetime.domain.models import Job
from duetime.domain.timeutil import iso_z, minute_bucket
from duetime.ports import (
    ClaimOutcome,
    DueRow,
    JobStore,
    RunMessage,
    RunQueue,
    UnreadableRow,
    unreadable_error,
)
from duetime.scheduling.calendar_days import CalendarDays, resolve_calendars
from duetime.scheduling.quarantine import Quarantine

MINUTE = timedelta(minutes=1)
_BY_JOB_ID = attrgetter("job_id")


def _instant(epoch_seconds: int) -> datetime:
    return datetime.fromtimestamp(epoch_seconds, UTC)


@dataclass
class FireReport:
    loaded_rows: int = 0
    loaded_bucket: str | None = None  # the minute bucket those rows came from (the last one read, if two)
    fired: int = 0
    runs_created: int = 0
    lost_races: int = 0
    write_requests: int = 0  # requests the claims' writes took
    existing_runs: int = 0  # run rows a claim found already there (left alone)
    runs_requeued: int = 0  # of those, rows whose claim moved the schedule: sent again
    runs_skipped: int = 0  # due times recorded as skipped runs (misfires, disabled teams): never sent
    max_lateness_seconds: float = 0.0  # claim time minus the earliest fire time fired
    claim_seconds: float = 0.0  # time spent in the claims' writes themselves
    unreadable_rows: int = 0  # rows fired that could not be read, first reported here (quarantined)


@dataclass
class _Load:
    """A minute bucket being read, a page of each partition in turn: for each partition with pages left
    (by its index in the preload's list, in the order they are read next), the key after which its next page
    starts. Taking partitions in turn (rather than all of one, then the next) matters when the pages read
    are already due, as when a poller catches up on a midnight it cannot claim in time: each page is fired
    as it is read, and a partition's pages one after the other would put a page's claims on its keys every
    second (1,000 a partition-second, past a key's 1,000 write units with the reap shard's; ``duetime bench
    midnight --simulate``), where in turn they land on as many partitions as pages."""

    bucket: str
    until: datetime
    afters: dict[int, str | None]

    @property
    def done(self) -> bool:
        return not self.afters


class FireFailed(Exception):
    """Firing stopped on an error (its cause); ``report`` counts what was claimed before it (those runs
    exist). The rows not claimed are left to the sweep."""

    def __init__(self, report: FireReport) -> None:
        super().__init__(f"firing preloaded rows failed after {report.runs_created} runs were claimed")
        self.report = report


class RunSender(Protocol):
    """Where fired runs are sent from: one at a time, each overlapping the preload's next claim."""

    def submit(
        self, fn: Callable[[list[RunMessage]], object], messages: list[RunMessage], /
    ) -> Future[Any]: ...

    def shutdown(self) -> None: ...


class MinutePreload:
    def __init__(
        self,
        store: JobStore,
        queue: RunQueue,
        partitions: list[int],
        lead: timedelta,
        page_size: int = 250,
        grace: timedelta = timedelta(seconds=60),
        queue_deadline: timedelta = timedelta(minutes=10),
        chunk: int = 500,
        team_active: Callable[[str], bool] | None = None,
        calendars: CalendarDays | None = None,
        quarantine: Quarantine | None = None,
    ) -> None:
        """``team_active``: whether a job's team may have runs (a disabled team's jobs get none).
        ``calendars``: the dates of the calendars jobs use, read as each chunk is claimed (after its rows
        were read: ``duetime.scheduling.calendar_days``)."""
        self.store = store
        self.team_active = team_active
        self.calendars = calendars
        self.quarantine = quarantine or Quarantine()  # rows that cannot be read: reported, not claimed
        self.queue = queue
        self.partitions = partitions
        self.lead = lead
        self.page_size = page_size
        self.grace = grace
        self.queue_deadline = queue_deadline
        self.chunk = chunk
        self._sender: RunSender = ThreadPoolExecutor(max_workers=1, thread_name_prefix="preload-send")
        # Rows waiting to be fired, by fire second (epoch seconds); ``_seconds`` is a min-heap of the keys.
        self._due: dict[int, list[DueRow]] = {}
        self._seconds: list[int] = []
        self._loaded: set[str] = set()  # minute buckets read whole
        self.last_read_bucket: str | None = None
        self._loads: list[_Load] = []  # buckets being read, the earliest first, each where its reading stands
        self._pending: dict[str, DueRow] = {}  # job id -> its row waiting in ``_due``
        self._fired: dict[str, DueRow] = {}  # job id -> its row fired within the last minute
        # partitions a helper serves (``duetime.scheduling.fan_out``)
        self.excluded: frozenset[int] = frozenset()

    def holds(self, job: Job) -> bool:
        """True when the preload fires (or just fired) this very version of the job: the sweep leaves it
        alone, also while the due index still shows a row the preload has already claimed."""
        pending = self._pending.get(job.id)
        fired = self._fired.get(job.id)
        return (pending is not None and pending.version == job.state.version) or (
            fired is not None and fired.version == job.state.version
        )

    def behind(self, now: datetime) -> bool:
        """True while rows due at or before ``now`` are held, not yet fired."""
        return bool(self._seconds) and _instant(self._seconds[0]) <= now

    def next_fire_at(self) -> datetime | None:
        return _instant(self._seconds[0]) if self._seconds else None

    def _active(self, job: Job) -> bool:
        return self.team_active(job.team) if self.team_active is not None else True

    @property
    def held_rows(self) -> int:
        """Rows held, waiting for their second to be fired."""
        return len(self._pending)

    @property
    def rows_in_memory(self) -> int:
        """Rows the preload keeps: those waiting and those fired within the last minute (its memory)."""
        return len(self._pending) + len(self._fired)

    def send_with(self, sender: RunSender) -> None:
        """Send fired runs through ``sender`` instead of the preload's own thread (the midnight simulation's
        lanes, which keep virtual time); the thread is shut down."""
        self._sender.shutdown()
        self._sender = sender

    def ready(self, now: datetime) -> bool:
        """True once the minute of ``now``, and the next one when ``now`` is within ``lead`` of it, are
        read whole: what a poller taking over at ``now`` must hold to fire on time."""
        return all(minute_bucket(minute) in self._loaded for minute in self._minutes_to_hold(now))

    def _minutes_to_hold(self, now: datetime) -> tuple[datetime, datetime]:
        return now.replace(second=0, microsecond=0), (now + self.lead).replace(second=0, microsecond=0)

    @property
    def loading(self) -> bool:
        """True while a minute is being read a page at a time (``load_upcoming`` has pages left to read)."""
        return bool(self._loads)

    def load_upcoming(self, now: datetime, max_pages: int | None = None) -> int:
        """Load the next minute once ``now`` is within ``lead`` of it (and the current one, when a poller
        starts mid-minute), reading at most ``max_pages`` pages (one Query each) in this call; ``None``:
        all of it. The next call goes on where this one stopped, also after a read that failed (that page
        is read again; a row already held is not held twice). Returns the rows loaded by this call."""
        for minute in self._minutes_to_hold(now):
            bucket = minute_bucket(minute)
            if bucket not in self._loaded and all(load.bucket != bucket for load in self._loads):
                until = minute + MINUTE - timedelta(seconds=1)
                indexes = [i for i, p in enumerate(self.partitions) if p not in self.excluded]
                self._loads.append(_Load(bucket, until, dict.fromkeys(indexes)))
        loaded = pages = 0
        while self._loads and (max_pages is None or pages < max_pages):
            load = self._loads[0]
            loaded += self._read_page(load)
            pages += 1
            if load.done:
                self._loads.pop(0)
                self._loaded.add(load.bucket)
        if len(self._loaded) > 4:
            self._loaded = {b for b in self._loaded if b >= minute_bucket(now - MINUTE)}
        return loaded

    def _read_page(self, load: _Load) -> int:
        """Read ``load``'s next page, hold its rows, and move ``load`` on past it. Returns the rows held."""
        if load.done:
            return 0
        index, after = next(iter(load.afters.items()))
        partition = self.partitions[index]
        if partition in self.excluded:  # handed to a helper since this minute's reading began
            del load.afters[index]
            return 0
        self.last_read_bucket = load.bucket
        rows = self.store.due_rows(partition, load.bucket, load.until, self.page_size, after)
        count = 0
        for row in rows:
            fired = self._fired.get(row.job_id)
            if row.job_id in self._pending or (fired is not None and fired.version == row.version):
                continue
            self._add(row)
            count += 1
        del load.afters[index]  # this partition's turn is over; it goes to the back if it has more pages
        if len(rows) == self.page_size:
            last = rows[-1]
            load.afters[index] = f"{iso_z(_instant(last.fire_at))}#{last.job_id}"
        return count

    def _add(self, row: DueRow) -> None:
        second = self._due.get(row.fire_at)
        if second is None:
            self._due[row.fire_at] = second = []
            heapq.heappush(self._seconds, row.fire_at)
        second.append(row)
        self._pending[row.job_id] = row

    def _take_second(self) -> list[DueRow]:
        """The rows of the earliest second held, no longer held."""
        rows = self._due.pop(heapq.heappop(self._seconds))
        for row in rows:
            self._pending.pop(row.job_id, None)
        return rows

    def exclude(self, partitions: frozenset[int], now: datetime) -> int:
        """Leave ``partitions`` to their helpers (``duetime.scheduling.fan_out``): drop their rows held, read
        none of them from here on. Partitions that come back (their helper gave its lease back, or died) are
        read again: the current and coming minutes are read anew (a row already held is not held twice).
        Returns the rows dropped."""
        back = self.excluded - partitions
        self.excluded = partitions
        if back:
            current = minute_bucket(now)
            self._loaded = {bucket for bucket in self._loaded if bucket < current}
            self._loads.clear()
        if not partitions:
            return 0
        dropped = [job_id for job_id, row in self._pending.items() if partition_of(row.job_id) in partitions]
        if not dropped:
            return 0
        gone = set(dropped)
        for job_id in dropped:
            del self._pending[job_id]
        for second in list(self._due):
            kept = [row for row in self._due[second] if row.job_id not in gone]
            if kept:
                self._due[second] = kept
            else:
                del self._due[second]
        self._seconds = list(self._due)
        heapq.heapify(self._seconds)
        return len(dropped)

    def forget_before(self, instant: datetime) -> int:
        """Drop the rows due before ``instant`` (another poller fired them, or left them to the sweep, before
        this one took the partitions over at ``instant``); the sweep claims whichever are still due. Returns
        how many were dropped."""
        dropped = 0
        while self._seconds and _instant(self._seconds[0]) < instant:
            dropped += len(self._take_second())
        return dropped

    def fire(
        self,
        now: datetime,
        before: datetime | None = None,
        keep_going: Callable[[], bool] | None = None,
        max_rows: int | None = None,
    ) -> FireReport:
        """Claim and queue every row held whose fire time has come (and is before ``before``, when given:
        the end of this poller's claims), in fire-time then job-id order. Each chunk's jobs are built from
        their rows just before it is claimed. ``keep_going`` is asked before each further chunk; when it
        says no, the rows not claimed yet are left to the sweep. ``max_rows``: claim at most that many (the
        claim pace's allowance, ``duetime.scheduling.claim_pace``); the rest stay held, earliest first."""
        report = FireReport()
        due = self._take_due(now, before, max_rows)
        if not due:
            return report
        report.fired = len(due)
        report.max_lateness_seconds = (now - _instant(due[0].fire_at)).total_seconds()
        # Claim in chunks and queue each chunk while the next is being claimed (a midnight second can
        # hold thousands of rows); the call returns once everything it claimed is on the queue.
        sends = []
        error: Exception | None = None
        for start in range(0, len(due), self.chunk):
            if start and keep_going is not None and not keep_going():
                self._unfire(due[start:])  # no longer ours to claim: left to the sweep
                break
            try:
                outcome, claim_seconds = self._claim_chunk(due[start : start + self.chunk], now, report)
            except Exception as exc:
                self._unfire(due[start:])  # the sweep claims these instead (re-checking each job's version)
                error = exc
                break
            report.claim_seconds += claim_seconds
            _count_claimed(report, outcome)
            if outcome.runs or outcome.requeued:
                sends.append(self._sender.submit(self.queue.send, _messages(outcome)))
        failed_send = _wait_for_sends(sends)  # all of them, also after a claim failed
        error = error or failed_send
        if error is not None:
            raise FireFailed(report) from error
        return report

    def _take_due(self, now: datetime, before: datetime | None, max_rows: int | None) -> list[DueRow]:
        """Take the rows held whose fire time has come (and is before ``before``), at most ``max_rows``, in
        fire-time then job-id order, and remember them as fired."""
        due: list[DueRow] = []
        while (
            self._seconds
            and (second := _instant(self._seconds[0])) <= now
            and (before is None or second < before)
        ):
            rows = self._take_second()
            rows.sort(key=_BY_JOB_ID)
            for row in rows:
                self._fired[row.job_id] = row
            due.extend(rows)
            if max_rows is not None and len(due) >= max_rows:
                break
        if max_rows is not None and len(due) > max_rows:
            for row in due[max_rows:]:  # held again, for the next call
                self._fired.pop(row.job_id, None)
                self._add(row)
            due = due[:max_rows]
        if len(self._fired) > 2 * len(due) + 10_000:
            recent = (now - MINUTE).timestamp()
            self._fired = {k: v for k, v in self._fired.items() if v.fire_at > recent}
        return due

    def _claim_chunk(
        self, rows: list[DueRow], now: datetime, report: FireReport
    ) -> tuple[ClaimOutcome, float]:
        """Build the jobs of ``rows`` and claim them; the outcome, and the seconds the claims' writes took.
        A row that cannot be built is quarantined (reported once, not claimed) and the others claimed; it is
        left to the sweep, which reads the whole item (claimed if that reads, else known to the quarantine
        shared with this poller's sweep, so not reported twice)."""
        readable, unreadable = [], []
        for row in rows:
            try:
                readable.append(row.job())
            except Exception as error:  # whatever a stored payload makes the reader raise
                due = _instant(row.fire_at)
                key, why = f"{iso_z(due)}#{row.job_id}", unreadable_error(error)
                part = partition_of(row.job_id)
                unreadable.append(UnreadableRow(row.job_id, part, minute_bucket(due), key, why))
        if unreadable:
            self._unfire([row for row in rows if row.job_id in {u.job_id for u in unreadable}])
            report.unreadable_rows += self.quarantine.note(unreadable)
        jobs = resolve_calendars(readable, self.calendars)
        running = self.store.active_runs(active_run_ids(jobs))
        claims = [
            make_claim(
                plan_claim(job, now, self.grace, self._active(job), running.get(job.state.active_run or "")),
                now,
                self.queue_deadline,
            )
            for job in jobs
        ]
        started = time.perf_counter()
        outcome = self.store.claim(claims, now)
        return outcome, time.perf_counter() - started

    def _unfire(self, rows: list[DueRow]) -> None:
        for row in rows:
            self._fired.pop(row.job_id, None)


def _count_claimed(report: FireReport, outcome: ClaimOutcome) -> None:
    report.runs_created += len(outcome.runs)
    report.lost_races += outcome.lost_races
    report.existing_runs += outcome.existing_runs
    report.runs_requeued += len(outcome.requeued)
    report.runs_skipped += len(outcome.skipped)
    report.write_requests += outcome.write_requests


def _messages(outcome: ClaimOutcome) -> list[RunMessage]:
    """The messages of a claim's runs: a run created here travels with its message; one found in the way,
    by name."""
    messages = [RunMessage.carrying(run) for run in outcome.runs]
    messages += [RunMessage(run.run_id, run.attempt) for run in outcome.requeued]
    return messages


def _wait_for_sends(sends: list[Future[None]]) -> Exception | None:
    """Wait for every send; the first one's error, if any failed (those runs were claimed but not queued:
    their queue deadline brings them back)."""
    error: Exception | None = None
    for sent in sends:
        try:
            sent.result()
        except Exception as exc:
            error = error or exc
    return error
