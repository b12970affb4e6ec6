"""The interfaces the logic depends on. Their docstrings are the contract every adapter keeps.

A lost race is a normal outcome: methods that guard a state change report it by returning ``False`` or
``None``, never by raising. ``now`` is always the store's clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from pydantic import ValidationError

from duetime.domain.aws_targets import AwsTarget, RunEnvelope
from duetime.domain.calendars import Calendar, CalendarChange
from duetime.domain.catalog import AuditEvent, IdempotencyRecord, Page
from duetime.domain.claim_plan import Claim
from duetime.domain.installation import Installation
from duetime.domain.job_history import JobChange
from duetime.domain.models import Job, Run, RunResult, RunStatus, Team
from duetime.domain.tokens import ApiToken


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
class ResultWrite:
    """One attempt's result for ``RunStore.record_results``: a terminal ``status``, or ``RETRY_WAIT`` with
    ``retry_at`` and ``queue_deadline`` for attempt + 1."""

    run: Run
    status: RunStatus
    result: RunResult
    retry_at: datetime | None = None
    queue_deadline: datetime | None = None


@dataclass(frozen=True)
class ReapCandidate:
    """A non-terminal run whose lease expired or whose queue deadline passed; ``reap_at``: that instant."""

    run_id: str
    status: RunStatus
    attempt: int
    max_attempts: int
    reap_at: datetime


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


class RunStore(Protocol):
    def get_run(self, run_id: str) -> Run | None: ...

    def acquire_lease(
        self, run_id: str, attempt: int, owner: str, now: datetime, lease_until: datetime
    ) -> Run | None:
        """queued|retry_wait -> running for exactly ``attempt``, setting owner and lease expiry.

        None when the run is not waiting for that attempt (a duplicate or stale message: drop it).
        """
        ...

    def extend_lease(
        self, run_id: str, attempt: int, owner: str, now: datetime, lease_until: datetime
    ) -> bool:
        """Push the lease out, only while ``owner`` still holds an unexpired lease for ``attempt``."""
        ...

    def return_to_queue(
        self, run_id: str, attempt: int, owner: str, now: datetime, queue_deadline: datetime
    ) -> bool:
        """Give a lease back without an attempt being used (e.g. the team is at its cap)."""
        ...

    def record_result(
        self,
        run: Run,
        owner: str,
        status: RunStatus,
        result: RunResult,
        now: datetime,
        retry_at: datetime | None = None,
        queue_deadline: datetime | None = None,
    ) -> bool:
        """Finish ``run.attempt``: terminal status, or retry_wait for attempt + 1 at ``retry_at``.

        Only the lease owner of that attempt may do this (condition LEASE_OWNED); False means the
        worker is stale (its lease was taken over) and its result is discarded.
        """
        ...

    def get_runs(self, run_ids: Sequence[str]) -> dict[str, Run]:
        """The runs of ``run_ids`` that exist, by run id, read consistently (as ``get_run``): what a worker
        reads of the runs its buffered runs wait for (``Run.waits_for``)."""
        ...

    def cancel_run(self, run_id: str, now: datetime) -> Run | None:
        """queued|retry_wait|running -> cancelled (condition RUN_CANCELLABLE), finished now and out of the
        reap index: the run as stored after it, or None when it is finished (or missing). A cancelled run is
        never leased again, and a running one's heartbeat and result are refused."""
        ...

    # A worker's batch: the same writes, each under the same condition, many runs a request. Each run id at
    # most once per call; each write succeeds or fails on its own, as the single-run form would.

    def acquire_leases(
        self,
        attempts: Sequence[tuple[str, int]],
        owner: str,
        now: datetime,
        lease_until: datetime,
        carried: Mapping[str, Run] | None = None,
    ) -> dict[str, Run]:
        """``acquire_lease`` for each ``(run_id, attempt)``: the runs now leased to ``owner``, by run id
        (each as ``acquire_lease`` would return it); the others were duplicates or stale.

        ``carried``: runs as their messages carried them (run id -> run, ``RunMessage.run``). A store may
        take their leases without reading them first, on condition that the stored run is the carried one;
        what it returns is what it would return without them. A carried run that is not the stored one
        (forged, garbled, outdated) changes nothing but the requests made: the worker calls what the store
        holds, never what a message says."""
        ...

    def extend_leases(
        self, attempts: Sequence[tuple[str, int]], owner: str, now: datetime, lease_until: datetime
    ) -> set[str]:
        """``extend_lease`` for each ``(run_id, attempt)``: the run ids whose lease ``owner`` still holds,
        now until ``lease_until``."""
        ...

    def record_results(self, results: Sequence[ResultWrite], owner: str, now: datetime) -> set[str]:
        """``record_result`` for each: the run ids recorded (LEASE_OWNED held); the others' workers were
        stale and their results are discarded."""
        ...

    def record_results_and_free_slots(
        self,
        results: Sequence[ResultWrite],
        owner: str,
        now: datetime,
        slots: Mapping[str, Mapping[str, int]],
    ) -> set[str]:
        """``record_results``, and ``TeamStore.release_slots`` for each team's slots (team id -> run id ->
        slot), of a store that keeps both (every store here does), in as few requests as it can: the end
        of a worker's wave of calls. The slots are freed whether or not their results are recorded; a
        failure to free one is not raised (a slot comes back by itself when its lease passes). Raises as
        ``record_results`` does."""
        ...

    def runs_needing_attention(self, partition: int, now: datetime, limit: int) -> list[ReapCandidate]:
        """Non-terminal runs whose lease or queue deadline passed, from the reap index (no Scan), up to
        ``limit`` index entries read. An index that holds checks rather than deadlines (the DynamoDB store's,
        ``adapters/dynamodb/reap_checks.py``, with its reap tickets for the runs of a claim) moves the checks
        of runs still alive here; either way a run is returned once it needs the reaper and never before."""
        ...

    def has_reap_work_before(self, partition: int, until: datetime) -> bool:
        """Whether an unfinished run of ``partition`` may need the reaper before ``until`` (its lease expiry,
        queue deadline or retry time, or a check of the reap index before it): one read of the index, no run
        returned. False means no run of the partition needs the reaper before ``until``; a store whose index
        holds checks may answer True earlier than the run really needs it. A quiet partition group's poller
        asks this before it stops until the next tick (``duetime.scheduling.quiet``)."""
        ...

    def requeue_expired_lease(
        self, candidate: ReapCandidate, now: datetime, queue_deadline: datetime
    ) -> Run | None:
        """running with an expired lease -> queued for attempt + 1 (condition LEASE_EXPIRED)."""
        ...

    def bury_expired_lease(self, candidate: ReapCandidate, now: datetime, result: RunResult) -> Run | None:
        """running with an expired lease and no attempts left -> dead (condition LEASE_EXPIRED)."""
        ...

    def renew_queue_deadline(
        self, candidate: ReapCandidate, now: datetime, queue_deadline: datetime
    ) -> Run | None:
        """A queued or retry_wait run whose message was lost gets a new deadline (condition WAIT_EXPIRED);
        the caller sends the message again."""
        ...


