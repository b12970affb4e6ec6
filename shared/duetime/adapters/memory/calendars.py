"""The twin's team calendars (``duetime.ports.CalendarStore``), a part of ``InMemoryCatalog``.

Each write checks its condition and writes the calendar and its history entry under the catalog's lock, as
DynamoDB's transaction does: all of it or none of it. A deleted calendar's last version stays taken, as the
DynamoDB adapter's item keeps it. Instants are kept to the second; history entries are kept forever (no TTL).
"""

from __future__ import annotations

import dataclasses
import threading

from duetime.adapters.memory.pages import json_value, page
from duetime.adapters.memory.stored import to_second
from duetime.domain.calendars import Calendar, CalendarChange
from duetime.domain.catalog import CalendarGone, Page
from duetime.domain.models import Job


def _stored(calendar: Calendar) -> Calendar:
    return calendar.model_copy(
        update={"created_at": to_second(calendar.created_at), "updated_at": to_second(calendar.updated_at)}
    )


class MemoryCalendars:
    """``CalendarStore`` in memory: the live calendars, each name's last version, each name's history."""

    lock: threading.RLock
    _calendars: dict[tuple[str, str], Calendar]  # (team, name) -> the live calendar
    _calendar_versions: dict[tuple[str, str], int]  # (team, name) -> its last version, live or deleted
    _calendar_history: dict[tuple[str, str], list[tuple[str, CalendarChange]]]  # -> (sort key, change)
    _calendar_users: dict[tuple[str, str], set[str]]  # (team, name) -> ids of the jobs that use it

    def calendar_users(self, team_id: str, name: str, limit: int) -> list[str]:
        with self.lock:
            return sorted(self._calendar_users.get((team_id, name), set()))[:limit]

    def _count_calendar_uses(self, before: Job | None, after: Job | None) -> None:
        """What DynamoDB's job write does to its calendars' items in its transaction (CALENDAR_IS_LIVE for
        each calendar ``after`` starts using; raises ``CalendarGone``), under the caller's lock."""
        old = set(before.calendar_names) if before else set()
        new = set(after.calendar_names) if after else set()
        job = after or before
        assert job is not None
        for name in sorted(new - old):
            if (job.team, name) not in self._calendars:
                raise CalendarGone(job.team, name)
        for name in new - old:
            self._calendar_users.setdefault((job.team, name), set()).add(job.id)
        for name in old - new:
            self._calendar_users.get((job.team, name), set()).discard(job.id)

    def _record_calendar_change(self, change: CalendarChange) -> None:
        stored = dataclasses.replace(change, at=to_second(change.at), fields=json_value(change.fields))
        self._calendar_history.setdefault((change.team, change.name), []).append((change.order_key, stored))

    def _calendar_version_is(self, calendar: Calendar) -> bool:
        """CALENDAR_VERSION_IS: the live calendar is still at ``calendar.version``."""
        stored = self._calendars.get((calendar.team, calendar.name))
        return stored is not None and stored.version == calendar.version

    def last_version(self, team_id: str, name: str) -> int:
        with self.lock:
            return self._calendar_versions.get((team_id, name), 0)

    def create_calendar(self, calendar: Calendar, change: CalendarChange) -> bool:
        key = (calendar.team, calendar.name)
        with self.lock:
            if key in self._calendars or self._calendar_versions.get(key, 0) != calendar.version - 1:
                return False  # CALENDAR_IS_NEW / CALENDAR_NAME_FREED
            self._calendars[key] = _stored(calendar)
            self._calendar_versions[key] = calendar.version
            self._record_calendar_change(change)
            return True

    def replace_calendar(self, before: Calendar, after: Calendar, change: CalendarChange) -> bool:
        with self.lock:
            if not self._calendar_version_is(before):
                return False
            self._calendars[after.team, after.name] = _stored(after)
            self._calendar_versions[after.team, after.name] = after.version
            self._record_calendar_change(change)
            return True

    def remove_calendar(self, calendar: Calendar, change: CalendarChange) -> bool:
        with self.lock:
            if not self._calendar_version_is(calendar) or self._calendar_users.get(
                (calendar.team, calendar.name)
            ):
                return False  # CALENDAR_UNUSED
            del self._calendars[calendar.team, calendar.name]
            self._record_calendar_change(change)
            return True

    def get_calendar(self, team_id: str, name: str) -> Calendar | None:
        with self.lock:
            return self._calendars.get((team_id, name))  # frozen: no copy needed

    def team_calendars(self, team_id: str, limit: int, cursor: str | None) -> Page:
        with self.lock:
            mine = [(name, calendar) for (team, name), calendar in self._calendars.items() if team == team_id]
        return page(mine, f"calendars#{team_id}", limit, cursor, newest=False)

    def calendar_history(self, team_id: str, name: str, limit: int, cursor: str | None) -> Page:
        with self.lock:
            entries = list(self._calendar_history.get((team_id, name), []))
        return page(entries, f"calendar-history#{team_id}#{name}", limit, cursor, newest=True)
