"""Success-deadline watches and missing flags in the runs table (``ports.DeadlineStore``).

Both live under one key per job, ``~deadline-<job id>`` (no job id starts with "~", so a job's runs Query
never meets them):

* a **watch**, sort key ``watch#<occurrence>`` (the watched run's occurrence, its nominal time), in the reap
  index under its own shard ``w<partition:02d>`` at ``reap_at`` = the deadline. The shard is not a run
  shard (``p<partition:02d>``), so the run reaper never reads a watch, and the index entry alone (keys and
  ``reap_at``) says everything a check needs: no item read. About 150 bytes: 1 write unit in, 1 out, and 1
  each way for the index.
* the **missing flag**, sort key ``missing``, with ``since`` = the nominal time of the first missed time.

A quiet poller group (``duetime.scheduling.quiet``) does not wake for a watch: its next tick checks it, within
a minute of the deadline.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from duetime.adapters.dynamodb import conditions as c
from duetime.adapters.dynamodb import partiql
from duetime.adapters.dynamodb.codec import Item, number_attribute, string_attribute, time_attribute
from duetime.adapters.dynamodb.conditional import conditional_write
from duetime.adapters.dynamodb.reads import batch_get
from duetime.adapters.dynamodb.store_part import StorePart
from duetime.adapters.dynamodb.tables import REAP_INDEX
from duetime.domain.ids import RUN_ID_SEPARATOR, partition_of, split_run_id
from duetime.domain.models import Run
from duetime.domain.timeutil import parse_iso_z
from duetime.ports import DeadlineWatch

KEY_PREFIX = "~deadline-"
WATCH_PREFIX = "watch#"
MISSING = "missing"
WATCH_TTL_SECONDS = 7 * 86_400  # a watch nobody settled (no poller for a week) expires this long after


def watch_shard(partition: int) -> str:
    return f"w{partition:02d}"


def watch_item(watch: DeadlineWatch) -> Item:
    _, occurrence = split_run_id(watch.run_id)
    return {
        "job_id": string_attribute(KEY_PREFIX + watch.job_id),
        "occurrence": string_attribute(WATCH_PREFIX + occurrence),
        "reap_shard": string_attribute(watch_shard(watch.partition)),
        "reap_at": time_attribute(watch.deadline_at),
        "ttl": number_attribute(int(watch.deadline_at.timestamp()) + WATCH_TTL_SECONDS),
    }


def watch_from_entry(entry: Item) -> DeadlineWatch:
    """The watch an index entry names (its keys and ``reap_at``)."""
    job_id = entry["job_id"]["S"].removeprefix(KEY_PREFIX)
    occurrence = entry["occurrence"]["S"].removeprefix(WATCH_PREFIX)
    return DeadlineWatch(
        run_id=f"{job_id}{RUN_ID_SEPARATOR}{occurrence}",
        job_id=job_id,
        partition=partition_of(job_id),
        nominal_at=parse_iso_z(occurrence),
        deadline_at=parse_iso_z(entry["reap_at"]["S"]),
    )


def _watch_key(watch: DeadlineWatch) -> Item:
    _, occurrence = split_run_id(watch.run_id)
    return {
        "job_id": string_attribute(KEY_PREFIX + watch.job_id),
        "occurrence": string_attribute(WATCH_PREFIX + occurrence),
    }


def _missing_key(job_id: str) -> Item:
    return {"job_id": string_attribute(KEY_PREFIX + job_id), "occurrence": string_attribute(MISSING)}


class DeadlineWatches(StorePart):
    """``DeadlineStore`` on DynamoDB (mixed into ``DynamoStore``)."""

    def watch_statements(self, runs: Sequence[Run]) -> list[partiql.Statement]:
        """The watches of the watched ``runs`` (``WATCH_IS_NEW``: one already there stays as it is)."""
        watches = [watch for run in runs if (watch := DeadlineWatch.of(run)) is not None]
        return [partiql.insert(self.names.runs, watch_item(watch), c.WATCH_IS_NEW) for watch in watches]

    def due_watches(self, partition: int, now: datetime, limit: int) -> list[DeadlineWatch]:
        response = self.client.query(
            TableName=self.names.runs,
            IndexName=REAP_INDEX,
            KeyConditionExpression="reap_shard = :shard AND reap_at < :now",
            ExpressionAttributeValues={
                ":shard": string_attribute(watch_shard(partition)),
                ":now": time_attribute(now),
            },
            Limit=limit,
        )
        return [watch_from_entry(entry) for entry in response.get("Items", [])]

    def drop_watch(self, watch: DeadlineWatch) -> bool:
        written = conditional_write(
            self.client.delete_item,
            TableName=self.names.runs,
            Key=_watch_key(watch),
            ConditionExpression=c.WATCH_EXISTS.expression,
        )
        return written is not None

    def missing_since(self, job_id: str) -> datetime | None:
        item = self.client.get_item(
            TableName=self.names.runs, Key=_missing_key(job_id), ConsistentRead=True
        ).get("Item")
        return parse_iso_z(item["since"]["S"]) if item else None

    def missing_flags(self, job_ids: Sequence[str]) -> dict[str, datetime]:
        keys = [_missing_key(job_id) for job_id in dict.fromkeys(job_ids)]
        items = batch_get(self.client, self.names.runs, keys, consistent=False) if keys else []
        return {
            item["job_id"]["S"].removeprefix(KEY_PREFIX): parse_iso_z(item["since"]["S"]) for item in items
        }

    def flag_missing(self, job_id: str, since: datetime) -> bool:
        written = conditional_write(
            self.client.put_item,
            TableName=self.names.runs,
            Item={**_missing_key(job_id), "since": time_attribute(since)},
            ConditionExpression=c.JOB_NOT_MISSING.expression,
        )
        return written is not None

    def clear_missing(self, job_id: str, since: datetime) -> bool:
        written = conditional_write(
            self.client.delete_item,
            TableName=self.names.runs,
            Key=_missing_key(job_id),
            ConditionExpression=c.JOB_MISSING_AS_READ.expression,
            ExpressionAttributeValues={":since": time_attribute(since)},
        )
        return written is not None