@dataclass(frozen=True)
class DeadlineWatch:
    """A scheduled run's success deadline (``duetime.execution.deadlines``): the run of ``run_id`` (nominal
    time ``nominal_at``) must have succeeded by ``deadline_at``."""

    run_id: str
    job_id: str
    partition: int
    nominal_at: datetime
    deadline_at: datetime

    @classmethod
    def of(cls, run: Run) -> DeadlineWatch | None:
        """The watch of a run that carries a success deadline (``Run.success_by``); None for any other."""
        if run.success_by is None:
            return None
        return cls(run.run_id, run.job_id, run.partition, run.nominal_at, run.success_by)


class DeadlineStore(Protocol):
    """Success deadlines: one watch per scheduled run of a job with ``success_deadline_seconds``, in an index
    by (partition, deadline) that pollers read without a Scan, and one *missing* flag per job (the nominal
    time of the first missed time since the job last recovered).

    ``JobStore.claim`` writes the watch of every run it creates or finds in the way that carries
    ``Run.success_by``, after the run rows and before the schedule moves, so no watched run exists for long
    without its watch (a claim cut between the steps is claimed again, and writes the watch again; a watch
    already there is left as it is)."""

    def due_watches(self, partition: int, now: datetime, limit: int) -> list[DeadlineWatch]:
        """The watches of ``partition`` whose deadline has passed (``deadline_at < now``, to the second),
        oldest first, up to ``limit``. A dropped watch is never returned again."""
        ...

    def drop_watch(self, watch: DeadlineWatch) -> bool:
        """Delete the watch (condition WATCH_EXISTS): True for the one caller that deleted it."""
        ...

    def missing_since(self, job_id: str) -> datetime | None:
        """The job's missing flag, read consistently: the nominal time of its first missed time since it
        last recovered, or None."""
        ...

    def missing_flags(self, job_ids: Sequence[str]) -> dict[str, datetime]:
        """The missing flags of those of ``job_ids`` that have one, by job id (may be slightly stale: for
        showing, never for deciding)."""
        ...

    def flag_missing(self, job_id: str, since: datetime) -> bool:
        """Set the job's missing flag to ``since`` if it has none (condition JOB_NOT_MISSING)."""
        ...

    def clear_missing(self, job_id: str, since: datetime) -> bool:
        """Clear the job's missing flag if it is still ``since`` (condition JOB_MISSING_AS_READ): True for the
        one caller that cleared it (who raises ``recovered``)."""
        ...


@dataclass(frozen=True)
class Notice:
    """One event of a job for one of its notify channels (``duetime.execution.notifications``): what
    ``NotificationOutbox.enqueue`` groups. ``channel``: the channel as canonical JSON (type and address)."""

    team: str
    job_id: str
    event: str  # a ``NotifyEvent`` value
    channel: str
    run_id: str
    attempt: int
    detail: str
    at: datetime


