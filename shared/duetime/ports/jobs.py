"""The job store: the due index, claims, quarantined rows and the index's marks.

A part of ``duetime.ports``: every port, its docstrings the contract every adapter keeps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from pydantic import ValidationError

from duetime.domain.claim_plan import Claim
from duetime.domain.models import Job, Run

# ``ClaimOutcome.write_requests`` counts requests of up to this many writes: DynamoDB's BatchExecuteStatement
# takes 25 statements a request (the twin counts as DynamoDB would).
CLAIM_WRITES_PER_REQUEST = 25


@dataclass(frozen=True)
class ClaimOutcome:
    runs: list[Run] = field(default_factory=list)  # created by this claim, in state queued: to send
    claimed_jobs: int = 0  # plans whose schedule move landed (a skip may move it with no run)
    lost_races: int = 0  # plans whose job another poller (or an edit) moved first
    write_requests: int = 0  # requests the writes took (a batch of up to 25 writes each)
    existing_runs: int = 0  # run rows found already there: left as they were
    # Of those, the rows of claims whose move landed: their message may never have been sent (a claim cut
    # between its two steps), so they are sent again; a worker drops a message for a run not waiting.
    requeued: list[Run] = field(default_factory=list)
    # The skipped due times recorded (``claim_plan``: runs with status skipped), of claims whose move landed.
    skipped: list[Run] = field(default_factory=list)


@dataclass(frozen=True)
class UnreadableRow:
    """A due-index row that could not be read as a job (invalid JSON, a required field missing, a wrong type,
    an unknown schedule kind): its key and why, never its payload (which may hold a secret). The row stays
    where it is; the sweep claims the rest of its bucket and reports it (``UnreadableRows``)."""

    job_id: str
    partition: int
    bucket: str  # the minute bucket, "YYYY-MM-DDTHH:MM"
    due_key: str  # "<fire time>#<job id>"
    error: str  # the exception's type and first line


@dataclass(frozen=True)
class QuarantinedRow:
    """An unreadable row as the quarantine record keeps it for the operator: the row, and when a poller
    first reported it (``duetime system quarantine``)."""

    row: UnreadableRow
    first_seen: datetime


class QuarantineRecord(Protocol):
    """The unreadable due rows pollers have found, kept for the operator (``duetime system quarantine``):
    one record a row (job id and due key), written once (QUARANTINED_ROW_IS_NEW: the first report's time
    is kept), forgotten 30 days after it was written. The rows themselves are never touched."""

    def record_unreadable(self, rows: Sequence[UnreadableRow], now: datetime) -> None:
        """Keep each row not kept yet (a row kept already is a normal outcome: left as it is)."""
        ...

    def quarantined_rows(self, limit: int = 1000) -> list[QuarantinedRow]:
        """The rows kept, oldest report first, at most ``limit``."""
        ...


def unreadable_error(error: Exception) -> str:
    """How an ``UnreadableRow`` names its error, without the input it refused (pydantic's message quotes
    it): a validation error's first three fields and messages, any other error's type and first line."""
    if isinstance(error, ValidationError):
        fields = error.errors(include_input=False, include_url=False)[:3]
        text = "; ".join(f"{'.'.join(str(part) for part in e['loc'])}: {e['msg']}" for e in fields)
    else:
        text = str(error).split("\n")[0]
    return f"{type(error).__name__}: {text}"[:300]


class DueRow(Protocol):
    """A due job as the minute preload holds it until its second, in a few hundred bytes: what firing and
    the sweep's ``holds`` look at (fire time, job id, version) at hand, and the job itself only when
    ``job()`` builds it."""

    @property
    def fire_at(self) -> int:
        """The job's fire time (``state.next_fire_at``) in whole seconds since the epoch."""
        ...

    @property
    def job_id(self) -> str: ...

    @property
    def version(self) -> int:
        """The job's ``state.version`` as read."""
        ...

    def job(self) -> Job:
        """The job as ``due_jobs`` would have returned it from the same read (a new model each call)."""
        ...


