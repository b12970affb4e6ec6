"""The installation's record on DynamoDB (``InstallationRecord``): one control-table item, ``installation``.

Its attributes: ``finalized_format`` (absent until the first finalize: format 1), ``finalized_release`` and
``finalized_at``; and per release that has run against the tables, ``first_seen#<release>`` and
``last_seen#<release>`` (names with ``#`` and dots, written through expression attribute names).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from duetime.adapters.dynamodb import conditions as c
from duetime.adapters.dynamodb.codec import Item, number_attribute, string_attribute, time_attribute
from duetime.adapters.dynamodb.conditional import conditional_write
from duetime.adapters.dynamodb.jobs import mark_key
from duetime.adapters.dynamodb.reads import batch_get
from duetime.adapters.dynamodb.tables import TableNames
from duetime.domain.ids import PARTITIONS
from duetime.domain.installation import Installation, ReleaseSeen
from duetime.domain.stored_format import FIRST_FORMAT
from duetime.domain.timeutil import parse_iso_z

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

INSTALLATION_KEY: Item = {"pk": {"S": "installation"}, "sk": {"S": "installation"}}
_FIRST_SEEN = "first_seen#"
_LAST_SEEN = "last_seen#"


class DynamoInstallation:
    """Implements ``duetime.ports.InstallationRecord``."""

    def __init__(self, client: DynamoDBClient, names: TableNames) -> None:
        self.client = client
        self.names = names

    def read_installation(self) -> Installation:
        item = self.client.get_item(
            TableName=self.names.control, Key=INSTALLATION_KEY, ConsistentRead=True
        ).get("Item")
        return installation_from_item(item or {})

    def record_release(self, release: str, now: datetime) -> Installation:
        response = self.client.update_item(
            TableName=self.names.control,
            Key=INSTALLATION_KEY,
            UpdateExpression="SET #first = if_not_exists(#first, :now), #last = :now",
            ExpressionAttributeNames={"#first": _FIRST_SEEN + release, "#last": _LAST_SEEN + release},
            ExpressionAttributeValues={":now": time_attribute(now)},
            ReturnValues="ALL_NEW",
        )
        return installation_from_item(response.get("Attributes", {}))

    def start_installation(self, stored_format: int, release: str, now: datetime) -> bool:
        return self._finalize(stored_format, release, now, c.INSTALLATION_NEVER_FINALIZED, {})

    def finalize_installation(self, stored_format: int, release: str, now: datetime, was: int) -> bool:
        return self._finalize(
            stored_format,
            release,
            now,
            c.INSTALLATION_FINALIZED_AS_READ,
            {":was": number_attribute(was), ":first": number_attribute(FIRST_FORMAT)},
        )

    def _finalize(
        self, stored_format: int, release: str, now: datetime, condition: c.Condition, values: Item
    ) -> bool:
        written = conditional_write(
            self.client.update_item,
            TableName=self.names.control,
            Key=INSTALLATION_KEY,
            UpdateExpression=(
                "SET finalized_format = :format, finalized_release = :release, finalized_at = :now"
            ),
            ConditionExpression=condition.expression,
            ExpressionAttributeValues={
                ":format": number_attribute(stored_format),
                ":release": string_attribute(release),
                ":now": time_attribute(now),
                **values,
            },
        )
        return written is not None

    def holds_nothing(self) -> bool:
        """No partition has a low-water mark: no job was ever written, by this release or an older one (the
        first job of a partition sets its mark, ``ensure_low_water_mark``, and every run is a job's). One
        read of the control table's 64 mark keys, which every function may read, rather than a scan of
        the jobs, which none needs."""
        return not batch_get(self.client, self.names.control, [mark_key(p) for p in range(PARTITIONS)])


def installation_from_item(item: Item) -> Installation:
    releases = []
    for name, value in item.items():
        if name.startswith(_FIRST_SEEN):
            release = name.removeprefix(_FIRST_SEEN)
            first = parse_iso_z(value["S"])
            last = item.get(_LAST_SEEN + release)
            releases.append(ReleaseSeen(release, first, parse_iso_z(last["S"]) if last else first))
    return Installation(
        finalized_format=int(item["finalized_format"]["N"]) if "finalized_format" in item else FIRST_FORMAT,
        finalized_release=item["finalized_release"]["S"] if "finalized_release" in item else None,
        finalized_at=parse_iso_z(item["finalized_at"]["S"]) if "finalized_at" in item else None,
        releases=tuple(sorted(releases, key=lambda r: r.first_seen)),
    )
