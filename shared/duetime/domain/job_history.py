"""A job's change history (``GET /v1/jobs/{id}/history``): what changed, when, and by which token, kept 90
days. Each change is written in the same transaction as the job write it describes
(``adapters/dynamodb/job_index.py``), so the history never shows a change that did not happen, nor misses
one that did. A token is named by its id (``token_id``), never by the token."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from duetime.domain.models import Job, JobSpec

HISTORY_KEPT = timedelta(days=90)
MAX_VALUE_CHARS = 512  # a longer value (a 64 KiB body) is recorded by its size, not its text
ACTIONS = ("create", "update", "pause", "resume", "delete")


def token_id(token_hash: str) -> str:
    """A token's public name: the start of its SHA-256 (``tok_1a2b3c4d5e6f``). It identifies the token among
    a team's, and tells nothing that would let anyone use it."""
    return f"tok_{token_hash[:12]}"


@dataclass(frozen=True)
class JobChange:
    job_id: str
    team: str
    at: datetime
    action: str  # one of ACTIONS
    actor: str  # the token's id (``token_id``), or who else made it (``cli:<user>@<host>``)
    fields: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {"from": ..., "to": ...}


def shown_spec(job: Job) -> dict[str, Any]:
    """The job's spec as answers show it (header values and URL secrets redacted), as JSON values."""
    return job.redacted().model_dump(mode="json", include=set(JobSpec.model_fields))


def _recorded(value: Any) -> Any:
    text = json.dumps(value, sort_keys=True)
    return value if len(text) <= MAX_VALUE_CHARS else f"<{len(text.encode())} bytes of JSON>"


HIDDEN_CHANGE = {"from": "<secret values hidden>", "to": "<a secret value changed>"}


def changed_fields(before: Job, after: Job) -> dict[str, dict[str, Any]]:
    """The top-level spec fields whose values differ, each ``{"from": old, "to": new}``; a field whose only
    change is a secret's (a header's value, a URL's password or token) says so without showing either value
    (``HIDDEN_CHANGE``)."""
    old, new = shown_spec(before), shown_spec(after)
    fields: dict[str, dict[str, Any]] = {}
    for name in JobSpec.model_fields:
        if old.get(name) != new.get(name):
            fields[name] = {"from": _recorded(old.get(name)), "to": _recorded(new.get(name))}
        elif getattr(before, name) != getattr(after, name):
            fields[name] = dict(HIDDEN_CHANGE)
    return fields


def change(before: Job | None, after: Job | None, at: datetime, actor: str) -> JobChange:
    """The history entry of a job write: ``before`` None is a create, ``after`` None a delete; an update that
    changes nothing but ``paused`` is a pause or a resume."""
    job = after or before
    assert job is not None
    if before is None:
        return JobChange(job.id, job.team, at, "create", actor)
    if after is None:
        return JobChange(job.id, job.team, at, "delete", actor)
    fields = changed_fields(before, after)
    action = "update"
    if set(fields) == {"paused"}:
        action = "pause" if after.paused else "resume"
    return JobChange(job.id, job.team, at, action, actor, fields)