@dataclass(frozen=True)
class PendingNotification:
    """A group of one job's notices for one (event, channel), as the outbox holds it: ``pending`` notices not
    yet delivered, the first and the latest of them, and when it is next due (``due_at``; None: nothing to
    send and no quiet window running)."""

    job_id: str
    event: str
    channel: str
    team: str
    pending: int
    first_at: datetime
    last_at: datetime
    run_id: str
    attempt: int
    detail: str
    due_at: datetime | None
    attempts: int = 0  # delivery attempts of this group so far
    sequence: int = 0  # notifications of this (job, event, channel) delivered before this one
    # The notices the notification being delivered stands for: fixed when it is first taken, so that sending
    # it again (a retry, a deliverer that lost its lease) carries the same count under the same id; notices
    # that come in meanwhile wait for the next one. 0 while none is being delivered.
    sending: int = 0


class NotificationOutbox(Protocol):
    """Each job's notices, grouped per (event, channel) in one record, and when each group is due to be
    delivered: at once for the first notice after a quiet spell, at the end of the quiet window for repeats
    (``duetime.execution.notifications``). Every change below is one conditional write that returns False (or
    None) on a lost race; ``due_at`` as read is what a deliverer's writes are conditioned on
    (NOTICE_DUE_AS_READ), so of several deliverers one takes a group, and a deliverer that lost it (its lease
    passed) changes nothing."""

    def enqueue(self, notice: Notice) -> None:
        """Add ``notice`` to its group (unconditional): one more pending, the latest run and detail, the first
        notice's time if none is pending, and due at ``notice.at`` unless the group already has a due time
        (a delivery lease, a retry or a quiet window stands)."""
        ...

    def due_notifications(self, now: datetime, limit: int) -> list[PendingNotification]:
        """Groups due before ``now`` (to the second), oldest first, up to ``limit``; read consistently."""
        ...

    def take(self, group: PendingNotification, until: datetime) -> PendingNotification | None:
        """Lease a due group for delivery until ``until`` (its ``due_at`` moves there; NOTICE_DUE_AS_READ),
        fixing ``sending`` at ``pending`` unless a notification is already being delivered: the group as
        stored after, or None when someone else moved it first."""
        ...

    def delivered(self, taken: PendingNotification, quiet_until: datetime) -> bool:
        """The taken group's notification was delivered: its ``sending`` notices subtracted from ``pending``,
        one more delivered, the attempts reset, due again at ``quiet_until`` (a notice in between waits)."""
        ...

    def retry_later(self, taken: PendingNotification, due_at: datetime) -> bool:
        """The delivery failed: one more attempt counted, due again at ``due_at``."""
        ...

    def give_up(self, taken: PendingNotification) -> bool:
        """Stop delivering the taken group's notification (a permanent failure, or too many attempts): its
        ``sending`` notices are subtracted as if delivered, the attempts reset, and the group leaves the due
        index; a notice that came in during the attempts waits for the next one, which is due at once."""
        ...

    def rest(self, taken: PendingNotification) -> bool:
        """A taken group with nothing pending (its quiet window ended) leaves the due index, only if still
        nothing is pending (NOTICE_NONE_PENDING): the next notice is due at once."""
        ...


class JobAndRunStore(JobStore, RunStore, DeadlineStore, Protocol):
    """A store of jobs, runs and their deadlines (every store here is): what the API's service reads and
    writes besides the catalog."""


@dataclass(frozen=True)
class PollerLease:
    """A partition group's poller lease as the store holds it (one item per group;
    ``duetime.scheduling.poller_lease`` describes the life of the invocations that share it). Instants are the
    store's clock."""

    group: str
    holder: str | None = None  # the invocation that claims the group's partitions; None: nobody
    term: int = 0  # +1 each time the lease changes hands (a fencing token, and a count of holders)
    since: datetime | None = None  # the holder claims from here (the agreed second, after a handover)
    expires_at: datetime | None = None  # unless renewed before then; after it, anyone may take the lease
    successor: str | None = None  # the one registered standby invocation
    handover_at: datetime | None = None  # a whole second the holder offered the lease to the successor at
    wakes: int = 0  # +1 each time a write made something due soon in the group (``duetime.scheduling.quiet``)

    def free_at(self, now: datetime) -> bool:
        """Nobody holds the lease at ``now``: never held, given back, or expired."""
        return self.holder is None or self.expires_at is None or self.expires_at < now


