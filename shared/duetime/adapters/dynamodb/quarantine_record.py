"""The quarantine record on DynamoDB (``QuarantineRecord``): control-table items under the partition key
``quarantine``, sorted by ``<job id>#<due key>``, each with the row's key, its error and when it was first
reported; ``ttl`` forgets it 30 days after it was written."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from duetime.adapters.dynamodb import conditions as c
from duetime.adapters.dynamodb.codec import Item, number_attribute, stamped, string_attribute, time_attribute
from duetime.adapters.dynamodb.conditional import conditional_write
from duetime.adapters.dynamodb.store_part import StorePart
from duetime.adapters.dynamodb.tables import RUN_TTL_ATTRIBUTE
from duetime.domain.timeutil import parse_iso_z
from duetime.ports import QuarantinedRow, UnreadableRow

QUARANTINE_PK = "quarantine"
KEPT_FOR = timedelta(days=30)


class DynamoQuarantineRecord(StorePart):
    """``QuarantineRecord`` (mixed into ``DynamoStore``)."""

    def record_unreadable(self, rows: Sequence[UnreadableRow], now: datetime) -> None:
        for row in rows:
            item: Item = {
                "pk": string_attribute(QUARANTINE_PK),
                "sk": string_attribute(f"{row.job_id}#{row.due_key}"),
                "job_id": string_attribute(row.job_id),
                "partition": number_attribute(row.partition),
                "bucket": string_attribute(row.bucket),
                "due_key": string_attribute(row.due_key),
                "error": string_attribute(row.error),
                "first_seen": time_attribute(now),
                RUN_TTL_ATTRIBUTE: number_attribute(int((now + KEPT_FOR).timestamp())),
            }
            conditional_write(
                self.client.put_item,
                TableName=self.names.control,
                Item=stamped(item, self.write_format()),
                ConditionExpression=c.QUARANTINED_ROW_IS_NEW.expression,
            )

    def quarantined_rows(self, limit: int = 1000) -> list[QuarantinedRow]:
        pages = self.client.get_paginator("query").paginate(
            TableName=self.names.control,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": string_attribute(QUARANTINE_PK)},
        )
        kept = [item_to_quarantined(item) for page in pages for item in page.get("Items", [])]
        return sorted(kept, key=lambda q: (q.first_seen, q.row.job_id))[:limit]


def item_to_quarantined(item: Item) -> QuarantinedRow:
    row = UnreadableRow(
        job_id=item["job_id"]["S"],
        partition=int(item["partition"]["N"]),
        bucket=item["bucket"]["S"],
        due_key=item["due_key"]["S"],
        error=item["error"]["S"],
    )
    return QuarantinedRow(row, parse_iso_z(item["first_seen"]["S"]))