class JobStore(Protocol):
    def get_job(self, job_id: str) -> Job | None: ...

    def due_jobs(
        self,
        partition: int,
        bucket: str,
        until: datetime,
        limit: int,
        after: str | None = None,
        unreadable: list[UnreadableRow] | None = None,
    ) -> list[Job]:
        """Jobs in the due index for (partition, minute bucket) with fire time <= ``until``, oldest first,
        starting strictly after the due key ``after`` (``"<fire time>#<job id>"``) when given.

        A row that cannot be read as a job is left out, never raised: one bad row is one bad job, not a
        bucket's. It is appended to ``unreadable`` (its key and error) when given, and counts within
        ``limit`` (a page of ``limit`` rows read is full, whatever could be read of it).

        Reads may be slightly stale (index reads are eventually consistent); the claim re-checks.
        """
        ...

    def due_rows(
        self, partition: int, bucket: str, until: datetime, limit: int, after: str | None = None
    ) -> Sequence[DueRow]:
        """The rows ``due_jobs`` returns for the same arguments, in the same order, each as a compact
        ``DueRow`` whose ``job()`` equals the job ``due_jobs`` returns for it. For holding many rows (the
        minute preload): a row keeps no model and far less memory than one.
        """
        ...

    def count_due(self, partition: int, bucket: str) -> int:
        """How many rows the due index holds for (partition, minute bucket), whatever their fire time: for
        forecasts (``duetime.scheduling.prescale``). Reads keys only, never items; may be slightly stale."""
        ...

    def claim(self, claims: Sequence[Claim], now: datetime) -> ClaimOutcome:
        """Carry out claims in ordered steps, never as one atomic write: read the jobs' versions (a claim
        whose job moved since the poller read it, by another poller, an edit or a deletion, is a lost race
        and writes nothing), then create each current claim's run rows (queued, with a queue deadline;
        condition RUN_IS_NEW), then move each job's schedule to ``plan.next_state`` (condition
        JOB_UNCHANGED_SINCE_READ), whether its rows were new or already there. Claims of many jobs share
        requests.

        What the order keeps: one run per nominal time (the run id is the job id and the nominal time), and
        no nominal time lost: the schedule moves past a time only once its row exists. A claim cut between
        the steps leaves a queued row and an unmoved job; the next claim of that job finds the row in its
        way, moves the schedule and returns the row in ``requeued`` to be sent. A row a claim created is
        always returned in ``runs`` to be sent, even when its move then lost (an edit landing in the
        milliseconds between the read and the move: the run for the time that was due is kept, and the
        edit's schedule stands). A row already there (a restored table, a row written by hand) is left as
        it is and not created again, and its claim still moves the schedule.

        Runs that carry a success deadline get their watch (``DeadlineStore``) before the schedule moves.
        """
        ...

    def active_runs(self, run_ids: Sequence[str]) -> dict[str, Run]:
        """The active runs (``JobState.active_run``) of jobs held to an overlap policy, by run id, read
        consistently before they are claimed (``claim_plan.apply_overlap`` decides from their status)."""
        ...

    def low_water_marks(self, partitions: Sequence[int]) -> dict[int, str]:
        """The oldest minute bucket that may still hold due rows, per partition (missing: unknown)."""
        ...

    def ensure_low_water_mark(self, partition: int, bucket: str) -> None:
        """Give a partition a mark at ``bucket`` if it has none; call before writing its first job."""
        ...

    def advance_low_water_marks(
        self, marks: Mapping[int, str], read: Mapping[int, str] | None = None
    ) -> set[int]:
        """Raise each partition's mark to its bucket in ``marks`` (never lowers one; a concurrent raise wins
        quietly). A partition that has no mark yet (``ensure_low_water_mark``) gets none. ``read``: the marks
        the mover swept from; a partition whose stored mark is now behind its read one (lowered since by
        ``MarkRebuild``, ``duetime restore``) is not raised, so buckets the mover never read stay ahead of
        the mark. Returns the partitions of ``marks`` not raised (whatever the reason)."""
        ...


class MarkRebuild(Protocol):
    """The partitions' low-water marks rebuilt from the jobs a table holds (``duetime restore``): after the
    jobs table is restored from a backup, its due rows may lie behind marks that moved on since, where no
    sweep reads them (``duetime.scheduling.restore``)."""

    def due_rows_by_bucket(self) -> dict[tuple[int, str], int]:
        """How many due-index rows each (partition, minute bucket) holds, over the whole index (a scan of
        keys only: for a restore or a check, never for a poll). Rows that cannot be read count."""
        ...

    def low_water_marks(self, partitions: Sequence[int]) -> dict[int, str]:
        """As ``JobStore.low_water_marks``."""
        ...

    def lower_low_water_marks(self, marks: Mapping[int, str]) -> dict[int, str]:
        """Lower each partition's mark to its bucket in ``marks`` where the stored one is later, and give a
        partition with no mark that bucket (conditions WATERMARK_AHEAD, WATERMARK_MISSING); never raises
        one. Returns the partitions whose mark was written, with the bucket written."""
        ...


class DueReads(Protocol):
    """The part of ``JobStore`` the reconciler reads."""

    def low_water_marks(self, partitions: Sequence[int]) -> dict[int, str]: ...

    def due_rows(
        self, partition: int, bucket: str, until: datetime, limit: int, after: str | None = None
    ) -> Sequence[DueRow]: ...
