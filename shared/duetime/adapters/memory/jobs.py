"""The twin's jobs table with its due index, the claim, and the partitions' low-water marks (``JobStore``).

A job is held as the DynamoDB store holds its item: instants to the whole second, and while it is scheduled
and not paused a due-index entry ``(due bucket, due key)`` with the same keys as the ``due`` GSI
(``codec.due_bucket``, ``codec.due_key``). A claim is ordered steps, as on DynamoDB: the jobs' versions
are read (a claim of a job moved since writes nothing), each run row is created only if it is new
(RUN_IS_NEW; a row already there is left as it is), then the schedule moves only if the job's version is
still the one read (JOB_UNCHANGED_SINCE_READ), whether the rows were new or not.
``write_requests`` counts what DynamoStore's batches of 25 writes would take.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from duetime.adapters.memory.deadlines import MemoryDeadlines
from duetime.adapters.memory.due_index import DueIndexedJobs, JobRow, job_row
from duetime.adapters.memory.stored import maybe_second, to_second
from duetime.domain.claim_plan import Claim, sets_active_run
from duetime.domain.ids import partition_of
from duetime.domain.models import Job, JobState, Run
from duetime.domain.timeutil import iso_z, minute_bucket
from duetime.ports import ClaimOutcome, UnreadableRow
from duetime.ports.jobs import CLAIM_WRITES_PER_REQUEST as BATCH


@dataclass(frozen=True)
class MemoryDueRow:
    """A due row (``duetime.ports.DueRow``): the fire time, job id and version, and the job as read."""

    fire_at: int
    job_id: str
    version: int
    _job: Job
    copied: bool = True  # False: ``job()`` is the stored model itself (a ``copies=False`` store's)
    unreadable: str | None = None  # set: the payload cannot be read, ``job()`` raises (a corrupt spec)

    def job(self) -> Job:
        if self.unreadable is not None:
            raise ValueError(self.unreadable)
        return self._job.model_copy(deep=True) if self.copied else self._job


def stored_job(job: Job) -> Job:
    """``job`` with its instants to the whole second, as its item holds them."""
    state = job.state
    return job.model_copy(
        update={
            "created_at": to_second(job.created_at),
            "updated_at": to_second(job.updated_at),
            "state": JobState(
                next_nominal_at=maybe_second(state.next_nominal_at),
                next_fire_at=maybe_second(state.next_fire_at),
                last_scheduled_at=maybe_second(state.last_scheduled_at),
                version=state.version,
                active_run=state.active_run,
            ),
        },
        deep=True,
    )


class MemoryJobs(MemoryDeadlines):
    """``JobStore`` in memory (mixed into ``MemoryStore``)."""

    _jobs: DueIndexedJobs
    _marks: dict[int, str]  # partition -> low-water mark (a minute bucket)

    def put_job(self, job: Job, now: datetime) -> None:
        """Write ``job`` as it is (what the API's catalog does when it creates or edits one), first giving
        its partition a low-water mark at ``now``'s minute if it has none, as job writes do."""
        self.ensure_low_water_mark(partition_of(job.id), minute_bucket(now))
        with self.lock:
            self._jobs[job.id] = job_row(stored_job(job), now)

    def put_stored_jobs(self, jobs: Sequence[Job], now: datetime) -> None:
        """Write ``jobs`` as they are, neither copied nor rounded to the second: the bulk set-up of a large
        table (the midnight simulation's) from jobs already as stored, which the caller never changes
        afterwards. Unlike ``put_job``, gives no partition a low-water mark."""
        with self.lock:
            for job in jobs:
                self._jobs[job.id] = job_row(job, now)

    def get_job(self, job_id: str) -> Job | None:
        with self.lock:
            row = self._jobs.get(job_id)
            return row.job.model_copy(deep=True) if row else None

    def put_unreadable_job(self, job: Job, now: datetime, error: str) -> None:
        """Write ``job``'s row as one whose payload cannot be read (``error``): the twin of a corrupt item
        (invalid JSON, a field missing), in the due index under ``job``'s keys."""
        with self.lock:
            self._jobs[job.id] = job_row(stored_job(job), now, unreadable=error)

    def due_jobs(
        self,
        partition: int,
        bucket: str,
        until: datetime,
        limit: int,
        after: str | None = None,
        unreadable: list[UnreadableRow] | None = None,
    ) -> list[Job]:
        jobs = []
        for row in self._due(partition, bucket, until, limit, after):
            if row.unreadable is None:
                jobs.append(row.job.model_copy(deep=True) if self.copies else row.job)
            elif unreadable is not None:
                key = row.key or "?"
                unreadable.append(UnreadableRow(row.job.id, partition, bucket, key, row.unreadable))
        return jobs

    def due_rows(
        self, partition: int, bucket: str, until: datetime, limit: int, after: str | None = None
    ) -> list[MemoryDueRow]:
        rows = []
        for row in self._due(partition, bucket, until, limit, after):
            fire_at = row.job.state.next_fire_at
            assert fire_at is not None  # only scheduled jobs are in the due index
            fire = int(fire_at.timestamp())
            version = row.job.state.version
            rows.append(MemoryDueRow(fire, row.job.id, version, row.job, self.copies, row.unreadable))
        return rows

    def count_due(self, partition: int, bucket: str) -> int:
        with self.lock:
            return self._jobs.count(f"{partition:02d}#{bucket}")

    def _due(
        self, partition: int, bucket: str, until: datetime, limit: int, after: str | None
    ) -> list[JobRow]:
        """The due index after the key ``after`` up to ``until`` (to the second), in due key order."""
        low = f"{after}\x00" if after else "0"
        high = f"{iso_z(until)}#~"
        with self.lock:
            return self._jobs.rows_between(f"{partition:02d}#{bucket}", low, high, limit)

    def claim(self, claims: Sequence[Claim], now: datetime) -> ClaimOutcome:
        """``ports.JobStore.claim``: the jobs' versions read, then every current claim's run rows
        (RUN_IS_NEW), then its schedule move (JOB_UNCHANGED_SINCE_READ); each under the lock on its own, as
        DynamoDB makes each write of a batch on its own. A claim that sets the job's active run
        (``claim_plan.sets_active_run``) checks, writes its rows and moves under one hold of the lock, as
        ``DynamoStore`` makes them one transaction."""
        created: list[Run] = []
        in_the_way: list[tuple[int, Run]] = []
        with self.lock:  # the versions read first: a claim of a job moved since it was read writes nothing
            stored = {claim.plan.job.id: self._jobs.get(claim.plan.job.id) for claim in claims}
        fresh = [
            claim
            for claim in claims
            if (row := stored[claim.plan.job.id]) is not None
            and row.job.state.version == claim.plan.job.state.version
        ]
        guarded_moves: dict[int, bool] = {}  # a guarded claim's rows and move: at once, or neither
        with self.lock:
            for index, claim in enumerate(fresh):
                guarded = sets_active_run(claim)
                if guarded and not self._unchanged(claim):
                    guarded_moves[index] = False
                    continue
                for run in claim.runs:
                    if run.run_id in self._runs:
                        in_the_way.append((index, run))  # RUN_IS_NEW failed: the row stays as it is
                    else:
                        self._create_run(run)
                        created.append(run)
                if guarded:  # under the same hold of the lock as its version check and its rows
                    self._write_watches(claim.runs)
                    guarded_moves[index] = self._move_schedule(claim, now)
            # The other claims' watches, after their rows and before their moves (``DeadlineStore``).
            unguarded = [run for claim in fresh if not sets_active_run(claim) for run in claim.runs]
            watches = self._write_watches(unguarded)
        moved = [
            guarded_moves[index] if index in guarded_moves else self._move_schedule(claim, now)
            for index, claim in enumerate(fresh)
        ]
        skipped: list[Run] = []
        with self.lock:  # after the moves, only for claims whose move landed (as ``DynamoStore.claim``)
            for claim, landed in zip(fresh, moved, strict=True):
                for run in claim.skipped if landed else ():
                    if run.run_id not in self._runs:
                        self._create_run(run)
                        skipped.append(run)
        runs = sum(len(claim.runs) for claim in fresh)
        skip_writes = sum(len(claim.skipped) for claim, landed in zip(fresh, moved, strict=True) if landed)
        return ClaimOutcome(
            runs=created,
            claimed_jobs=sum(moved),
            lost_races=len(claims) - sum(moved),
            write_requests=math.ceil(runs / BATCH)
            + math.ceil(watches / BATCH)
            + math.ceil(len(fresh) / BATCH)
            + math.ceil(skip_writes / BATCH),
            existing_runs=len(in_the_way),
            requeued=[run for index, run in in_the_way if moved[index]],
            skipped=skipped,
        )

    def active_runs(self, run_ids: Sequence[str]) -> dict[str, Run]:
        return self._read_runs(run_ids)

    def _unchanged(self, claim: Claim) -> bool:
        """JOB_UNCHANGED_SINCE_READ, read under the lock."""
        row = self._jobs.get(claim.plan.job.id)
        return row is not None and row.job.state.version == claim.plan.job.state.version

    def _move_schedule(self, claim: Claim, now: datetime) -> bool:
        """JOB_UNCHANGED_SINCE_READ: the job moves only from the version its claim read (a deleted job
        fails too)."""
        job = claim.plan.job
        with self.lock:
            row = self._jobs.get(job.id)
            if row is None or row.job.state.version != job.state.version:
                return False
            moved = row.job.model_copy(update={"state": claim.plan.next_state, "updated_at": now})
            self._jobs[job.id] = job_row(stored_job(moved), now)
            return True

    def _create_run(self, run: Run) -> None:
        """A new queued run row, with its instants to the second; in the reap index at its queue deadline."""
        stored = run.model_copy(
            update={
                name: maybe_second(getattr(run, name))
                for name in (
                    "nominal_at",
                    "fire_at",
                    "lease_expires_at",
                    "queue_deadline",
                    "retry_at",
                    "created_at",
                    "started_at",
                    "finished_at",
                    "updated_at",
                )
            },
            deep=self.copies,
        )
        self._runs[run.run_id] = stored
        if stored.queue_deadline is not None:
            self._reap_at[run.run_id] = stored.queue_deadline

    # --- low-water marks ----------------------------------------------------------------------------------

    def low_water_marks(self, partitions: Sequence[int]) -> dict[int, str]:
        with self.lock:
            return {p: self._marks[p] for p in partitions if p in self._marks}

    def ensure_low_water_mark(self, partition: int, bucket: str) -> None:
        with self.lock:
            self._marks.setdefault(partition, bucket)  # WATERMARK_MISSING

    def advance_low_water_marks(
        self, marks: Mapping[int, str], read: Mapping[int, str] | None = None
    ) -> set[int]:
        read = read or {}
        refused = set()
        with self.lock:
            for partition, bucket in marks.items():
                stored = self._marks.get(partition)
                lowered_since_read = stored is not None and stored < read.get(partition, stored)
                if stored is not None and stored < bucket and not lowered_since_read:
                    # WATERMARK_BEHIND (WATERMARK_BEHIND_AS_READ for a partition in ``read``)
                    self._marks[partition] = bucket
                else:
                    refused.add(partition)
        return refused

    def due_rows_by_bucket(self) -> dict[tuple[int, str], int]:
        with self.lock:
            return self._jobs.bucket_counts()

    def lower_low_water_marks(self, marks: Mapping[int, str]) -> dict[int, str]:
        written = {}
        with self.lock:
            for partition, bucket in marks.items():
                stored = self._marks.get(partition)
                if stored is None or stored > bucket:  # WATERMARK_MISSING, WATERMARK_AHEAD
                    self._marks[partition] = written[partition] = bucket
        return written
