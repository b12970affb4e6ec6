"""Identifiers and stable hashes.

Partitions and jitter offsets come from BLAKE2b of the job id, never Python's ``hash()`` (which is
salted per process): every poller, worker and API process agrees on them forever.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import datetime

from ulid import ULID

from duetime.domain.timeutil import iso_z, parse_iso_z

PARTITIONS = 64
DEFAULT_POLLER_GROUPS = 4  # the stack's default: 4 partition groups of 16, one poller each
RUN_ID_SEPARATOR = "@"
MANUAL_MARK = "~manual-"
# What follows the "@" of a run id: the nominal time, optionally with a manual run's suffix.
_OCCURRENCE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z(?:~manual-[0-9a-f]{10})?")


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
    """A scheduled run's id, ``<job id>@<nominal time, UTC, second precision, Z>``: its idempotency key.

    The part after ``@`` is the run's *occurrence*, its sort key among the job's runs."""
    return f"{job_id}{RUN_ID_SEPARATOR}{iso_z(nominal_at)}"


def make_manual_run_id(job_id: str, triggered_at: datetime, nonce: str | None = None) -> str:
    """A manual (triggered) run's id, ``<job id>@<trigger time Z>~manual-<10 hex digits>``.

    The suffix gives manual runs an id space of their own: a scheduled run's id ends in ``Z``, so the two
    can never be equal, whatever second a trigger lands in (a manual run that took a scheduled run's id
    would make every claim of that nominal time fail). Two triggers in one second differ by the nonce.
    The occurrence still starts with the time, so a job's runs sort by time either way."""
    return f"{job_id}{RUN_ID_SEPARATOR}{iso_z(triggered_at)}{MANUAL_MARK}{nonce or secrets.token_hex(5)}"


def split_run_id(run_id: str) -> tuple[str, str]:
    """``(job id, occurrence)`` of a scheduled or manual run id; ``ValueError`` on anything else."""
    job_id, sep, occurrence = run_id.partition(RUN_ID_SEPARATOR)
    if not sep or not job_id or not _OCCURRENCE.fullmatch(occurrence):
        raise ValueError(f"not a run id: {run_id!r}")
    parse_iso_z(occurrence[:20])  # a real instant, not just its shape
    return job_id, occurrence


def is_manual_run_id(run_id: str) -> bool:
    return MANUAL_MARK in run_id.partition(RUN_ID_SEPARATOR)[2]