class PollerLeaseStore(Protocol):
    """The poller leases: who claims a partition group's due jobs, and from which instant.

    At any instant at most one invocation may claim a group: its holder, from ``since`` until the lease
    expires or until an accepted ``handover_at``. Every change below is one conditional write that returns
    the lease as it stands after the write, or None when the write's condition did not hold (a lost race:
    the caller reads the lease and acts on what it finds). ``now`` and every instant are the store's clock;
    a lease's expiry is judged by the ``now`` of the invocation that wants it.
    """

    def read_poller_lease(self, group: str) -> PollerLease:
        """The group's lease, read consistently (a group never leased has no holder and term 0)."""
        ...

    def read_poller_leases(self, groups: Sequence[str]) -> dict[str, PollerLease]:
        """Several leases at once (a holder's watch of its helpers' slices), each as ``read_poller_lease``
        reads it, by name: one consistent read of them all, not one each."""
        ...

    def acquire_poller_lease(self, group: str, me: str, now: datetime, until: datetime) -> PollerLease | None:
        """Take a free or expired lease (condition POLLER_LEASE_FREE): ``me`` holds it from ``now`` until
        ``until``, the term goes up by one, and any registered successor or open offer is cleared."""
        ...

    def renew_poller_lease(self, group: str, me: str, now: datetime, until: datetime) -> PollerLease | None:
        """Extend ``me``'s lease to ``until``, only while ``me`` holds it unexpired (POLLER_LEASE_HELD)."""
        ...

    def release_poller_lease(self, group: str, me: str) -> bool:
        """Give the lease back if ``me`` still holds it (POLLER_LEASE_MINE): it is free at once."""
        ...

    def register_poller_successor(self, group: str, me: str) -> PollerLease | None:
        """Register ``me`` as the one standby that takes over from the holder (POLLER_SUCCESSOR_VACANT)."""
        ...

    def withdraw_poller_successor(self, group: str, me: str) -> bool:
        """Unregister ``me`` as successor, with any offer made to it (POLLER_SUCCESSOR_IS_ME)."""
        ...

    def offer_poller_lease(
        self, group: str, me: str, successor: str, at: datetime, now: datetime, until: datetime
    ) -> PollerLease | None:
        """Hand over: the holder ``me`` offers the lease to the registered ``successor`` from the whole second
        ``at`` and renews its own lease to ``until`` (POLLER_HANDOVER_OFFERABLE). Until the offer is
        withdrawn, the holder claims nothing at or after ``at``."""
        ...

    def accept_poller_lease(
        self, group: str, me: str, holder: str, at: datetime, until: datetime
    ) -> PollerLease | None:
        """The successor ``me`` accepts the standing offer (POLLER_HANDOVER_OFFERED): it holds the lease
        from ``at`` (``since``) until ``until``, the term goes up by one, and the offer is cleared."""
        ...

    def withdraw_poller_offer(self, group: str, me: str, at: datetime) -> PollerLease | None:
        """The holder takes back an offer nobody accepted (POLLER_HANDOVER_UNANSWERED); the successor is
        unregistered too, and the holder keeps its lease."""
        ...

    def wake_poller_group(self, group: str) -> PollerLease:
        """Count a wake: a job write made something due soon in the group (``wakes`` + 1, unconditional).
        The lease as it stands after: when nobody holds it, the waker starts an invocation."""
        ...

    def release_quiet_poller_lease(self, group: str, me: str, wakes_seen: int) -> bool:
        """Give the lease back because the group is quiet, only if ``me`` still holds it and nobody woke the
        group since the holder read ``wakes_seen`` (POLLER_QUIET_UNWOKEN). Serialised with
        ``wake_poller_group`` on the one item: either the wake comes first and the holder stays, or the
        release comes first and the waker finds the lease free."""
        ...


class InstallationRecord(Protocol):
    """The installation's record of itself (``duetime.domain.installation``): which releases have run against
    its tables and the stored format it is finalized at. One item; every change is one conditional write.
    An installation never recorded reads as ``Installation()`` (finalized at format 1)."""

    def read_installation(self) -> Installation:
        """The record, read consistently."""
        ...

    def record_release(self, release: str, now: datetime) -> Installation:
        """Say that a function of ``release`` runs at ``now`` (unconditional): its first sighting is kept,
        its last set to ``now``. The record as it stands after the write."""
        ...

    def start_installation(self, stored_format: int, release: str, now: datetime) -> bool:
        """Finalize a new installation at ``stored_format`` at once (nothing older ever wrote to it), only
        if it was never finalized (INSTALLATION_NEVER_FINALIZED); False when it was."""
        ...

    def finalize_installation(self, stored_format: int, release: str, now: datetime, was: int) -> bool:
        """Finalize at ``stored_format`` by ``release``, only while the record is still finalized at
        ``was``, the format the caller read and judged (INSTALLATION_FINALIZED_AS_READ); False when another
        finalize came first."""
        ...

    def holds_nothing(self) -> bool:
        """No job and no run is stored: a new installation (whatever it holds, no older release wrote it)."""
        ...


class TeamStore(Protocol):
    def get_team(self, team_id: str) -> Team | None: ...

    def put_team(self, team: Team) -> None: ...

    def acquire_slot(self, team: Team, run_id: str, now: datetime, lease_until: datetime) -> int | None:
        """Take one of the team's ``max_concurrency`` slots for ``run_id`` until ``lease_until``.

        A slot is free when nobody holds it or its holder's lease has expired, so a dead worker's slot
        comes back by itself. Never more than ``max_concurrency`` holders at once. None when no free slot
        was found: for caps up to 100 that means every slot is held; for bigger caps only a few groups of
        slots are searched, so None may come a little before the cap (the caller retries a few seconds
        later), never after it.
        """
        ...

    def extend_slot(self, team_id: str, slot: int, run_id: str, lease_until: datetime) -> bool: ...

    def release_slot(self, team_id: str, slot: int, run_id: str) -> None:
        """Free the slot if ``run_id`` still holds it."""
        ...

    def acquire_slots(
        self, team: Team, run_ids: Sequence[str], now: datetime, lease_until: datetime
    ) -> dict[str, int]:
        """``acquire_slot`` for each run (distinct slots): the slot each run that got one holds, by run id.
        The runs left out found no free slot (as ``acquire_slot``'s None)."""
        ...

    def extend_slots(self, team_id: str, slots: Mapping[str, int], lease_until: datetime) -> set[str]:
        """``extend_slot`` for each run id -> slot: the run ids that still held theirs."""
        ...

    def release_slots(self, team_id: str, slots: Mapping[str, int]) -> None:
        """``release_slot`` for each run id -> slot."""
        ...


