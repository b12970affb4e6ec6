"""What a team finds its jobs by, and each job's change history: items of the control table written in the
same transaction as the job write they follow (``DynamoCatalog.insert_job``, ``replace_job``,
``remove_job``), so they never disagree with the jobs.

- a label pair:  pk ``label#<team>#<key>=<value>``, sk ``<job id>``; one Query lists a pair's jobs.
- a name word:   pk ``words#<team>``, sk ``<word>#<job id>``; ``begins_with(sk, :word)`` lists the jobs with
  a word of their name starting with a search word (``duetime.domain.labels.name_words``).
- a calendar:    pk ``calendar-jobs#<team>#<calendar name>``, sk ``<job id>``: the jobs that use a calendar
  (``JobSpec.calendar_names``), which a calendar change re-plans and a delete names.
- a key:         pk ``jobkey#<team>``, sk ``<key>``: the job that has it (``job_id``), written when the job
  takes its key under JOB_KEY_IS_FREE (keys are unique in a team) and deleted with the job.
- a change:      pk ``history#<job id>``, sk ``<instant, ms>#<nonce>``, TTL 90 days; newest first.

The index items carry no condition of their own: the job write they ride with is conditioned
(JOB_IS_NEW, JOB_VERSION_IS), and if it loses its race, the whole transaction, index items included, does
not happen. The history item's key is new by construction (a nonce)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from duetime.adapters.dynamodb import conditions as c
from duetime.adapters.dynamodb.codec import Item, number_attribute, stamped, string_attribute
from duetime.adapters.dynamodb.tables import TableNames
from duetime.domain.catalog import CalendarGone, KeyTaken
from duetime.domain.job_history import HISTORY_KEPT, JobChange
from duetime.domain.labels import name_words
from duetime.domain.models import Job
from duetime.domain.timeutil import iso_z

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import QueryInputTypeDef, TransactWriteItemTypeDef


def label_pk(team: str, key: str, value: str) -> str:
    return f"label#{team}#{key}={value}"


def words_pk(team: str) -> str:
    return f"words#{team}"


def calendar_jobs_pk(team: str, name: str) -> str:
    return f"calendar-jobs#{team}#{name}"


def job_key_pk(team: str) -> str:
    return f"jobkey#{team}"


def history_pk(job_id: str) -> str:
    return f"history#{job_id}"


def change_item(pk: str, at: datetime, action: str, actor: str, fields: dict[str, Any]) -> Item:
    """A history row (a job's change, a calendar's): its key new by construction (the instant to the
    millisecond and a nonce), kept ``HISTORY_KEPT`` (TTL ``ttl``)."""
    return {
        "pk": string_attribute(pk),
        "sk": string_attribute(f"{at.isoformat(timespec='milliseconds')}#{secrets.token_hex(4)}"),
        "at": string_attribute(iso_z(at)),
        "action": string_attribute(action),
        "actor": string_attribute(actor),
        "fields": string_attribute(json.dumps(fields, sort_keys=True, default=str)),
        "ttl": number_attribute(int((at + HISTORY_KEPT).timestamp())),
    }


def index_keys(job: Job) -> list[tuple[str, str]]:
    """The (pk, sk) of every index item ``job`` has: one per label pair, one per name word, one per calendar
    it uses."""
    labels = [(label_pk(job.team, k, v), job.id) for k, v in sorted(job.labels.items())]
    words = [(words_pk(job.team), f"{word}#{job.id}") for word in name_words(job.name)]
    calendars = [(calendar_jobs_pk(job.team, name), job.id) for name in job.calendar_names]
    return labels + words + calendars


class JobIndex:
    """The label, word and history items of the control table (a part of ``DynamoCatalog``)."""

    client: DynamoDBClient
    names: TableNames
    write_format: Callable[[], int]  # the stored format a new item is written in (``DynamoCatalog``)

    def _index_writes(self, before: Job | None, after: Job | None) -> list[TransactWriteItemTypeDef]:
        """The transaction items that take the index from ``before``'s items to ``after``'s: a Delete for
        each item only ``before`` has, a Put for each only ``after`` has (none for those both have)."""
        old = set(index_keys(before)) if before else set()
        new = set(index_keys(after)) if after else set()
        table = self.names.control
        writes: list[TransactWriteItemTypeDef] = [
            {"Delete": {"TableName": table, "Key": {"pk": string_attribute(pk), "sk": string_attribute(sk)}}}
            for pk, sk in sorted(old - new)
        ]
        for pk, sk in sorted(new - old):
            assert after is not None
            writes.append(
                {
                    "Put": {
                        "TableName": table,
                        "Item": {
                            "pk": string_attribute(pk),
                            "sk": string_attribute(sk),
                            "job_id": string_attribute(after.id),
                        },
                    }
                }
            )
        return writes

    def _history_put(self, change: JobChange) -> TransactWriteItemTypeDef:
        item = change_item(history_pk(change.job_id), change.at, change.action, change.actor, change.fields)
        item = stamped({**item, "team": string_attribute(change.team)}, self.write_format())
        return {"Put": {"TableName": self.names.control, "Item": item}}

    def _query_control(
        self, key_condition: str, values: Item, limit: int, start: Item | None
    ) -> tuple[list[Item], Item | None]:
        query: QueryInputTypeDef = {
            "TableName": self.names.control,
            "KeyConditionExpression": key_condition,
            "ExpressionAttributeValues": values,
            "Limit": limit,
        }
        if start:
            query["ExclusiveStartKey"] = start
        response = self.client.query(**query)
        return response.get("Items", []), response.get("LastEvaluatedKey")

    def calendar_users(self, team_id: str, name: str, limit: int) -> list[str]:
        """Ids of the team's jobs that use calendar ``name`` (at most ``limit``), by id, read consistently."""
        response = self.client.query(
            TableName=self.names.control,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": string_attribute(calendar_jobs_pk(team_id, name))},
            ConsistentRead=True,
            Limit=limit,
        )
        return [item["job_id"]["S"] for item in response.get("Items", [])]

    def _calendar_counts(
        self, before: Job | None, after: Job | None
    ) -> list[tuple[Exception, TransactWriteItemTypeDef]]:
        """The updates of the calendars' items a job write carries: a calendar
        the job starts using counts one more job (``jobs_using``) and must exist (CALENDAR_IS_LIVE); one it
        stops using counts one fewer (its item is never deleted: ``calendars.py``). Each with what its
        condition failing means (``CalendarGone``)."""
        old = set(before.calendar_names) if before else set()
        new = set(after.calendar_names) if after else set()
        job = after or before
        assert job is not None
        updates: list[tuple[Exception, TransactWriteItemTypeDef]] = []
        for name, delta in [*((n, 1) for n in sorted(new - old)), *((n, -1) for n in sorted(old - new))]:
            update: TransactWriteItemTypeDef = {
                "Update": {
                    "TableName": self.names.control,
                    "Key": {"pk": string_attribute(f"calendar#{job.team}"), "sk": string_attribute(name)},
                    "UpdateExpression": "ADD jobs_using :delta",
                    "ExpressionAttributeValues": {":delta": number_attribute(delta)},
                }
            }
            if delta > 0:
                update["Update"]["ConditionExpression"] = c.CALENDAR_IS_LIVE.expression
            updates.append((CalendarGone(job.team, name), update))
        return updates

    def job_id_by_key(self, team_id: str, key: str) -> str | None:
        item = self.client.get_item(
            TableName=self.names.control,
            Key={"pk": string_attribute(job_key_pk(team_id)), "sk": string_attribute(key)},
            ConsistentRead=True,
        ).get("Item")
        return item["job_id"]["S"] if item else None

    def _key_writes(
        self, before: Job | None, after: Job | None
    ) -> list[tuple[Exception, TransactWriteItemTypeDef]]:
        """The key items a job write carries, each with what its condition failing means: a Put
        (JOB_KEY_IS_FREE: else ``KeyTaken``) when the job takes a key, a Delete of the key it gives up (with
        the job)."""
        old = before.key if before else None
        new = after.key if after else None
        job = after or before
        assert job is not None
        writes: list[tuple[Exception, TransactWriteItemTypeDef]] = []
        if old is not None and old != new:
            key = {"pk": string_attribute(job_key_pk(job.team)), "sk": string_attribute(old)}
            writes.append(
                (
                    RuntimeError("a key item's delete has no condition"),
                    {"Delete": {"TableName": self.names.control, "Key": key}},
                )
            )
        if new is not None and new != old:
            item = {
                "pk": string_attribute(job_key_pk(job.team)),
                "sk": string_attribute(new),
                "job_id": string_attribute(job.id),
            }
            put: TransactWriteItemTypeDef = {
                "Put": {
                    "TableName": self.names.control,
                    "Item": item,
                    "ConditionExpression": c.JOB_KEY_IS_FREE.expression,
                }
            }
            writes.append((KeyTaken(job.team, new), put))
        return writes

    def label_job_ids(
        self, team: str, key: str, value: str, limit: int, start: Item | None
    ) -> tuple[list[str], Item | None]:
        """Ids of the team's jobs labelled ``key: value``, by id; and where the next page starts."""
        items, last = self._query_control(
            "pk = :pk", {":pk": string_attribute(label_pk(team, key, value))}, limit, start
        )
        return [item["job_id"]["S"] for item in items], last

    def word_job_ids(
        self, team: str, prefix: str, limit: int, start: Item | None
    ) -> tuple[list[str], Item | None]:
        """Ids of the team's jobs with a name word starting with ``prefix`` (lowercase), by word; a job with
        two such words is listed under each, so callers drop repeats."""
        items, last = self._query_control(
            "pk = :pk AND begins_with(sk, :prefix)",
            {":pk": string_attribute(words_pk(team)), ":prefix": string_attribute(prefix)},
            limit,
            start,
        )
        return [item["job_id"]["S"] for item in items], last

    def job_changes(self, job_id: str, limit: int, start: Item | None) -> tuple[list[JobChange], Item | None]:
        """The job's recorded changes, newest first (those of the last 90 days, and maybe a little older:
        DynamoDB's TTL deletes within days of expiry)."""
        query: QueryInputTypeDef = {
            "TableName": self.names.control,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": string_attribute(history_pk(job_id))},
            "ScanIndexForward": False,
            "Limit": limit,
            "ConsistentRead": True,
        }
        if start:
            query["ExclusiveStartKey"] = start
        response = self.client.query(**query)
        changes = [
            JobChange(
                job_id=job_id,
                team=item["team"]["S"],
                at=datetime.fromisoformat(item["at"]["S"]),
                action=item["action"]["S"],
                actor=item["actor"]["S"],
                fields=json.loads(item["fields"]["S"]),
            )
            for item in response.get("Items", [])
        ]
        return changes, response.get("LastEvaluatedKey")
