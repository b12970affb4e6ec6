"""Starting other functions: a quiet group's poller when a job is written due soon, a busy minute's helpers,
a worker kept warm; and the events they are started with.

A part of ``duetime.ports``: every port, its docstrings the contract every adapter keeps.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from duetime.domain.partitions import group_label


class PollerStarter(Protocol):
    def start(self, group: str) -> None:
        """Start an invocation of the poller for ``group`` (a label such as ``"0-15"``) without waiting for
        it; it is told it was woken, so that it returns at once if the group has a holder."""
        ...


WARMUP_EVENT = {"duetime_warmup": True}


class WorkerWarmer(Protocol):
    def warm(self) -> None:
        """Start one worker execution environment, or keep one warm; returns without waiting for it.
        Failures are the caller's to log: a warm-up is never worth failing a poller tick for."""
        ...


class HelperAssignment(BaseModel):
    """What a helper invocation serves: ``partitions`` (a slice of ``group``) for ``minute`` until
    ``serve_until``. The helper function's event (``duetime.scheduling.events.PollerTick.helper``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    group: str = Field(min_length=1, description="the delegating group's label, e.g. 0-15")
    partitions: list[int] = Field(min_length=1, max_length=64)
    minute: datetime = Field(description="the minute the helper claims (its first second, UTC)")
    serve_until: datetime
    # The helper's share of its group's claims a second (``duetime.scheduling.claim_pace``), by its slice's
    # rows; None: unpaced.
    claims_per_second: float | None = Field(default=None, gt=0)

    @property
    def lease_name(self) -> str:
        return helper_lease_name(self.group, self.partitions)


class HelperLauncher(Protocol):
    def launch(self, assignment: HelperAssignment) -> None:
        """Start one helper invocation serving ``assignment``; returns without waiting for it. Raises when
        the platform refuses (the holder keeps the slice: it never left it)."""
        ...


def helper_lease_name(group: str, partitions: Sequence[int]) -> str:
    """The lease a helper holds for its slice: ``"<group>~<slice>"``, e.g. ``"0-15~3"``; never a group's
    own name (a group label has no ``~``)."""
    return f"{group}~{group_label(partitions)}"
