"""The installation's record: releases seen and the finalized stored format.

A part of ``duetime.ports``: every port, its docstrings the contract every adapter keeps.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from duetime.domain.installation import Installation


class InstallationRecord(Protocol):
    """The installation's record of itself (``duetime.domain.installation``): which releases have run against
    its tables and the stored format it is finalized at. One item; every change is one conditional write.
    An installation never recorded reads as ``Installation()`` (finalized at format 1)."""

    def read_installation(self) -> Installation:
        """The record, read consistently."""
        ...

    def record_release(self, release: str, now: datetime) -> Installation:
        """Say that a function of ``release`` runs at ``now`` (unconditional): its first sighting is kept,
        its last set to ``now``. The record as it stands after the write."""
        ...

    def start_installation(self, stored_format: int, release: str, now: datetime) -> bool:
        """Finalize a new installation at ``stored_format`` at once (nothing older ever wrote to it), only
        if it was never finalized (INSTALLATION_NEVER_FINALIZED); False when it was."""
        ...

    def finalize_installation(self, stored_format: int, release: str, now: datetime, was: int) -> bool:
        """Finalize at ``stored_format`` by ``release``, only while the record is still finalized at
        ``was``, the format the caller read and judged (INSTALLATION_FINALIZED_AS_READ); False when another
        finalize came first."""
        ...

    def holds_nothing(self) -> bool:
        """No job and no run is stored: a new installation (whatever it holds, no older release wrote it)."""
        ...
