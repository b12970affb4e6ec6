"""What the API does with a team's calendars (``/v1/calendars``), apart from HTTP: validation, versions and
history. Another team's calendar answers exactly as a missing one (``NotFound``)."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from datetime import date, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from duetime.domain.calendars import (
    Calendar,
    CalendarRefused,
    CalendarSource,
    CalendarSpec,
    CalendarUpdate,
    calendar_change,
    days_to_store,
    named_days_of_year,
)
from duetime.domain.catalog import InvalidCursor, Page
from duetime.domain.clock import Clock
from duetime.domain.errors import BadRequest, Conflict, InvalidInput, NotFound, from_validation_error
from duetime.domain.stored_days import StoredDays
from duetime.domain.timeutil import ceil_seconds
from duetime.ports import CalendarStore

ATTEMPTS = 5  # a write that keeps losing its race to other writes of the same calendar gives up: 409
USERS_NAMED = 20  # jobs a refused delete names
USERS_LISTED = 100  # jobs a calendar's answer lists as its users


Model = TypeVar("Model", bound=BaseModel)


def _validated(model: type[Model], body: Any) -> Model:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise from_validation_error(exc) from exc


class CalendarService:
    """A team's calendars on ``store`` (the API's catalog), each change recorded in its history with the
    token that made it (``actor``)."""

    def __init__(
        self, store: CalendarStore, clock: Clock, on_change: Callable[[str, str], None] | None = None
    ) -> None:
        """``on_change(team_id, name)``: called after a calendar's dates changed (``JobService`` re-plans the
        jobs that use it)."""
        self.store = store
        self.clock = clock
        self.on_change = on_change

    def create(self, team_id: str, body: Any, actor: str) -> Calendar:
        """A new calendar under a name the team has no calendar by (409 naming ``name`` otherwise). Its
        version continues from a deleted calendar's of that name (``CalendarStore``)."""
        spec = _validated(CalendarSpec, body)
        days = _days_to_store(spec.source, self.clock.now())
        for _ in range(ATTEMPTS):
            now = self.clock.now()
            stamp = ceil_seconds(now)
            version = self.store.last_version(team_id, spec.name) + 1
            calendar = Calendar(
                **dict(spec),
                team=team_id,
                version=version,
                created_at=stamp,
                updated_at=stamp,
                stored_days=days,
            )
            if self.store.create_calendar(calendar, calendar_change(None, calendar, now, actor)):
                return calendar
            if self.store.get_calendar(team_id, spec.name) is not None:
                raise Conflict(f"name: the team has a calendar named {spec.name!r}", "name")
        raise Conflict(f"calendar {spec.name} kept changing while being created; try again")

    def get(self, team_id: str, name: str) -> Calendar:
        calendar = self.store.get_calendar(team_id, name)
        if calendar is None:
            raise NotFound(f"no calendar {name}")
        return calendar

    def list(self, team_id: str, limit: int, cursor: str | None) -> Page:
        try:
            return self.store.team_calendars(team_id, limit, cursor)
        except InvalidCursor as exc:
            raise BadRequest(str(exc), "cursor") from exc

    def days(self, team_id: str, name: str, year: int) -> dict[date, str | None]:
        """The days of ``year`` the calendar holds, each with its name where the source gives one: stored
        when it was written (computed, bounded, only for a year it did not store)."""
        return named_days_of_year(self.get(team_id, name), year)

    def update(self, team_id: str, name: str, body: Any, actor: str) -> Calendar:
        """Replace the calendar's source and description. With ``version`` in the body, only that version
        is replaced (409 naming ``version`` once it moved on); without, the latest, read again after a lost
        race."""
        wanted = _validated(CalendarUpdate, body)
        days = _days_to_store(wanted.source, self.clock.now())
        for _ in range(ATTEMPTS):
            before = self.get(team_id, name)
            _check_version(before, wanted.version)
            now = self.clock.now()
            after = before.model_copy(
                update={
                    "source": wanted.source,
                    "description": wanted.description,
                    "version": before.version + 1,
                    "updated_at": ceil_seconds(now),
                    "stored_days": days,
                }
            )
            if self.store.replace_calendar(before, after, calendar_change(before, after, now, actor)):
                changed = after.source != before.source or after.stored_days != before.stored_days
                if self.on_change is not None and changed:
                    self.on_change(team_id, name)
                return after
        raise Conflict(f"calendar {name} kept changing while being updated; try again")

    def delete(self, team_id: str, name: str, actor: str, version: int | None = None) -> None:
        """Delete the calendar (of ``version`` only, when given: 409 naming ``version`` once it moved on),
        unless jobs use it: 409 naming them (at most ``USERS_NAMED``). Its history stays readable."""
        for _ in range(ATTEMPTS):
            calendar = self.get(team_id, name)
            _check_version(calendar, version)
            if self.store.remove_calendar(calendar, calendar_change(calendar, None, self.clock.now(), actor)):
                return
            users = self.store.calendar_users(team_id, name, USERS_NAMED + 1)
            if users:
                shown = ", ".join(users[:USERS_NAMED]) + (", ..." if len(users) > USERS_NAMED else "")
                raise Conflict(
                    f"calendar {name} is used by jobs {shown}: change or delete them first "
                    f"(GET /v1/calendars/{name} lists them in `used_by`)"
                )
        raise Conflict(f"calendar {name} kept changing while being deleted; try again")

    def users(self, team_id: str, name: str) -> builtins.list[str]:
        """Ids of the team's jobs that use the calendar (at most ``USERS_LISTED``)."""
        return self.store.calendar_users(team_id, name, USERS_LISTED)

    def history(self, team_id: str, name: str, limit: int, cursor: str | None) -> Page:
        """The calendar's changes of the last 90 days, newest first; a deleted calendar's too (404 when
        the name has neither a calendar nor a change)."""
        try:
            page = self.store.calendar_history(team_id, name, limit, cursor)
        except InvalidCursor as exc:
            raise BadRequest(str(exc), "cursor") from exc
        if not page.items and cursor is None and self.store.get_calendar(team_id, name) is None:
            raise NotFound(f"no calendar {name}")
        return page


def _days_to_store(source: CalendarSource, now: datetime) -> StoredDays:
    """``days_to_store``, a refusal a 422 naming the field: computed before anything is written."""
    try:
        return days_to_store(source, now)
    except CalendarRefused as exc:
        raise InvalidInput(f"{exc.field}: {exc}", exc.field) from exc


def _check_version(calendar: Calendar, version: int | None) -> None:
    if version is not None and version != calendar.version:
        raise Conflict(
            f"version: calendar {calendar.name} is at version {calendar.version}, not {version}: read it "
            "again and decide",
            "version",
        )
