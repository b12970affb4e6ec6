"""Jobs on DynamoDB: reading them, the due index, and the partitions' low-water marks (``JobStore``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from duetime.adapters.dynamodb import conditions as c
from duetime.adapters.dynamodb import partiql
from duetime.adapters.dynamodb.codec import Item, item_to_job, stamped, string_attribute
from duetime.adapters.dynamodb.conditional import conditional_write
from duetime.adapters.dynamodb.due_rows import CompactDueRow
from duetime.adapters.dynamodb.reads import batch_get, read_job
from duetime.adapters.dynamodb.store_part import StorePart
from duetime.adapters.dynamodb.tables import DUE_INDEX
from duetime.domain.models import Job
from duetime.domain.timeutil import iso_z
from duetime.ports import UnreadableRow, unreadable_error


class DynamoJobs(StorePart):
    """``JobStore``'s reads and low-water marks (mixed into ``DynamoStore``; claims: ``claims.py``)."""

    _marks_known: set[int]  # partitions whose low-water mark is known to exist

    def get_job(self, job_id: str) -> Job | None:
        return read_job(self.client, self.names, job_id)

    def due_jobs(
        self,
        partition: int,
        bucket: str,
        until: datetime,
        limit: int,
        after: str | None = None,
        unreadable: list[UnreadableRow] | None = None,
    ) -> list[Job]:
        jobs = []
        for item in self._due_items(partition, bucket, until, limit, after):
            try:  # each row on its own: one that cannot be read is one bad job, not a bad page
                jobs.append(item_to_job(item))
            except Exception as error:  # whatever a stored payload makes the reader raise
                if unreadable is not None:
                    unreadable.append(_unreadable(item, partition, bucket, error))
        return jobs

    def due_rows(
        self, partition: int, bucket: str, until: datetime, limit: int, after: str | None = None
    ) -> list[CompactDueRow]:
        items = self._due_items(partition, bucket, until, limit, after, CompactDueRow.ATTRIBUTES)
        rows = []
        for item in items:
            try:  # a row missing what a compact row keeps is left out here; the sweep quarantines it
                rows.append(CompactDueRow(item))
            except (KeyError, ValueError):
                continue
        return rows

    def _due_items(
        self,
        partition: int,
        bucket: str,
        until: datetime,
        limit: int,
        after: str | None,
        attributes: Sequence[str] = (),
    ) -> list[Item]:
        """The due index's items for (partition, bucket) up to ``until``, after the due key ``after``;
        only ``attributes`` of each when given."""
        low = f"{after}\x00" if after else "0"  # strictly after the given due key
        query: dict[str, Any] = {
            "TableName": self.names.jobs,
            "IndexName": DUE_INDEX,
            "KeyConditionExpression": "due_bucket = :bucket AND due_key BETWEEN :low AND :until",
            "ExpressionAttributeValues": {
                ":bucket": string_attribute(f"{partition:02d}#{bucket}"),
                ":low": string_attribute(low),
                ":until": string_attribute(f"{iso_z(until)}#~"),  # '~' sorts after every job id character
            },
        }
        if attributes:
            query["ProjectionExpression"] = ", ".join(f"#a{i}" for i in range(len(attributes)))
            query["ExpressionAttributeNames"] = {f"#a{i}": name for i, name in enumerate(attributes)}
        # A page stops at 1 MB (about 15 jobs with 64 KiB bodies), so a short page is not the end: follow
        # LastEvaluatedKey until ``limit`` rows or the end of the range.
        items: list[Item] = []
        while len(items) < limit:
            response = self.client.query(**query, Limit=limit - len(items))
            items.extend(response.get("Items", []))
            if "LastEvaluatedKey" not in response:
                break
            query["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return items

    def count_due(self, partition: int, bucket: str) -> int:
        pages = self.client.get_paginator("query").paginate(
            TableName=self.names.jobs,
            IndexName=DUE_INDEX,
            KeyConditionExpression="due_bucket = :bucket",
            ExpressionAttributeValues={":bucket": string_attribute(f"{partition:02d}#{bucket}")},
            Select="COUNT",
        )
        # A COUNT still reads (and pages) at most 1 MB of the index at a time: every page counts.
        return sum(int(page.get("Count", 0)) for page in pages)

    def low_water_marks(self, partitions: Sequence[int]) -> dict[int, str]:
        items = batch_get(self.client, self.names.control, [mark_key(p) for p in partitions])
        return dict(map(item_to_mark, items))

    def ensure_low_water_mark(self, partition: int, bucket: str) -> None:
        if partition in self._marks_known:
            return
        conditional_write(
            self.client.put_item,
            TableName=self.names.control,
            # Asked before the first mark is written: an installation with no mark yet holds no job (a new
            # one, ``DynamoInstallation.holds_nothing``), and its marks are stamped like its other items.
            Item=stamped({**mark_key(partition), "low_water": string_attribute(bucket)}, self.write_format()),
            ConditionExpression=c.WATERMARK_MISSING.expression,
        )
        self._marks_known.add(partition)

    def advance_low_water_marks(
        self, marks: Mapping[int, str], read: Mapping[int, str] | None = None
    ) -> set[int]:
        """One BatchExecuteStatement per 25 marks (``WATERMARK_BEHIND``, ``WATERMARK_BEHIND_AS_READ`` for a
        partition in ``read``): at a minute's turn a poller moves all of its partitions' marks, 64 single
        writes before."""
        read = read or {}
        partitions = list(marks)
        statements = [
            partiql.update(
                self.names.control,
                mark_key(partition),
                c.WATERMARK_BEHIND_AS_READ if partition in read else c.WATERMARK_BEHIND,
                {
                    ":low_water": string_attribute(marks[partition]),
                    ":bucket": string_attribute(marks[partition]),
                    **({":read": string_attribute(read[partition])} if partition in read else {}),
                },
                sets=("low_water",),
            )
            for partition in partitions
        ]
        written = self._execute_in_parallel(statements)
        return {partition for partition, done in zip(partitions, written, strict=True) if not done}

    def due_rows_by_bucket(self) -> dict[tuple[int, str], int]:
        counts: dict[tuple[int, str], int] = {}
        pages = self.client.get_paginator("scan").paginate(
            TableName=self.names.jobs, IndexName=DUE_INDEX, ProjectionExpression="due_bucket"
        )
        for page in pages:  # keys only, 1 MB a page: about 40,000 rows a read
            for item in page.get("Items", []):
                partition, bucket = item["due_bucket"]["S"].split("#", 1)
                key = (int(partition), bucket)
                counts[key] = counts.get(key, 0) + 1
        return counts

    def lower_low_water_marks(self, marks: Mapping[int, str]) -> dict[int, str]:
        written: dict[int, str] = {}
        for partition, bucket in marks.items():
            item = {**mark_key(partition), "low_water": string_attribute(bucket)}
            created = conditional_write(
                self.client.put_item,
                TableName=self.names.control,
                Item=stamped(item, self.write_format()),
                ConditionExpression=c.WATERMARK_MISSING.expression,
            )
            lowered = created or conditional_write(
                self.client.update_item,
                TableName=self.names.control,
                Key=mark_key(partition),
                UpdateExpression="SET low_water = :bucket",
                ConditionExpression=c.WATERMARK_AHEAD.expression,
                ExpressionAttributeValues={":bucket": string_attribute(bucket)},
            )
            if lowered is not None:
                written[partition] = bucket
        return written


def _unreadable(item: Item, partition: int, bucket: str, error: Exception) -> UnreadableRow:
    """An item ``item_to_job`` refused, by its keys (the table's and the due index's, always there)."""
    job_id, key = item["job_id"].get("S", "?"), item.get("due_key", {}).get("S", "?")
    return UnreadableRow(job_id, partition, bucket, key, unreadable_error(error))


def item_to_mark(item: Item) -> tuple[int, str]:
    """A low-water mark as stored: (partition, the oldest minute bucket that may hold rows)."""
    return int(item["pk"]["S"].split("#")[1]), item["low_water"]["S"]


def mark_key(partition: int) -> Item:
    return {"pk": string_attribute(f"partition#{partition:02d}"), "sk": string_attribute("watermark")}
