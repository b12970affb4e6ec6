"""The run queue and its backlog, and the run message's body.

A part of ``duetime.ports``: every port, its docstrings the contract every adapter keeps.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from duetime.domain.models import HttpTarget, Run
from duetime.domain.stored_format import FIRST_FORMAT, FORMAT_ATTRIBUTE, STORED


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


@dataclass(frozen=True)
class ReceivedMessage:
    message_id: str
    receipt_handle: str
    body: str
    receive_count: int


# The run message's body (``encode``, ``decode``): a contract with the release before and after, kept as
# fixtures. A run carried by its message keeps ten messages of a batch far under SQS's batch limit
# (``duetime.adapters.aws.sqs``); a bigger one (a long target body) travels by name only, and its worker
# reads it. So does a run whose target has headers: their values are write-only secrets and stay in the table
# (SECURITY.md).
CARRIED_RUN_MAX_BYTES = 8 * 1024
# What a waiting run does not have (a carried run is a waiting one).
_NOT_CARRIED = {"result", "owner", "lease_expires_at", "finished_at"}


def _has_secret_headers(run: Run) -> bool:
    """Only an HTTP target has headers; an AWS target's fields hold no secret
    (``duetime.domain.aws_targets``)."""
    return isinstance(run.target, HttpTarget) and bool(run.target.headers)


def encode(message: RunMessage, stored_format: int = FIRST_FORMAT) -> str:
    """The message's body; from format 2 on with ``"fmt"``, its stored format (which format 1 never wrote,
    and releases that read format 1 ignore: they read the keys they know)."""
    head = f'{{"run_id":{json.dumps(message.run_id)},"attempt":{int(message.attempt)}'
    if stored_format > FIRST_FORMAT:
        head += f',"{FORMAT_ATTRIBUTE}":{int(stored_format)}'
    if message.run is None or _has_secret_headers(message.run):
        return head + "}"
    run = message.run.model_dump_json(exclude=_NOT_CARRIED, exclude_none=True)  # in_reap_index is excluded
    if len(run) > CARRIED_RUN_MAX_BYTES:
        return head + "}"
    indexed = "true" if message.run.in_reap_index else "false"
    return f'{head},"run":{run},"run_in_reap_index":{indexed}}}'


def decode(body: str) -> RunMessage:
    """Parse a message body; raises ``ValueError`` on anything that is not a run message (a carried run
    that is not a valid run of the attempt named included)."""
    data = json.loads(body)
    if not isinstance(data, dict) or not isinstance(data.get("run_id"), str):
        raise ValueError("not a run message")
    attempt = data.get("attempt")
    if not isinstance(attempt, int) or attempt < 1:
        raise ValueError("run message without a valid attempt")
    if "run" not in data:
        return RunMessage(run_id=data["run_id"], attempt=attempt)
    run = Run.model_validate(data["run"], context=STORED)  # pydantic's ValidationError is a ValueError
    if (run.run_id, run.attempt) != (data["run_id"], attempt):
        raise ValueError("a run message carrying another run")
    if any(getattr(run, name) is not None for name in _NOT_CARRIED):
        raise ValueError("a run message carrying a run that is not waiting")
    indexed = data.get("run_in_reap_index")
    if not isinstance(indexed, bool):
        raise ValueError("run message without a valid run_in_reap_index")
    return RunMessage.carrying(run.model_copy(update={"in_reap_index": indexed}))
