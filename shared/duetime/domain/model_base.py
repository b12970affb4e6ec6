"""What every stored model of duetime shares: strict from a client, tolerant of what a later release stored.

A part of ``duetime.domain.models`` (which exports every name of these modules).
"""

from __future__ import annotations

from pydantic import ConfigDict

from duetime.domain.stored_format import ReadsStoredTolerantly


class Strict(ReadsStoredTolerantly):
    model_config = ConfigDict(extra="forbid", frozen=True)
