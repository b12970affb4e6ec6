"""Instants as the DynamoDB store writes them, and the one lock a twin's tables share.

DynamoDB holds run, job and slot instants as ``iso_z`` strings (whole seconds) and compares them as
strings, so ``now`` in a condition counts only to the second too; poller lease instants are kept to the
millisecond. The twin stores and compares the same truncated values.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence
from datetime import datetime

from duetime.domain.models import Run
from duetime.domain.timeutil import whole_seconds


def to_second(instant: datetime) -> datetime:
    """``instant`` as the store keeps it: UTC, whole seconds."""
    return whole_seconds(instant)


def to_millisecond(instant: datetime) -> datetime:
    """A poller lease instant as the store keeps it: UTC, to the millisecond (truncated)."""
    utc = whole_seconds(instant)
    return utc.replace(microsecond=instant.microsecond // 1000 * 1000)


def maybe_second(instant: datetime | None) -> datetime | None:
    return None if instant is None else to_second(instant)


def distinct(keys: Sequence[Hashable], what: str) -> None:
    """A batch of writes names each item once: DynamoDB refuses a batch of statements with one key twice
    (``ValidationException``, "Provided list of item keys contains duplicates"), and so does the twin,
    where the DynamoDB store sends such a batch (heartbeats, results, slot extensions and releases)."""
    if len(set(keys)) != len(keys):
        raise ValueError(f"a batch names the same {what} twice: {list(keys)}")


class Tables:
    """What every part of the twin shares: one lock, held by every read and write (so each is atomic, like
    one conditional write), and the runs table with its reap index (claims create runs, ``MemoryRuns``
    moves them). ``MemoryStore`` makes them; each mixin declares the tables it adds."""

    lock: threading.RLock
    # False: models go in and come out as stored, not deep-copied (``MemoryStore``'s ``copies``).
    copies: bool
    _runs: dict[str, Run]  # run id -> the run as stored
    _reap_at: dict[str, datetime]  # the reap index: run id -> reap_at, for runs that need minding

    def _read_runs(self, run_ids: Sequence[str]) -> dict[str, Run]:
        """Copies of the stored runs of ``run_ids``, by id (a consistent read: under the lock)."""
        with self.lock:
            return {i: self._runs[i].model_copy(deep=True) for i in dict.fromkeys(run_ids) if i in self._runs}
