"""Poller leases on DynamoDB, one item per partition group (``PollerLeaseStore``, ``poller_lease``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from duetime.adapters.dynamodb import conditions as c
from duetime.adapters.dynamodb.codec import Item, number_attribute, string_attribute
from duetime.adapters.dynamodb.conditional import conditional_write
from duetime.adapters.dynamodb.reads import batch_get
from duetime.adapters.dynamodb.store_part import StorePart
from duetime.ports import PollerLease

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef


class DynamoPollerLeases(StorePart):
    """``PollerLeaseStore`` (mixed into ``DynamoStore``)."""

    def read_poller_lease(self, group: str) -> PollerLease:
        item = self.client.get_item(
            TableName=self.names.control, Key=_lease_key(group), ConsistentRead=True
        ).get("Item")
        return _item_to_lease(group, item or {})

    def read_poller_leases(self, groups: Sequence[str]) -> dict[str, PollerLease]:
        found = batch_get(self.client, self.names.control, [_lease_key(g) for g in groups], consistent=True)
        items = {item["pk"]["S"].removeprefix("poller#"): item for item in found}
        return {group: _item_to_lease(group, items.get(group, {})) for group in groups}

    def acquire_poller_lease(self, group: str, me: str, now: datetime, until: datetime) -> PollerLease | None:
        return self._lease_write(
            group,
            "SET holder = :me, since = :now, expires_at = :until, term = if_not_exists(term, :zero) + :one "
            "REMOVE successor, handover_at",
            c.POLLER_LEASE_FREE,
            {
                ":me": string_attribute(me),
                ":now": _lease_instant(now),
                ":until": _lease_instant(until),
                ":zero": number_attribute(0),
                ":one": number_attribute(1),
            },
        )

    def renew_poller_lease(self, group: str, me: str, now: datetime, until: datetime) -> PollerLease | None:
        return self._lease_write(
            group,
            "SET expires_at = :until",
            c.POLLER_LEASE_HELD,
            {":me": string_attribute(me), ":now": _lease_instant(now), ":until": _lease_instant(until)},
        )

    def release_poller_lease(self, group: str, me: str) -> bool:
        released = self._lease_write(
            group,
            "REMOVE holder, since, expires_at, handover_at",
            c.POLLER_LEASE_MINE,
            {":me": string_attribute(me)},
        )
        return released is not None

    def register_poller_successor(self, group: str, me: str) -> PollerLease | None:
        return self._lease_write(
            group, "SET successor = :me", c.POLLER_SUCCESSOR_VACANT, {":me": string_attribute(me)}
        )

    def withdraw_poller_successor(self, group: str, me: str) -> bool:
        withdrawn = self._lease_write(
            group, "REMOVE successor, handover_at", c.POLLER_SUCCESSOR_IS_ME, {":me": string_attribute(me)}
        )
        return withdrawn is not None

    def offer_poller_lease(
        self, group: str, me: str, successor: str, at: datetime, now: datetime, until: datetime
    ) -> PollerLease | None:
        return self._lease_write(
            group,
            "SET handover_at = :at, expires_at = :until",
            c.POLLER_HANDOVER_OFFERABLE,
            {
                ":me": string_attribute(me),
                ":successor": string_attribute(successor),
                ":at": _lease_instant(at),
                ":now": _lease_instant(now),
                ":until": _lease_instant(until),
            },
        )

    def accept_poller_lease(
        self, group: str, me: str, holder: str, at: datetime, until: datetime
    ) -> PollerLease | None:
        return self._lease_write(
            group,
            "SET holder = :me, since = :at, expires_at = :until, term = term + :one "
            "REMOVE successor, handover_at",
            c.POLLER_HANDOVER_OFFERED,
            {
                ":me": string_attribute(me),
                ":holder": string_attribute(holder),
                ":at": _lease_instant(at),
                ":until": _lease_instant(until),
                ":one": number_attribute(1),
            },
        )

    def withdraw_poller_offer(self, group: str, me: str, at: datetime) -> PollerLease | None:
        return self._lease_write(
            group,
            "REMOVE handover_at, successor",
            c.POLLER_HANDOVER_UNANSWERED,
            {":me": string_attribute(me), ":at": _lease_instant(at)},
        )

    def wake_poller_group(self, group: str) -> PollerLease:
        response = self.client.update_item(
            TableName=self.names.control,
            Key=_lease_key(group),
            UpdateExpression="ADD wakes :one",  # unconditional: a wake is counted whoever holds the lease
            ExpressionAttributeValues={":one": number_attribute(1)},
            ReturnValues="ALL_NEW",
        )
        return _item_to_lease(group, response.get("Attributes", {}))

    def release_quiet_poller_lease(self, group: str, me: str, wakes_seen: int) -> bool:
        released = self._lease_write(
            group,
            "REMOVE holder, since, expires_at, handover_at",
            c.POLLER_QUIET_UNWOKEN,
            {":me": string_attribute(me), ":seen": number_attribute(wakes_seen)},
        )
        return released is not None

    def _lease_write(
        self, group: str, update: str, condition: c.Condition, values: Item
    ) -> PollerLease | None:
        """One conditional UpdateItem on a group's lease; the lease after it, or None (condition failed)."""
        response = conditional_write(
            self.client.update_item,
            TableName=self.names.control,
            Key=_lease_key(group),
            UpdateExpression=update,
            ConditionExpression=condition.expression,
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
        )
        return None if response is None else _item_to_lease(group, response.get("Attributes", {}))


def _lease_key(group: str) -> Item:
    return {"pk": string_attribute(f"poller#{group}"), "sk": string_attribute("lease")}


def _lease_instant(value: datetime) -> AttributeValueTypeDef:
    """A lease instant: ISO-8601 UTC to the millisecond, fixed width, so the strings sort in time order."""
    return {"S": value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"}


def _item_to_lease(group: str, item: Item) -> PollerLease:
    def text(name: str) -> str | None:
        return item[name]["S"] if name in item else None

    def instant(name: str) -> datetime | None:
        value = text(name)
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC) if value else None

    return PollerLease(
        group=group,
        holder=text("holder"),
        term=int(item["term"]["N"]) if "term" in item else 0,
        since=instant("since"),
        expires_at=instant("expires_at"),
        successor=text("successor"),
        handover_at=instant("handover_at"),
        wakes=int(item["wakes"]["N"]) if "wakes" in item else 0,
    )
