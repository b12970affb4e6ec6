"""The shapes of ``/v1/calendars``' answers (requests: ``duetime.domain.calendars``' ``CalendarSpec`` and
``CalendarUpdate``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import Field

from duetime.api.schemas import Out
from duetime.domain.calendars import Calendar, CalendarChange, CalendarSource


class CalendarDay(Out):
    date: dt.date
    name: str | None = Field(description="the holiday's or event's name, where the source gives one")


class CalendarOut(Out):
    name: str
    description: str | None
    source: CalendarSource
    version: int = Field(
        description="one up with every change, never reused for the name (not even after a delete): send it "
        "back with `PUT` or `DELETE` to have a change since then refused (409)"
    )
    created_at: dt.datetime
    updated_at: dt.datetime
    year: int | None = Field(default=None, description="the year `days` lists (`?year=`); null: not asked")
    days: list[CalendarDay] | None = Field(default=None, description="the days of `year` the calendar holds")
    used_by: list[str] | None = Field(
        default=None,
        description="ids of the jobs that use the calendar (first 100), in `GET /v1/calendars/{name}`; a "
        "calendar in use cannot be deleted (409); null in listings",
    )

    @classmethod
    def of(
        cls,
        calendar: Calendar,
        year: int | None = None,
        days: dict[dt.date, str | None] | None = None,
        used_by: list[str] | None = None,
    ) -> CalendarOut:
        listed = (
            [CalendarDay(date=day, name=name) for day, name in days.items()] if days is not None else None
        )
        return cls(
            name=calendar.name,
            description=calendar.description,
            source=calendar.source,
            version=calendar.version,
            created_at=calendar.created_at,
            updated_at=calendar.updated_at,
            year=year,
            days=listed,
            used_by=used_by,
        )


class CalendarList(Out):
    calendars: list[CalendarOut]
    next_cursor: str | None


class CalendarChangeOut(Out):
    at: dt.datetime
    action: str = Field(description="create, update or delete")
    version: int = Field(description="the version the change made (a delete: the version deleted)")
    token_id: str = Field(description="the id of the token that made the change (tok_...), never the token")
    fields: dict[str, dict[str, Any]] = Field(
        description='each changed field: {"from": old, "to": new} (a source by a summary of it)'
    )

    @classmethod
    def of(cls, change: CalendarChange) -> CalendarChangeOut:
        return cls(
            at=change.at,
            action=change.action,
            version=change.version,
            token_id=change.actor,
            fields=change.fields,
        )


class CalendarHistory(Out):
    changes: list[CalendarChangeOut]
    next_cursor: str | None
