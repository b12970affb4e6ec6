"""The reconciler's reports, kept.

A part of ``duetime.ports``: every port, its docstrings the contract every adapter keeps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class ReconcilerReport:
    """One reconciler tick's figures (metric name -> value), and when it was made."""

    at: datetime
    values: Mapping[str, float]


class ReconcilerRecord(Protocol):
    """The reconciler's last reports, kept where an operator without CloudWatch (``duetime local``) reads
    them: ``duetime system alarms --local`` evaluates the alarms over them."""

    def record_reconciliation(self, report: ReconcilerReport) -> None:
        """Keep ``report`` (unconditional: one per tick; a report at the same instant replaces the other)."""
        ...

    def recent_reconciliations(self, limit: int) -> list[ReconcilerReport]:
        """The ``limit`` latest reports kept, newest first (reports older than a day may be forgotten)."""
        ...