class TeamCatalog(Protocol):
    """Teams as the API and the operator keep them: settings with a revision, named tokens and the audit
    trail (what ``duetime.api.team_admin.TeamAdmin`` needs). Every change of a team is one atomic write of its
    settings, its token rows and its audit row, conditioned on what it was computed from: a lost race is
    ``False``, and nothing of it is written."""

    def create_team(self, team: Team, token: ApiToken, audit: AuditEvent | None = None) -> bool:
        """Write a new team at revision 1, its first token (both the row ``token_record`` finds and its row
        in ``team_tokens``), its place in ``list_teams`` and ``audit`` (the row of revision 1), with job
        counts of 0, all at once; False, and nothing written, when the team id is taken (TEAM_IS_NEW)."""
        ...

    def token_record(self, token_hash: str) -> ApiToken | None:
        """The token whose SHA-256 is ``token_hash``, if one was issued and not revoked (of any generation:
        the caller compares it with the team's ``token_generation``). May be slightly stale."""
        ...

    def team_tokens(self, team_id: str) -> list[ApiToken]:
        """Every listed token of the team, of any generation, by token id, read consistently (what issuing
        and revoking start from). ``created_at`` as stored: to the second; ``created_by`` ``"unknown"``
        when it was empty."""
        ...

    def get_team(self, team_id: str) -> Team | None:
        """The team's settings (None: no such team). May be slightly stale."""
        ...

    def team_revision(self, team_id: str) -> tuple[Team, int] | None:
        """The team and its revision, read consistently: what an administrative change starts from."""
        ...

    def list_teams(self) -> list[Team]:
        """Every team ``create_team`` made, by id."""
        ...

    def replace_team(
        self,
        before: Team,
        revision: int,
        after: Team,
        audit: AuditEvent,
        issue: ApiToken | None = None,
        revoke: ApiToken | None = None,
    ) -> bool:
        """Write ``after`` over ``before`` as revision ``revision + 1``, all at once with: the audit row of
        that revision, the rows of the token ``issue`` and the removal of the token ``revoke``. Written only
        if the stored settings are still ``before`` (TEAM_UNCHANGED_SINCE_READ), no audit row of revision
        ``revision + 1`` exists (so of two changes from one read, even two that agree on the settings, such
        as two token changes, one loses), the issued token's rows are new (TEAM_IS_NEW) and the revoked
        token's rows are there (TOKEN_EXISTS). False, and nothing written, otherwise."""
        ...

    def audit_events(self, team_id: str, limit: int = 100) -> list[AuditEvent]:
        """The team's administrative changes (those of the last 90 days), newest first (by revision), at
        most ``limit``. ``at`` to the second; ``detail`` as JSON gives it back (tuples as lists, values
        JSON does not know as text)."""
        ...


class CalendarStore(Protocol):
    """A team's calendars (``duetime.domain.calendars``), each change written at once with its history entry
    (``CalendarChange``): all of it or none of it. A lost race is ``False``, and nothing of it is written.

    A name's versions count up from 1 and are never reused, not even after a delete (a deleted calendar
    leaves its last version behind, and a calendar created again under its name continues from there), so
    (team, name, version) names one content for good: what a reader derives from a version (its dates of a
    year) it may cache forever. Instants are stored to the whole second."""

    def last_version(self, team_id: str, name: str) -> int:
        """The highest version the team's calendar ``name`` has had, live or deleted; 0 for a name never
        used. Read consistently: what a create starts from."""
        ...

    def create_calendar(self, calendar: Calendar, change: CalendarChange) -> bool:
        """Write a new calendar with its history entry, only if the team has no calendar of that name and
        ``calendar.version`` is one above the name's ``last_version`` (CALENDAR_IS_NEW for a name never
        used, CALENDAR_NAME_FREED for a deleted one's). False otherwise: the name is taken, or another
        create or delete came first (read ``last_version`` again)."""
        ...

    def replace_calendar(self, before: Calendar, after: Calendar, change: CalendarChange) -> bool:
        """Write ``after`` (``before.version + 1``) over ``before`` with its history entry, only if the stored
        calendar is still ``before``'s version (CALENDAR_VERSION_IS: optimistic concurrency). False on a lost
        race (another change, or a delete, came first)."""
        ...

    def remove_calendar(self, calendar: Calendar, change: CalendarChange) -> bool:
        """Delete the calendar with its history entry, only if the stored one is still ``calendar``'s version
        and no job uses it (CALENDAR_UNUSED); its version stays taken (``last_version``). False otherwise: a
        lost race, or jobs use it (``calendar_users``)."""
        ...

    def calendar_users(self, team_id: str, name: str, limit: int) -> list[str]:
        """Ids of the team's jobs that use calendar ``name`` (``JobSpec.calendar_names``), at most ``limit``,
        by id, read consistently. A job write keeps them in the same atomic write as the job: a job that
        starts using a calendar the team does not have is refused (``CalendarGone``), and a calendar is
        deleted only while it has none."""
        ...

    def get_calendar(self, team_id: str, name: str) -> Calendar | None:
        """The team's live calendar ``name`` as stored, read consistently; None when there is none."""
        ...

    def team_calendars(self, team_id: str, limit: int, cursor: str | None) -> Page:
        """A page of the team's live calendars, by name, from ``cursor`` (None: the first). A page may hold
        fewer than ``limit`` while its cursor says more may follow (deleted names are skipped)."""
        ...

    def calendar_history(self, team_id: str, name: str, limit: int, cursor: str | None) -> Page:
        """A page of the changes (``CalendarChange``) of the team's calendar ``name`` of the last 90 days,
        newest first; a deleted calendar's too."""
        ...


