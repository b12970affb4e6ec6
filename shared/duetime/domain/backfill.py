"""A backfill's window: past nominal times to run now.

A part of ``duetime.domain.models`` (which exports every name of these modules).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import (
    AwareDatetime,
    Field,
    ValidationInfo,
    field_validator,
)

from duetime.domain.model_base import Strict
from duetime.domain.schedule_kinds import in_utc

MAX_BACKFILL_RUNS = 1_000  # nominal times one backfill request may cover


_INSTANT_EXAMPLE = "2026-12-01T00:00:00Z"


_EARLIEST_BACKFILL = datetime(1970, 1, 1, tzinfo=UTC)


class BackfillWindow(Strict):
    """``POST /v1/jobs/{id}/backfill``: runs for the job's past nominal times in [from, to). Whether ``to``
    is in the past is checked against ``now`` from the validation context (the service's clock)."""

    start: AwareDatetime = Field(
        alias="from",
        description="window start (inclusive): an ISO-8601 instant with a UTC offset, e.g. "
        f"{_INSTANT_EXAMPLE}, in 1970 or later",
    )
    end: AwareDatetime = Field(
        alias="to",
        description="window end (exclusive), with a UTC offset: after `from` and not later than now "
        "(backfill is for the past; the schedule runs the future). The window may hold at most "
        f"{MAX_BACKFILL_RUNS:,} of the job's nominal times; each breach is refused with 422 naming `to`",
    )

    @field_validator("start", "end", mode="before")
    @classmethod
    def _iso_text(cls, value: Any) -> Any:
        if not isinstance(value, str):
            raise ValueError(f"must be an ISO-8601 instant with a UTC offset, e.g. {_INSTANT_EXAMPLE}")
        return value

    @field_validator("start", "end")
    @classmethod
    def _utc_since_1970(cls, value: datetime) -> datetime:
        value = in_utc(value)
        if value < _EARLIEST_BACKFILL:
            raise ValueError(f"must be {_EARLIEST_BACKFILL.year} or later")
        return value

    @field_validator("end")
    @classmethod
    def _past_and_after_start(cls, value: datetime, info: ValidationInfo) -> datetime:
        start = info.data.get("start")
        if start is not None and value <= start:
            raise ValueError("to must be after from")
        now = (info.context or {}).get("now")
        if now is not None and value > now:
            raise ValueError("to must not be later than now: backfill is for past times")
        return value
