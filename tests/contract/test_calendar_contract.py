"""One contract for every calendar store (``duetime.ports.CalendarStore``): the tests below run against the
in-memory twin (``InMemoryCatalog``) and DynamoDB Local (``DynamoCatalog``) alike. They read as the port's
contract: a create under a free name, updates and deletes under the version read (a lost race is False,
nothing written), versions never reused, listings by name with cursors, and the history of every change."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from duetime.adapters.dynamodb.catalog import DynamoCatalog
from duetime.adapters.memory import InMemoryCatalog
from duetime.domain.calendars import (
    Calendar,
    CalendarSource,
    calendar_change,
    days_to_store,
    named_days_of_year,
)
from duetime.domain.catalog import InvalidCursor

from ..twin_support import at
from .conftest import TWIN, against

FRANCE = CalendarSource.model_validate({"holidays": {"country": "FR"}})
EVES = CalendarSource.model_validate({"dates": ["2026-12-24", "2026-12-31"]})


@pytest.fixture(params=against("dynamodb"))
def store(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == TWIN:
        yield InMemoryCatalog()
        return
    client, names = request.getfixturevalue("dynamodb_tables")
    yield DynamoCatalog(client, names)


def a_calendar(name: str = "fr", version: int = 1, team: str = "team-a", **fields: Any) -> Calendar:
    return Calendar(
        name=name,
        source=fields.pop("source", FRANCE),
        description=fields.pop("description", None),
        team=team,
        version=version,
        created_at=at(0.4),
        updated_at=fields.pop("updated_at", at(0.4)),
    )


def create(store: Any, calendar: Calendar) -> bool:
    written: bool = store.create_calendar(calendar, calendar_change(None, calendar, at(0), "tok_a"))
    return written


def update(store: Any, before: Calendar, **fields: Any) -> Calendar | None:
    after = before.model_copy(update={**fields, "version": before.version + 1, "updated_at": at(5)})
    return (
        after
        if store.replace_calendar(before, after, calendar_change(before, after, at(5), "tok_b"))
        else None
    )


def delete(store: Any, calendar: Calendar) -> bool:
    removed: bool = store.remove_calendar(calendar, calendar_change(calendar, None, at(9), "tok_c"))
    return removed


def test_a_created_calendar_reads_back_as_written_to_the_second(store: Any) -> None:
    calendar = a_calendar(description="French public holidays")
    assert create(store, calendar)
    assert store.get_calendar("team-a", "fr") == calendar.model_copy(
        update={"created_at": at(0), "updated_at": at(0)}
    )
    assert store.last_version("team-a", "fr") == 1
    assert store.get_calendar("team-b", "fr") is None  # another team's name space


def test_a_second_create_under_a_taken_name_is_refused_and_writes_nothing(store: Any) -> None:
    assert create(store, a_calendar())
    assert not create(store, a_calendar(source=EVES))
    assert store.get_calendar("team-a", "fr").source == FRANCE
    assert len(store.calendar_history("team-a", "fr", 10, None).items) == 1


def test_an_update_lands_only_on_the_version_it_read(store: Any) -> None:
    first = a_calendar()
    assert create(store, first)
    second = update(store, first, source=EVES)
    assert second is not None and store.get_calendar("team-a", "fr").version == 2
    assert update(store, first, description="lost") is None  # read version 1, the store holds 2
    assert store.get_calendar("team-a", "fr").source == EVES


def test_a_delete_lands_only_on_the_version_it_read(store: Any) -> None:
    first = a_calendar()
    assert create(store, first)
    second = update(store, first, description="edited")
    assert not delete(store, first)
    assert second is not None and delete(store, second)
    assert store.get_calendar("team-a", "fr") is None
    assert not delete(store, second)  # gone: a second delete is a lost race


def test_a_name_s_versions_are_never_reused_after_a_delete(store: Any) -> None:
    first = a_calendar()
    assert create(store, first)
    second = update(store, first, source=EVES)
    assert second is not None and delete(store, second)
    assert store.last_version("team-a", "fr") == 2
    assert not create(store, a_calendar(version=1))  # version 1 named the holidays: never another content
    assert not create(store, a_calendar(version=4))  # a create that skipped a version read a stale one
    assert create(store, a_calendar(version=3, source=EVES))
    assert store.get_calendar("team-a", "fr").key == ("team-a", "fr", 3)


def test_a_team_s_calendars_are_listed_by_name_page_by_page_without_deleted_ones(store: Any) -> None:
    for name in ("c", "a", "e", "b", "d"):
        assert create(store, a_calendar(name))
    assert delete(store, store.get_calendar("team-a", "d"))
    assert create(store, a_calendar("x", team="team-b"))
    names: list[str] = []
    cursor = None
    for _ in range(10):
        page = store.team_calendars("team-a", 2, cursor)
        assert len(page.items) <= 2
        names += [calendar.name for calendar in page.items]
        cursor = page.cursor
        if cursor is None:
            break
    assert names == ["a", "b", "c", "e"]


def test_a_cursor_of_another_listing_is_refused(store: Any) -> None:
    for name in ("a", "b", "c"):
        assert create(store, a_calendar(name, team="team-b"))
    cursor = store.team_calendars("team-b", 1, None).cursor
    assert cursor is not None
    with pytest.raises(InvalidCursor):
        store.team_calendars("team-a", 1, cursor)


def test_every_change_is_in_the_history_newest_first_a_deleted_calendar_s_too(store: Any) -> None:
    first = a_calendar()
    assert create(store, first)
    second = update(store, first, source=EVES)
    assert second is not None and delete(store, second)
    changes = store.calendar_history("team-a", "fr", 10, None).items
    assert [(c.action, c.version, c.actor) for c in changes] == [
        ("delete", 2, "tok_c"),
        ("update", 2, "tok_b"),
        ("create", 1, "tok_a"),
    ]
    assert changes[1].fields == {
        "source": {"from": "holidays of FR", "to": "2 dates, 2026-12-24 to 2026-12-31"}
    }
    assert changes[0].at == at(9)
    later = store.calendar_history("team-a", "fr", 1, store.calendar_history("team-a", "fr", 1, None).cursor)
    assert [c.action for c in later.items] == ["update"]


def test_a_calendar_s_stored_days_read_back_as_written(store: Any) -> None:
    office = CalendarSource(ical=OLD_ITEM_CALENDAR["source"]["ical"])
    calendar = a_calendar("office", source=office).model_copy(
        update={"stored_days": days_to_store(office, at(0)), "created_at": at(0), "updated_at": at(0)}
    )
    assert create(store, calendar)
    read = store.get_calendar("team-a", "office")
    assert read == calendar and read.stored_days is not None
    assert named_days_of_year(read, 2027) == {
        date(2027, 12, 24): "Office closed",
        date(2027, 12, 25): "Office closed",
    }
    assert store.team_calendars("team-a", 10, None).items == [calendar]


# A calendar item as DynamoDB held it before days were stored (written by 484f692's adapter): no
# ``stored_days``. Readers keep reading it, computing its days within the read bounds, until it is written
# again.
OLD_ITEM = json.loads(
    (Path(__file__).parent / "fixtures" / "calendar_item_without_stored_days.json").read_text()
)
OLD_ITEM_CALENDAR = json.loads(OLD_ITEM["calendar"]["S"])


def test_a_calendar_written_before_days_were_stored_is_read_and_its_days_computed(store: Any) -> None:
    if isinstance(store, DynamoCatalog):
        store.client.put_item(
            TableName=store.names.control, Item={**OLD_ITEM, "pk": {"S": "calendar#team-a"}}
        )
    else:
        old = Calendar.from_stored(OLD_ITEM["calendar"]["S"])  # the twin keeps calendars, not items
        assert store.create_calendar(old, calendar_change(None, old, at(0), "tok_a"))
    read = store.get_calendar("team-a", "office")
    assert read is not None and read.stored_days is None and read.version == 1
    assert named_days_of_year(read, 2031) == {
        date(2031, 12, 24): "Office closed",
        date(2031, 12, 25): "Office closed",
    }
    assert [c.name for c in store.team_calendars("team-a", 10, None).items] == ["office"]


@pytest.mark.integration
def test_the_release_before_stored_days_still_reads_a_calendar_this_one_writes(dynamodb_tables: Any) -> None:
    """The release before stored days (484f692) reads an item's ``calendar`` JSON with a model that refuses
    a field it does not know: the days are an attribute beside it, which that release never reads, and the
    JSON holds only the fields that release wrote itself (docs/stored-formats.md, rule 3)."""
    office = CalendarSource(ical=OLD_ITEM_CALENDAR["source"]["ical"])
    calendar = a_calendar("office", source=office).model_copy(
        update={"stored_days": days_to_store(office, at(0)), "created_at": at(0), "updated_at": at(0)}
    )
    store = DynamoCatalog(*dynamodb_tables)
    assert create(store, calendar)
    item = store.client.get_item(
        TableName=store.names.control, Key={"pk": {"S": "calendar#team-a"}, "sk": {"S": "office"}}
    )["Item"]
    assert set(json.loads(item["calendar"]["S"])) <= set(OLD_ITEM_CALENDAR) and "days" in item


def test_a_changed_calendar_s_stored_days_are_the_new_ones(store: Any) -> None:
    office = CalendarSource(ical=OLD_ITEM_CALENDAR["source"]["ical"])
    calendar = a_calendar("office", source=office).model_copy(
        update={"stored_days": days_to_store(office, at(0)), "created_at": at(0), "updated_at": at(0)}
    )
    assert create(store, calendar)
    changed = update(store, calendar, source=EVES, stored_days=days_to_store(EVES, at(5)))
    assert changed is not None
    read = store.get_calendar("team-a", "office")
    assert read is not None and read.stored_days == changed.stored_days != calendar.stored_days
    assert update(store, changed, stored_days=None) is not None  # a change without days leaves none stale
    assert store.get_calendar("team-a", "office").stored_days is None