class Catalog(TeamCatalog, CalendarStore, Protocol):
    """What the API reads and writes beside the scheduling hot path (``duetime.api.service.JobService``):
    teams (``TeamCatalog``), their calendars (``CalendarStore``), a team's jobs with their quotas, idempotency
    keys, search index and history, and a job's runs. It shares its jobs and runs with the store
    (``JobAndRunStore``): a job the catalog writes is one the poller claims, a run it creates one the worker
    leases.

    Job writes keep the team's counts in the same atomic write as the job: ``job_counts`` never drifts from
    the jobs. Listings page with opaque cursors (``Page``): a cursor is taken back only by the listing that
    returned it (the same team, job or search); any other raises ``InvalidCursor``. Instants are stored to
    the whole second, as the store keeps them."""

    def job_counts(self, team_id: str) -> tuple[int, int]:
        """(jobs, exact-time jobs) the team holds, as the job writes counted them, read consistently."""
        ...

    def exact_jobs(self, team_id: str) -> int:
        """The team's exact-time jobs (``job_counts``' second)."""
        ...

    def insert_job(
        self,
        job: Job,
        team: Team,
        now: datetime,
        idempotency: IdempotencyRecord | None,
        change: JobChange | None = None,
    ) -> str:
        """Write the new ``job`` (JOB_IS_NEW) with its search index entries, its history entry ``change``, the
        team's counts one job (and one exact-time job, if ``job.exact``) up, and ``idempotency``'s key, all
        at once or none of it.

        Returns the id of the job the request stands for: ``job.id``, or, when ``idempotency``'s key was
        used before with the same ``request_hash``, the id of the job that request created (nothing is
        written). Raises ``IdempotencyMismatch`` for a key used with another request hash (checked first),
        ``QuotaExceeded`` (``which`` ``"jobs"`` or ``"exact"``) when the team holds ``max_jobs`` jobs or
        ``exact_quota`` exact-time jobs already (JOB_QUOTA_LEFT, EXACT_QUOTA_LEFT) or does not exist, and
        ``CalendarGone`` when the team has no calendar of a name the job uses (CALENDAR_IS_LIVE; the calendars
        count the job among their users in the same write: ``calendar_users``)."""
        ...

    def get_job(self, job_id: str) -> Job | None:
        """The job as stored (instants to the second), of any team; None when there is none."""
        ...

    def job_id_by_key(self, team_id: str, key: str) -> str | None:
        """The id of the team's job that has ``key`` (``JobSpec.key``), read consistently; None if none has.
        Keys are unique in a team: a job write that gives a job a key another job has raises ``KeyTaken``
        and writes nothing; the key goes with the job when it is deleted."""
        ...

    def replace_job(
        self, before: Job, after: Job, team: Team, now: datetime, change: JobChange | None = None
    ) -> bool:
        """Write ``after`` over ``before`` only if the stored job is still ``before``'s version of
        ``before``'s team (JOB_VERSION_IS), with its search index entries moved, its history entry
        ``change``, and the team's exact-time count moved when ``exact`` changes, all at once. False (a lost
        race: nothing written) otherwise. Raises ``QuotaExceeded`` (``"exact"``) when the job becomes
        exact-time and the team holds ``exact_quota`` such jobs already, and ``CalendarGone`` when ``after``
        starts using a calendar the team does not have (the calendars' users move in the same write)."""
        ...

    def remove_job(self, job: Job, team: Team, change: JobChange | None = None) -> bool:
        """Delete the job only if the stored one is still ``job``'s version of its team (JOB_VERSION_IS),
        with its search index entries, with the history entry ``change`` (kept after the job), the team's
        counts one down and its calendars' users less it, all at once; False (nothing written) on a lost
        race. Its runs stay."""
        ...

    def team_jobs(self, team_id: str, limit: int, cursor: str | None) -> Page:
        """A page of at most ``limit`` of the team's jobs, by job id, from ``cursor`` (None: the first)."""
        ...

    def search_jobs(
        self, team_id: str, limit: int, cursor: str | None, label: tuple[str, str] | None, words: list[str]
    ) -> Page:
        """A page of the team's jobs labelled ``label`` (key, value) and/or with a name word beginning with
        each of ``words`` (lowercase, ``duetime.domain.labels``): at least one of the two is given. It walks
        at most ``limit`` index entries (the label's, by job id; else the longest word's, by word), so a page
        may hold fewer jobs than ``limit`` while its cursor says more may follow, and a job two of whose
        name words begin with the longest search word may come on two pages."""
        ...

    def job_history(self, job_id: str, limit: int, cursor: str | None) -> Page:
        """A page of the job's recorded changes (``JobChange``, those of the last 90 days), newest first,
        a deleted job's too; any team's (the caller filters)."""
        ...

    def get_run(self, run_id: str) -> Run | None:
        """The run as stored (instants to the second), of any team; None when there is none."""
        ...

    def job_runs(self, job_id: str, limit: int, cursor: str | None) -> Page:
        """A page of the job's runs, newest first (by occurrence: the part of the run id after ``@``), read
        consistently."""
        ...

    def insert_run(self, run: Run) -> bool:
        """Create a run made on request (a trigger), queued; False, and the run there left alone, when its
        run id exists (RUN_IS_NEW)."""
        ...

    def insert_runs(self, runs: Sequence[Run]) -> list[Run]:
        """Create runs made together (a backfill), each unless its run id exists (RUN_IS_NEW: the run there
        is left alone); the runs written, in order. The ids must be distinct."""
        ...

    def requeue_run(self, run: Run, now: datetime, queue_deadline: datetime) -> Run | None:
        """A failed or dead run back to queued for one more attempt (RUN_ENDED_UNSUCCESSFULLY): ``attempt``
        one up (``max_attempts`` raised to it if needed), the queue deadline ``queue_deadline``, no owner,
        lease, retry time or finish time. The run as stored after; None when it is not failed or dead (or
        gone)."""
        ...


