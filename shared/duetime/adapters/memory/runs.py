"""The twin's runs: leases, results and the reaper's writes (``RunStore``), each under its named condition.

Every write is one step under the lock that checks the condition ``store.py`` names and applies the same
changes as its UpdateItem (attributes set and removed, the reap index entry moved or dropped). Instants are
stored to the whole second and ``now`` is compared to the second, as DynamoDB compares ``iso_z`` strings:
in a lease's last second it is neither held (LEASE_HELD needs ``lease > now``) nor expired
(LEASE_EXPIRED needs ``lease < now``). A condition on an attribute the run lacks is false, as in DynamoDB.
The batch forms are the single forms, run by run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from duetime.adapters.memory.stored import Tables, distinct, to_second
from duetime.domain.models import Run, RunResult, RunStatus
from duetime.ports import ReapCandidate, ResultWrite

_WAITING = (RunStatus.QUEUED, RunStatus.RETRY_WAIT)
_KEEP = object()  # the reap index entry stays as it is


def _before(stored: datetime | None, now: datetime) -> bool:
    """``stored < now`` as DynamoDB compares the two strings (false when the attribute is missing)."""
    return stored is not None and stored < to_second(now)


def _after(stored: datetime | None, now: datetime) -> bool:
    return stored is not None and stored > to_second(now)


class MemoryRuns(Tables):
    """``RunStore`` in memory (mixed into ``MemoryStore``)."""

    def get_run(self, run_id: str) -> Run | None:
        with self.lock:
            run = self._runs.get(run_id)
            return run.model_copy(deep=True) if run and self.copies else run

    def _update(
        self, run_id: str, condition: Callable[[Run], bool], changes: dict[str, Any], reap_at: Any = _KEEP
    ) -> Run | None:
        """One conditional update of a run: the run as stored after it, or None (condition false or no run).
        ``reap_at``: the run's new reap index entry (None: out of the index)."""
        with self.lock:
            run = self._runs.get(run_id)
            if run is None or not condition(run):
                return None
            updated = run.model_copy(update=changes, deep=self.copies)
            self._runs[run_id] = updated
            if reap_at is None:
                self._reap_at.pop(run_id, None)
            elif reap_at is not _KEEP:
                self._reap_at[run_id] = reap_at
            return updated.model_copy(deep=True) if self.copies else updated

    def all_runs(self) -> dict[str, Run]:
        """Every run as stored, by run id, in the order created (a Scan, for tests and the simulation to
        count; copies unless the store was made with ``copies=False``)."""
        with self.lock:
            if not self.copies:
                return dict(self._runs)
            return {run_id: run.model_copy(deep=True) for run_id, run in self._runs.items()}

    def get_runs(self, run_ids: Sequence[str]) -> dict[str, Run]:
        return self._read_runs(run_ids)

    def cancel_run(self, run_id: str, now: datetime) -> Run | None:
        def cancellable(run: Run) -> bool:  # RUN_CANCELLABLE
            return not run.status.terminal

        changes = {
            "status": RunStatus.CANCELLED,
            "updated_at": to_second(now),
            "finished_at": to_second(now),
            "lease_expires_at": None,
            "retry_at": None,
            "queue_deadline": None,
        }
        return self._update(run_id, cancellable, changes, None)

    # --- a worker's writes ----------------------------------------------------------------------------------

    def acquire_lease(
        self, run_id: str, attempt: int, owner: str, now: datetime, lease_until: datetime
    ) -> Run | None:
        lease = to_second(lease_until)

        def waiting(run: Run) -> bool:  # RUN_WAITING_FOR_ATTEMPT
            return run.status in _WAITING and run.attempt == attempt

        with self.lock:
            run = self._runs.get(run_id)
            started = (run.started_at if run else None) or to_second(now)
            changes = {
                "status": RunStatus.RUNNING,
                "owner": owner,
                "lease_expires_at": lease,
                "started_at": started,
                "updated_at": to_second(now),
                "queue_deadline": None,
                "retry_at": None,
            }
            return self._update(run_id, waiting, changes, lease)

    def extend_lease(
        self, run_id: str, attempt: int, owner: str, now: datetime, lease_until: datetime
    ) -> bool:
        def held(run: Run) -> bool:  # LEASE_HELD
            return _owned(run, owner, attempt) and _after(run.lease_expires_at, now)

        lease = to_second(lease_until)
        return self._update(run_id, held, {"lease_expires_at": lease}, lease) is not None

    def return_to_queue(
        self, run_id: str, attempt: int, owner: str, now: datetime, queue_deadline: datetime
    ) -> bool:
        deadline = to_second(queue_deadline)
        changes = {
            "status": RunStatus.QUEUED,
            "queue_deadline": deadline,
            "updated_at": to_second(now),
            "owner": None,
            "lease_expires_at": None,
        }
        return self._update(run_id, lambda run: _owned(run, owner, attempt), changes, deadline) is not None

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
        changes: dict[str, Any] = {"status": status, "result": result, "updated_at": to_second(now)}
        if status is RunStatus.RETRY_WAIT:
            assert retry_at is not None and queue_deadline is not None
            reap_at: Any = to_second(queue_deadline)
            changes.update(
                attempt=run.attempt + 1,
                retry_at=to_second(retry_at),
                queue_deadline=reap_at,
                owner=None,
                lease_expires_at=None,
            )
        else:  # terminal: the owner stays on the row; the run leaves the reap index
            reap_at = None
            changes.update(finished_at=to_second(now), lease_expires_at=None)
        recorded = self._update(
            run.run_id, lambda stored: _owned(stored, owner, run.attempt), changes, reap_at
        )
        return recorded is not None

    # --- the same, many runs a call ----------------------------------------------------------------------

    def acquire_leases(
        self,
        attempts: Sequence[tuple[str, int]],
        owner: str,
        now: datetime,
        lease_until: datetime,
        carried: Mapping[str, Run] | None = None,
    ) -> dict[str, Run]:
        """Each lease as ``acquire_lease`` takes it: the twin reads nothing, so ``carried`` spares nothing."""
        leased = {
            run_id: self.acquire_lease(run_id, attempt, owner, now, lease_until)
            for run_id, attempt in attempts
        }
        return {run_id: run for run_id, run in leased.items() if run is not None}

    def extend_leases(
        self, attempts: Sequence[tuple[str, int]], owner: str, now: datetime, lease_until: datetime
    ) -> set[str]:
        distinct([run_id for run_id, _ in attempts], "run")
        return {
            run_id
            for run_id, attempt in attempts
            if self.extend_lease(run_id, attempt, owner, now, lease_until)
        }

    def record_results(self, results: Sequence[ResultWrite], owner: str, now: datetime) -> set[str]:
        distinct([write.run.run_id for write in results], "run")
        return {
            write.run.run_id
            for write in results
            if self.record_result(
                write.run, owner, write.status, write.result, now, write.retry_at, write.queue_deadline
            )
        }

    # --- the reaper --------------------------------------------------------------------------------------

    def runs_needing_attention(self, partition: int, now: datetime, limit: int) -> list[ReapCandidate]:
        with self.lock:
            due = sorted(
                (reap_at, run_id)
                for run_id, reap_at in self._reap_at.items()
                if self._runs[run_id].partition == partition and _before(reap_at, now)
            )
            runs = [(self._runs[run_id], reap_at) for reap_at, run_id in due[:limit]]
        return [
            ReapCandidate(run.run_id, run.status, run.attempt, run.max_attempts, reap_at)
            for run, reap_at in runs
        ]

    def has_reap_work_before(self, partition: int, until: datetime) -> bool:
        with self.lock:
            return any(
                self._runs[run_id].partition == partition and _before(reap_at, until)
                for run_id, reap_at in self._reap_at.items()
            )

    def requeue_expired_lease(
        self, candidate: ReapCandidate, now: datetime, queue_deadline: datetime
    ) -> Run | None:
        deadline = to_second(queue_deadline)
        changes = {
            "status": RunStatus.QUEUED,
            "attempt": candidate.attempt + 1,
            "queue_deadline": deadline,
            "updated_at": to_second(now),
            "owner": None,
            "lease_expires_at": None,
        }
        return self._update(candidate.run_id, _lease_expired(candidate, now), changes, deadline)

    def bury_expired_lease(self, candidate: ReapCandidate, now: datetime, result: RunResult) -> Run | None:
        changes = {
            "status": RunStatus.DEAD,
            "result": result,
            "updated_at": to_second(now),
            "finished_at": to_second(now),
            "owner": None,
            "lease_expires_at": None,
        }
        return self._update(candidate.run_id, _lease_expired(candidate, now), changes, None)

    def renew_queue_deadline(
        self, candidate: ReapCandidate, now: datetime, queue_deadline: datetime
    ) -> Run | None:
        deadline = to_second(queue_deadline)

        def wait_expired(run: Run) -> bool:  # WAIT_EXPIRED
            return (
                run.status is candidate.status
                and run.attempt == candidate.attempt
                and _before(self._reap_at.get(run.run_id), now)
            )

        changes = {"queue_deadline": deadline, "updated_at": to_second(now)}
        return self._update(candidate.run_id, wait_expired, changes, deadline)


def _owned(run: Run, owner: str, attempt: int) -> bool:
    """LEASE_OWNED: running, this owner, this attempt."""
    return run.status is RunStatus.RUNNING and run.owner == owner and run.attempt == attempt


def _lease_expired(candidate: ReapCandidate, now: datetime) -> Callable[[Run], bool]:
    """LEASE_EXPIRED: still running the candidate's attempt, its lease passed by the store's clock."""

    def expired(run: Run) -> bool:
        return (
            run.status is RunStatus.RUNNING
            and run.attempt == candidate.attempt
            and _before(run.lease_expires_at, now)
        )

    return expired
