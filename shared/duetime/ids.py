"""Identifiers and stable hashes.

Partitions and jitter offsets come from BLAKE2b of the job id, never Python's ``hash()`` (which is
salted per process): every poller, worker and API process agrees on them forever.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from ulid import ULID

from duetime.timeutil import iso_z, parse_iso_z

PARTITIONS = 64
RUN_ID_SEPARATOR = "@"


def new_job_id() -> str:
    """A new ULID (26 characters, Crockford base32, time ordered)."""
    return str(ULID())


def _digest(job_id: str) -> bytes:
    return hashlib.blake2b(job_id.encode(), digest_size=16).digest()


def partition_of(job_id: str, partitions: int = PARTITIONS) -> int:
    """The due-index partition (0..partitions-1) a job lives in; fixed for the job's life."""
    return int.from_bytes(_digest(job_id)[:8], "big") % partitions


def jitter_offset_seconds(job_id: str, window_seconds: int) -> int:
    """A stable offset in [0, window_seconds) for a job, independent of its partition."""
    if window_seconds <= 0:
        return 0
    return int.from_bytes(_digest(job_id)[8:], "big") % window_seconds


def make_run_id(job_id: str, nominal_at: datetime) -> str:
    """``<job id>@<nominal time, UTC, second precision, Z>``: the run's idempotency key."""
    return f"{job_id}{RUN_ID_SEPARATOR}{iso_z(nominal_at)}"


def split_run_id(run_id: str) -> tuple[str, datetime]:
    """Inverse of ``make_run_id``; raises ``ValueError`` on anything else."""
    job_id, sep, stamp = run_id.partition(RUN_ID_SEPARATOR)
    if not sep or not job_id:
        raise ValueError(f"not a run id: {run_id!r}")
    return job_id, parse_iso_z(stamp)
