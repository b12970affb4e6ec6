"""Team calendars in the control table (``duetime.ports.CalendarStore``), a part of ``DynamoCatalog``.

Rows (``pk`` / ``sk``):

- ``calendar#<team>`` / ``<name>``: the calendar (``calendar``, the JSON of
  ``duetime.domain.calendars.Calendar``), its ``version``, and ``jobs_using``: how many jobs use it, moved by
  the job writes themselves in their transactions (``DynamoCatalog``; the jobs are listed by the
  ``calendar-jobs#`` index items, ``job_index.py``). A delete removes ``calendar`` and keeps the item
  with its ``version``, so a name's versions are never reused (a create under the name continues from
  there: CALENDAR_NAME_FREED) and (team, name, version) names one content for good. A team's calendars are
  one Query of its ``pk``, by name.
- ``calendar-history#<team>#<name>`` / ``<version, 12 digits>.<0 a write, 1 a delete>``: one row per change
  (``CalendarChange``), written in the same transaction as the change, kept 90 days (TTL ``ttl``); newest
  first.

A calendar holds its source and the days it holds in the years around its write (``stored_days``: an item
written before there were stored days has none), under 200 KB of JSON (``duetime.domain.calendars``' limits;
a write past ``MAX_STORED_BYTES``, 350 KB, is refused), within DynamoDB's 400 KB item and 4 MB transaction.
It is read back as stored (``Calendar.from_stored``): its source was checked when written and is not parsed
again on a read.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from duetime.adapters.dynamodb import conditions as c
from duetime.adapters.dynamodb.codec import Item, number_attribute, stamped, string_attribute
from duetime.adapters.dynamodb.conditional import transaction_committed
from duetime.adapters.dynamodb.cursors import CONTROL_KEY, decode_cursor, encode_cursor
from duetime.adapters.dynamodb.job_index import change_item
from duetime.adapters.dynamodb.tables import TableNames
from duetime.domain.calendars import Calendar, CalendarChange
from duetime.domain.catalog import Page
from duetime.domain.timeutil import iso_z

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import QueryInputTypeDef, TransactWriteItemTypeDef


def calendar_pk(team_id: str) -> str:
    return f"calendar#{team_id}"


def calendar_history_pk(team_id: str, name: str) -> str:
    return f"calendar-history#{team_id}#{name}"


def _key(team_id: str, name: str) -> Item:
    return {"pk": string_attribute(calendar_pk(team_id)), "sk": string_attribute(name)}


def _stored(calendar: Calendar) -> str:
    """The calendar's JSON, its instants to the second (as every row of the table keeps them), without its
    days: those are an attribute of their own (``days``), which the release before them, whose ``Calendar``
    refuses a field it does not know, never reads (docs/stored-formats.md, rule 3)."""
    return calendar.model_copy(
        update={
            "created_at": datetime.fromisoformat(iso_z(calendar.created_at)),
            "updated_at": datetime.fromisoformat(iso_z(calendar.updated_at)),
        }
    ).model_dump_json(exclude={"stored_days"})


def _calendar(item: Item) -> Calendar:
    """The calendar an item holds, with its stored days if it has them."""
    return Calendar.from_stored(item["calendar"]["S"], item["days"]["S"] if "days" in item else None)


class DynamoCalendars:
    """The calendar rows of the control table."""

    client: DynamoDBClient
    names: TableNames
    write_format: Callable[[], int]  # the stored format a new item is written in (``DynamoCatalog``)

    def last_version(self, team_id: str, name: str) -> int:
        item = self.client.get_item(
            TableName=self.names.control, Key=_key(team_id, name), ConsistentRead=True
        ).get("Item")
        return int(item["version"]["N"]) if item and "version" in item else 0

    def create_calendar(self, calendar: Calendar, change: CalendarChange) -> bool:
        """Put the calendar over no item (CALENDAR_IS_NEW, version 1) or over a deleted one's item at the
        version before (CALENDAR_NAME_FREED), with its history row, in one transaction."""
        put: TransactWriteItemTypeDef = {
            "Put": {
                "TableName": self.names.control,
                "Item": self._item(calendar),
                "ConditionExpression": c.CALENDAR_IS_NEW.expression,
            }
        }
        if calendar.version > 1:
            put["Put"]["ConditionExpression"] = c.CALENDAR_NAME_FREED.expression
            put["Put"]["ExpressionAttributeValues"] = {":previous": number_attribute(calendar.version - 1)}
        return transaction_committed(self.client, [put, self._calendar_history_put(change)])

    def replace_calendar(self, before: Calendar, after: Calendar, change: CalendarChange) -> bool:
        """Set ``after`` on ``before``'s item (CALENDAR_VERSION_IS), with its history row, in one transaction;
        an update, not a put, so the item's count of the jobs using it (``jobs_using``) stays. Its stored days
        go with it (``days``: set, or removed when ``after`` has none)."""
        values = {
            ":expected_version": number_attribute(before.version),
            ":calendar": string_attribute(_stored(after)),
            ":version": number_attribute(after.version),
        }
        expression = "SET calendar = :calendar, version = :version"
        if after.stored_days is not None:
            expression += ", days = :days"
            values[":days"] = string_attribute(after.stored_days.model_dump_json())
        else:
            expression += " REMOVE days"
        update: TransactWriteItemTypeDef = {
            "Update": {
                "TableName": self.names.control,
                "Key": _key(after.team, after.name),
                "UpdateExpression": expression,
                "ConditionExpression": c.CALENDAR_VERSION_IS.expression,
                "ExpressionAttributeValues": values,
            }
        }
        return transaction_committed(self.client, [update, self._calendar_history_put(change)])

    def remove_calendar(self, calendar: Calendar, change: CalendarChange) -> bool:
        """Remove the calendar from its item, keeping the item's version, only while no job uses it
        (CALENDAR_UNUSED), with its history row, in one transaction."""
        update: TransactWriteItemTypeDef = {
            "Update": {
                "TableName": self.names.control,
                "Key": _key(calendar.team, calendar.name),
                "UpdateExpression": "REMOVE calendar, days",
                "ConditionExpression": c.CALENDAR_UNUSED.expression,
                "ExpressionAttributeValues": {
                    ":expected_version": number_attribute(calendar.version),
                    ":zero": number_attribute(0),
                },
            }
        }
        return transaction_committed(self.client, [update, self._calendar_history_put(change)])

    def get_calendar(self, team_id: str, name: str) -> Calendar | None:
        item = self.client.get_item(
            TableName=self.names.control, Key=_key(team_id, name), ConsistentRead=True
        ).get("Item")
        return _calendar(item) if item and "calendar" in item else None

    def team_calendars(self, team_id: str, limit: int, cursor: str | None) -> Page:
        """One Query of the team's calendar items, by name; deleted names' items are filtered out (so a
        page may hold fewer than ``limit``)."""
        query: QueryInputTypeDef = {
            "TableName": self.names.control,
            "KeyConditionExpression": "pk = :pk",
            "FilterExpression": "attribute_exists(calendar)",
            "ExpressionAttributeValues": {":pk": string_attribute(calendar_pk(team_id))},
            "ConsistentRead": True,
            "Limit": limit,
        }
        start = decode_cursor(cursor, ("pk", calendar_pk(team_id)), CONTROL_KEY)
        if start:
            query["ExclusiveStartKey"] = start
        response = self.client.query(**query)
        calendars = [_calendar(item) for item in response.get("Items", [])]
        return Page(calendars, encode_cursor(response.get("LastEvaluatedKey")))

    def calendar_history(self, team_id: str, name: str, limit: int, cursor: str | None) -> Page:
        pk = calendar_history_pk(team_id, name)
        query: QueryInputTypeDef = {
            "TableName": self.names.control,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": string_attribute(pk)},
            "ScanIndexForward": False,
            "ConsistentRead": True,
            "Limit": limit,
        }
        start = decode_cursor(cursor, ("pk", pk), CONTROL_KEY)
        if start:
            query["ExclusiveStartKey"] = start
        response = self.client.query(**query)
        changes = [_change(team_id, name, item) for item in response.get("Items", [])]
        return Page(changes, encode_cursor(response.get("LastEvaluatedKey")))

    # --- items ------------------------------------------------------------------------------------------

    def _item(self, calendar: Calendar) -> Item:
        item = {
            **_key(calendar.team, calendar.name),
            "calendar": string_attribute(_stored(calendar)),
            "version": number_attribute(calendar.version),
        }
        if calendar.stored_days is not None:
            item["days"] = string_attribute(calendar.stored_days.model_dump_json())
        return stamped(item, self.write_format())

    def _calendar_history_put(self, change: CalendarChange) -> TransactWriteItemTypeDef:
        """The change's row, keyed by its place in the history (``CalendarChange.order_key``): new by
        construction, as the calendar write it rides with holds only once per version, so it needs no
        condition of its own."""
        pk = calendar_history_pk(change.team, change.name)
        item = change_item(pk, change.at, change.action, change.actor, change.fields)
        keyed = {
            **item,
            "sk": string_attribute(change.order_key),
            "version": number_attribute(change.version),
        }
        return {"Put": {"TableName": self.names.control, "Item": stamped(keyed, self.write_format())}}


def _change(team_id: str, name: str, item: Item) -> CalendarChange:
    return CalendarChange(
        team=team_id,
        name=name,
        version=int(item["version"]["N"]),
        at=datetime.fromisoformat(item["at"]["S"]),
        action=item["action"]["S"],
        actor=item["actor"]["S"],
        fields=json.loads(item["fields"]["S"]),
    )
