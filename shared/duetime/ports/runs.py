"""The run store: leases, results, the reaper's work, deadlines and what the reconciler reads of runs.

A part of ``duetime.ports``: every port, its docstrings the contract every adapter keeps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from duetime.domain.models import Run, RunResult, RunStatus
from duetime.ports.jobs import JobStore


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


class JobAndRunStore(JobStore, RunStore, DeadlineStore, Protocol):
    """A store of jobs, runs and their deadlines (every store here is): what the API's service reads and
    writes besides the catalog."""


class WaitingRuns(Protocol):
    """What the reconciler (``duetime.scheduling.reconcile``) reads of the runs: claimed, never started."""

    def oldest_queued_fire(self, partition: int, limit: int) -> datetime | None:
        """The earliest fire time among the runs of ``partition`` still ``queued`` (claimed, no worker started
        them), found from the reap index's first ``limit`` entries (its earliest checks; a waiting run's check
        comes with its queue deadline, so the longest-waiting runs come first) and the runs they cover; None
        when none of them is queued. Reads only, eventually consistent; no Scan."""
        ...