@dataclass(frozen=True)
class RunMessage:
    """A run's attempt to work. A poller's message also carries the run it just created (``carrying``), so
    the worker need not read it before taking its lease (``RunStore.acquire_leases``' ``carried``); two
    messages are equal when they name the same attempt."""

    run_id: str
    attempt: int
    run: Run | None = field(default=None, compare=False)

    @classmethod
    def carrying(cls, run: Run) -> RunMessage:
        return cls(run.run_id, run.attempt, run)


class RunQueue(Protocol):
    def send(self, messages: Sequence[RunMessage], delay_seconds: int = 0) -> None:
        """Queue run messages (batches of 10); raises if any message could not be sent."""
        ...


class RunBacklog(Protocol):
    def waiting_runs(self) -> int:
        """Runs waiting in the run queue for a worker (messages visible now; approximate, as SQS counts
        them). Runs being worked and messages still delayed are not counted."""
        ...


class ProvisionedWorkers(Protocol):
    """The worker's provisioned concurrency (on AWS: the worker alias's provisioned concurrency config)."""

    def provisioned(self) -> int:
        """The workers requested now (0 when none are provisioned), whether or not all are allocated yet."""
        ...

    def provision(self, workers: int) -> None:
        """Request exactly ``workers`` provisioned workers; 0 removes the provisioning. Raises when the
        platform refuses (e.g. over the account's unreserved concurrency); the caller asks again later."""
        ...


class ProvisionedEventPollers(Protocol):
    """The worker's event source in provisioned mode (on AWS: the SQS event source mapping's
    ``ProvisionedPollerConfig``). Standard mode is 0 pollers: the event source starts a spike with 5
    concurrent batches and adds up to 300 a minute, capped by its MaximumConcurrency. In provisioned mode at
    least ``minimum`` event pollers are kept (each runs up to 10 concurrent batches), and the event source
    adds up to 1,000 concurrent batches a minute.

    AWS refuses MaximumConcurrency together with provisioned mode, so an implementation removes it when it
    switches on and puts the standard mode's cap back when it switches off."""

    def minimum_pollers(self) -> int:
        """The minimum pollers requested now; 0 in standard mode (whether or not the pollers are up yet:
        AWS does not say how long that takes)."""
        ...

    def provision_pollers(self, minimum: int) -> None:
        """Provisioned mode with at least ``minimum`` pollers (2 or more), or standard mode for 0. Raises when
        the platform refuses; the caller asks again at its next look."""
        ...


# AWS's limit on a table's switches from provisioned to on demand ("Considerations when switching capacity
# modes in DynamoDB"), which every ``TableCapacityModes`` enforces and the switcher plans around.
SWITCHES_TO_ON_DEMAND_PER_DAY = 4
ROLLING_DAY = timedelta(hours=24)


class TableCapacityModes(Protocol):
    """The capacity mode of the installation's tables (jobs, runs, control, and their indexes), switched
    together: ``provisioned`` (capacity units an hour, scaled by auto scaling) or ``on_demand`` (every
    request billed). AWS's limits, which an implementation enforces whatever the platform under it checks
    (DynamoDB Local checks none of them): a table switches from provisioned to on demand at most four
    times in a rolling 24 hours, and back at any time; a switch takes minutes, during which the table keeps
    the throughput it had. Switching back puts each table and index at the capacity it had before it left."""

    def mode(self) -> str:
        """``provisioned`` or ``on_demand``: what the tables are now (or are switching to)."""
        ...

    def switches_to_on_demand(self, since: datetime) -> list[datetime]:
        """When the tables were switched to on demand since ``since``, oldest first."""
        ...

    def switch_to_on_demand(self, now: datetime) -> None:
        """Every table on demand, its provisioned capacities kept for the way back. Raises
        ``SwitchLimitReached`` (nothing switched) when four switches to on demand lie within the 24 hours
        before ``now``; raises when the platform refuses (the caller looks again)."""
        ...

    def switch_to_provisioned(self) -> None:
        """Every table back in provisioned mode at the capacity it had before it was switched to on demand.
        Raises when the platform refuses."""
        ...


