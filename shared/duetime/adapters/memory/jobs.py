"""The twin's jobs table with its due index, the claim, and the partitions' low-water marks (``JobStore``).

A job is held as the DynamoDB store holds its item: instants to the whole second, and while it is scheduled
and not paused a due-index entry ``(due bucket, due key)`` with the same keys as the ``due`` GSI
(``codec.due_bucket``, ``codec.due_key``). A claim is one atomic step per job under the lock: the
schedule moves only if the job's version is the one read (JOB_UNCHANGED_SINCE_READ), and each run row is
created only if it is new (RUN_IS_NEW); a row already there is left as it is and the schedule still moves.
Claims are not packed into transactions by size: ``transactions`` counts one per claimed batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from duetime.adapters.dynamodb.codec import due_bucket, due_key
from duetime.adapters.memory.stored import Tables, maybe_second, to_second
from duetime.claim_plan import Claim
from duetime.ids import partition_of
from duetime.models import Job, JobState, Run
from duetime.ports import ClaimOutcome
from duetime.timeutil import iso_z, minute_bucket


@dataclass(frozen=True)
class MemoryDueRow:
    """A due row (``duetime.ports.DueRow``): the fire time, job id and version, and the job as read."""

    fire_at: int
    job_id: str
    version: int
    _job: Job

    def job(self) -> Job:
        return self._job.model_copy(deep=True)


@dataclass(frozen=True)
class _JobRow:
    job: Job
    bucket: str | None  # the due index's partition key, "<partition:02d>#<minute>"; None: not due
    key: str | None  # the due index's sort key, "<fire time>#<job id>"


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
            ),
        },
        deep=True,
    )


def _row(job: Job, written_at: datetime) -> _JobRow:
    fire_at = job.state.next_fire_at
    if fire_at is None or job.paused:
        return _JobRow(job, None, None)
    return _JobRow(job, due_bucket(job.id, fire_at, written_at), due_key(job.id, fire_at))


class MemoryJobs(Tables):
    """``JobStore`` in memory (mixed into ``MemoryStore``)."""

    _jobs: dict[str, _JobRow]
    _marks: dict[int, str]  # partition -> low-water mark (a minute bucket)

    def put_job(self, job: Job, now: datetime) -> None:
        """Write ``job`` as it is (what the API's catalog does when it creates or edits one), first giving
        its partition a low-water mark at ``now``'s minute if it has none, as job writes do."""
        self.ensure_low_water_mark(partition_of(job.id), minute_bucket(now))
        with self.lock:
            self._jobs[job.id] = _row(stored_job(job), now)

    def get_job(self, job_id: str) -> Job | None:
        with self.lock:
            row = self._jobs.get(job_id)
            return row.job.model_copy(deep=True) if row else None

    def due_jobs(
        self, partition: int, bucket: str, until: datetime, limit: int, after: str | None = None
    ) -> list[Job]:
        return [row.job.model_copy(deep=True) for row in self._due(partition, bucket, until, limit, after)]

    def due_rows(
        self, partition: int, bucket: str, until: datetime, limit: int, after: str | None = None
    ) -> list[MemoryDueRow]:
        rows = []
        for row in self._due(partition, bucket, until, limit, after):
            fire_at = row.job.state.next_fire_at
            assert fire_at is not None  # only scheduled jobs are in the due index
            rows.append(MemoryDueRow(int(fire_at.timestamp()), row.job.id, row.job.state.version, row.job))
        return rows

    def count_due(self, partition: int, bucket: str) -> int:
        wanted = f"{partition:02d}#{bucket}"
        with self.lock:
            return sum(1 for row in self._jobs.values() if row.bucket == wanted and row.key is not None)

    def _due(
        self, partition: int, bucket: str, until: datetime, limit: int, after: str | None
    ) -> list[_JobRow]:
        """The due index after the key ``after`` up to ``until`` (to the second), in due key order."""
        wanted = f"{partition:02d}#{bucket}"
        low = f"{after}\x00" if after else "0"
        high = f"{iso_z(until)}#~"
        with self.lock:
            rows = [
                row
                for row in self._jobs.values()
                if row.bucket == wanted and row.key is not None and low <= row.key <= high
            ]
        rows.sort(key=lambda row: row.key or "")
        return rows[:limit]

    def claim(self, claims: Sequence[Claim], now: datetime) -> ClaimOutcome:
        created: list[Run] = []
        committed = lost = existing = 0
        with self.lock:
            for claim in claims:
                job = claim.plan.job
                row = self._jobs.get(job.id)
                if row is None or row.job.state.version != job.state.version:
                    lost += 1  # JOB_UNCHANGED_SINCE_READ
                    continue
                committed += 1
                for run in claim.runs:
                    if run.run_id in self._runs:
                        existing += 1  # RUN_IS_NEW failed: the row stays as it is
                        continue
                    self._create_run(run)
                    created.append(run)
                moved = row.job.model_copy(update={"state": claim.plan.next_state, "updated_at": now})
                self._jobs[job.id] = _row(stored_job(moved), now)
        return ClaimOutcome(
            runs=created,
            claimed_jobs=committed,
            lost_races=lost,
            transactions=1 if claims else 0,
            existing_runs=existing,
        )

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
            deep=True,
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

    def advance_low_water_mark(self, partition: int, bucket: str) -> None:
        with self.lock:
            if partition not in self._marks or self._marks[partition] < bucket:  # WATERMARK_BEHIND
                self._marks[partition] = bucket
