"""The run queue and its backlog.

A part of ``duetime.ports``: every port, its docstrings the contract every adapter keeps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from duetime.domain.models import Run


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