class SwitchLimitReached(Exception):
    """Four switches to on demand already lie within the rolling 24 hours (AWS's limit a table)."""


@dataclass(frozen=True)
class Alert:
    kind: str  # "run_dead" | "run_failed" | "missed" | "recovered" (``duetime.execution.deadlines``)
    team: str
    job_id: str
    run_id: str
    attempt: int
    detail: str
    at: datetime


class AlertSink(Protocol):
    def publish(self, alert: Alert) -> None: ...


@dataclass(frozen=True)
class TargetRequest:
    url: str
    method: str
    headers: dict[str, str]
    body: bytes | None
    timeout_seconds: float


@dataclass(frozen=True)
class TargetResponse:
    status_code: int | None  # None: no HTTP answer (timeout, connection error, refused target)
    body: str
    error: str | None
    duration_ms: int
    permanent: bool = False  # the call was not made and never will be (e.g. the target was refused)


class TargetCaller(Protocol):
    def call(self, request: TargetRequest) -> TargetResponse:
        """Make the request; never raises for network trouble (it is reported in the response)."""
        ...


@dataclass(frozen=True)
class AwsRole:
    """The IAM role a team's AWS targets are called under, and how it is assumed."""

    role_arn: str
    external_id: str  # duetime's, for the team (``Team.aws_external_id``): the confused-deputy guard
    session_name: str  # ``duetime-<team id>``: CloudTrail in the team's account names the team
    team_id: str  # the session's ``duetime:team`` tag (``aws_targets.team_tag``), for CloudTrail and policies


@dataclass(frozen=True)
class AwsTargetCall:
    target: AwsTarget
    envelope: RunEnvelope
    role: AwsRole | None  # None: the worker's own credentials (allowed on a local stack only)
    timeout_seconds: float


class RoleTrustUnknown(Exception):
    """STS gave no verdict on a role (throttled, unreachable, or duetime's own credentials were refused):
    nothing is known about its trust policy, so a registration waits for another try."""


class RoleTrustProbe(Protocol):
    def admits_a_wrong_external_id(self, role: AwsRole) -> bool:
        """Ask STS whether ``role``'s trust policy lets duetime in with an external id that is not the
        team's: AssumeRole as the worker would call it for ``role.team_id`` (its principal, session name and
        team tag) but with ``role.external_id``, which the caller makes a fresh random id that is no team's.
        True: STS gave credentials (dropped unused), so the trust policy does not require the external id.
        False: STS refused with AccessDenied, as it refuses a role that requires the team's id (or does not
        trust duetime at all). Raises ``RoleTrustUnknown`` for any other outcome; writes nothing."""
        ...


class AwsTargetCaller(Protocol):
    def call(self, call: AwsTargetCall) -> TargetResponse:
        """Make the call once, within ``call.timeout_seconds``, with no retry inside it (duetime's retry
        policy decides what happens next); never raises. The answer is told as HTTP would tell it, so that
        one judge (``duetime.execution.outcomes.judge``) rules every target: 200 done (the body an excerpt of
        the service's answer: a message or event id, an execution ARN, a function's result); 429 throttled;
        the service's own 5xx; 502 a Lambda function error; the service's 4xx for a request it refuses; no
        status for a timeout or a connection error; ``permanent`` for a call that cannot be made (no role
        where one is required). Assuming the role (STS) is part of the call: its refusals are told the same
        way (AccessDenied: 403), under the error ``assume role: <code>: <message>``."""
        ...


class WaitingRuns(Protocol):
    """What the reconciler (``duetime.scheduling.reconcile``) reads of the runs: claimed, never started."""

    def oldest_queued_fire(self, partition: int, limit: int) -> datetime | None:
        """The earliest fire time among the runs of ``partition`` still ``queued`` (claimed, no worker started
        them), found from the reap index's first ``limit`` entries (its earliest checks; a waiting run's check
        comes with its queue deadline, so the longest-waiting runs come first) and the runs they cover; None
        when none of them is queued. Reads only, eventually consistent; no Scan."""
        ...


@dataclass(frozen=True)
class ReconcilerReport:
    """One reconciler tick's figures (metric name -> value), and when it was made."""

    at: datetime
    values: Mapping[str, float]


class ReconcilerRecord(Protocol):
    """The reconciler's last reports, kept where an operator without CloudWatch (``duetime local``) reads
    them: ``duetime system alarms --local`` evaluates the alarms over them."""

    def record_reconciliation(self, report: ReconcilerReport) -> None:
        """Keep ``report`` (unconditional: one per tick; a report at the same instant replaces the other)."""
        ...

    def recent_reconciliations(self, limit: int) -> list[ReconcilerReport]:
        """The ``limit`` latest reports kept, newest first (reports older than a day may be forgotten)."""
        ...
