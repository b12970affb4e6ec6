"""The domain side of the catalog (``duetime.ports.Catalog``): what its methods take, return and raise.

Pure: no adapter imports. ``adapters/dynamodb/catalog.py`` and ``adapters/memory/catalog.py`` both speak in
these, and the logic (``duetime.api.service``, ``duetime.api.team_admin``) catches these, never an adapter's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


class InvalidCursor(ValueError):
    """A listing's cursor that is not one this listing returned: not a cursor at all, or one of another
    listing (another team's jobs, another job's runs, another search). The API answers 400 naming
    ``cursor``."""


class QuotaExceeded(Exception):
    """A write would take the team past a quota: ``which`` is ``"jobs"`` (``max_jobs``) or ``"exact"``
    (``exact_quota``)."""

    def __init__(self, team_id: str, which: str) -> None:
        super().__init__(f"team {team_id}: {which} quota used up")
        self.team_id = team_id
        self.which = which


class KeyTaken(Exception):
    """A job write gives a job a key another job of the team has."""

    def __init__(self, team_id: str, key: str) -> None:
        super().__init__(f"team {team_id}: another job has key {key}")
        self.team_id = team_id
        self.key = key


class CalendarGone(Exception):
    """A job write names a calendar the team does not have (deleted meanwhile, or never created)."""

    def __init__(self, team_id: str, name: str) -> None:
        super().__init__(f"team {team_id} has no calendar {name}")
        self.team_id = team_id
        self.name = name


class IdempotencyMismatch(Exception):
    """The idempotency key was used before with a different request body."""


@dataclass(frozen=True)
class IdempotencyRecord:
    """A create request's ``Idempotency-Key``: the same key and body give back the same job."""

    team: str
    key: str
    request_hash: str
    job_id: str


@dataclass(frozen=True)
class Page:
    """One page of a listing, and the cursor of the next (None: the listing ended). A cursor is opaque text
    only the listing that returned it takes back; a page may hold fewer items than asked for while its
    cursor says more may follow."""

    items: list[Any]
    cursor: str | None


@dataclass(frozen=True)
class AuditEvent:
    """One administrative change: what was done to which team, when, by whom, what changed (no secrets)."""

    team_id: str
    # "create" | "update" | "rotate-token" | "issue-token" | "revoke-token" | "rotate-signing-secret" |
    # "disable" | "enable" | "set-aws-role" | "remove-aws-role" | "assign-external-id"
    action: str
    at: datetime
    actor: str
    detail: dict[str, Any] = field(default_factory=dict)
