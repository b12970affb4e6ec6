"""What the API reads and writes: teams and their tokens (``team_records.py``), a team's jobs and runs.

Kept apart from ``store.py`` (the scheduling hot path). Same tables, same named conditions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from duetime.adapters.dynamodb import conditions as c
from duetime.adapters.dynamodb import partiql
from duetime.adapters.dynamodb.calendars import DynamoCalendars
from duetime.adapters.dynamodb.codec import (
    Item,
    item_to_job,
    item_to_run,
    job_to_item,
    number_attribute,
    reap_shard,
    run_key,
    run_to_item,
    string_attribute,
    time_attribute,
)
from duetime.adapters.dynamodb.conditional import conditional_write
from duetime.adapters.dynamodb.cursors import (
    CONTROL_KEY,
    RUNS_KEY,
    TEAM_JOBS_KEY,
    decode_cursor,
    encode_cursor,
)
from duetime.adapters.dynamodb.job_index import JobIndex, history_pk, label_pk, words_pk
from duetime.adapters.dynamodb.reads import batch_get, read_job, read_run, team_key
from duetime.adapters.dynamodb.reap_checks import DEFAULT_LEASE_CHECK, waiting_check
from duetime.adapters.dynamodb.tables import TEAM_JOBS_INDEX, TableNames
from duetime.adapters.dynamodb.team_records import TeamRecords
from duetime.domain.catalog import (
    IdempotencyMismatch,
    IdempotencyRecord,
    InvalidCursor,
    Page,
    QuotaExceeded,
)
from duetime.domain.job_history import JobChange
from duetime.domain.labels import matches_words
from duetime.domain.models import Job, Run, RunStatus, Team
from duetime.domain.stored_format import first_format
from duetime.ports import Catalog

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import QueryInputTypeDef, TransactWriteItemTypeDef

__all__ = [  # the domain's names, importable from here as before they moved to duetime.domain.catalog
    "DynamoCatalog",
    "IdempotencyMismatch",
    "IdempotencyRecord",
    "InvalidCursor",
    "Page",
    "QuotaExceeded",
    "decode_cursor",
    "encode_cursor",
]


def _reasons(exc: ClientError) -> list[str]:
    return [r.get("Code", "None") for r in exc.response.get("CancellationReasons") or []]


def _raise_refusal(guarded: list[tuple[Exception, TransactWriteItemTypeDef]], reasons: list[str]) -> None:
    """The exception of the first guarded item whose condition cancelled the write, raised."""
    for (refusal, _), reason in zip(guarded, reasons, strict=False):
        if reason == "ConditionalCheckFailed":
            raise refusal


class DynamoCatalog(TeamRecords, DynamoCalendars, JobIndex):
    """``duetime.ports.Catalog`` on DynamoDB: the control, jobs and runs tables ``DynamoStore`` uses."""

    def __init__(
        self,
        client: DynamoDBClient,
        names: TableNames | None = None,
        lease_check: timedelta = DEFAULT_LEASE_CHECK,
        write_format: Callable[[], int] = first_format,
    ) -> None:
        self.client = client
        self.names = names or TableNames()
        self.lease_check = lease_check  # a waiting run's reap check: its message visible + this
        self.write_format = write_format  # an item's stored format, asked as it is written

    # --- teams and tokens: team_records.TeamRecords ------------------------------------------------------

    def exact_jobs(self, team_id: str) -> int:
        return self.job_counts(team_id)[1]

    def job_counts(self, team_id: str) -> tuple[int, int]:
        """(jobs, exact-time jobs) the team holds, as counted in the transactions that wrote them."""
        item = (
            self.client.get_item(
                TableName=self.names.control, Key=team_key(team_id), ConsistentRead=True
            ).get("Item")
            or {}
        )
        return (
            int(item["job_count"]["N"]) if "job_count" in item else 0,
            int(item["exact_jobs"]["N"]) if "exact_jobs" in item else 0,
        )

    def _team_counts(self, team: Team, jobs: int, exact: int) -> TransactWriteItemTypeDef:
        """The one update of the team row a job write carries (DynamoDB allows one action per item in a
        transaction): its job count and exact-job count move by ``jobs`` and ``exact``, and a count that
        grows must stay within its quota (JOB_QUOTA_LEFT, EXACT_QUOTA_LEFT)."""
        moves = [f"{name} :{name}" for name, delta in (("job_count", jobs), ("exact_jobs", exact)) if delta]
        values: dict[str, Any] = {
            f":{name}": number_attribute(delta)
            for name, delta in (("job_count", jobs), ("exact_jobs", exact))
            if delta
        }
        conditions = ["attribute_exists(pk)"]
        if jobs > 0:
            conditions.append(f"({c.JOB_QUOTA_LEFT.expression})")
            values[":max_jobs"] = number_attribute(team.max_jobs)
        if exact > 0:
            conditions.append(f"({c.EXACT_QUOTA_LEFT.expression})")
            values[":quota"] = number_attribute(team.exact_quota)
        return {
            "Update": {
                "TableName": self.names.control,
                "Key": team_key(team.team_id),
                "UpdateExpression": "ADD " + ", ".join(moves),
                "ExpressionAttributeValues": values,
                "ConditionExpression": " AND ".join(conditions),
            }
        }

    def _quota_used_up(self, team: Team, jobs: int, exact: int) -> QuotaExceeded:
        """Which quota a cancelled team-count update ran into, read back from the counts."""
        held_jobs, held_exact = self.job_counts(team.team_id)
        if jobs > 0 and held_jobs + jobs > team.max_jobs:
            return QuotaExceeded(team.team_id, "jobs")
        if exact > 0 and held_exact + exact > team.exact_quota:
            return QuotaExceeded(team.team_id, "exact")
        return QuotaExceeded(team.team_id, "jobs" if jobs > 0 else "exact")  # the count moved meanwhile

    # --- jobs -------------------------------------------------------------------------------------------

    def insert_job(
        self,
        job: Job,
        team: Team,
        now: datetime,
        idempotency: IdempotencyRecord | None,
        change: JobChange | None = None,
    ) -> str:
        """Write a new job (and its idempotency key, its exact-quota count, its label and name-word index
        items and its history entry ``change``) in one transaction.

        Returns the id of the job the request stands for: ``job.id``, or the job an earlier request with
        the same idempotency key created. Raises ``QuotaExceeded`` or ``IdempotencyMismatch``.
        """
        items: list[TransactWriteItemTypeDef] = [
            {
                "Put": {
                    "TableName": self.names.jobs,
                    "Item": job_to_item(job, now, self.write_format()),
                    "ConditionExpression": c.JOB_IS_NEW.expression,
                }
            }
        ]
        items.append(self._team_counts(team, jobs=+1, exact=+1 if job.exact else 0))
        items += self._index_writes(None, job) + ([self._history_put(change)] if change else [])
        guarded = self._calendar_counts(None, job) + self._key_writes(None, job)
        first_guarded = len(items)
        items += [item for _, item in guarded]
        if idempotency is not None:  # last: a cancellation's last reason is the key's
            items.append(
                {
                    "Put": {
                        "TableName": self.names.control,
                        "Item": self._idem_item(idempotency, now),
                        "ConditionExpression": c.TEAM_IS_NEW.expression,
                    }
                }
            )
        try:
            self.client.transact_write_items(TransactItems=items)
            return job.id
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            reasons = _reasons(exc)
        if idempotency is not None and reasons[-1] == "ConditionalCheckFailed":
            earlier = self._idem_lookup(idempotency)
            if earlier is None:  # pragma: no cover - it was there a moment ago; the key has no TTL
                raise RuntimeError("idempotency record vanished")
            if earlier.request_hash != idempotency.request_hash:
                raise IdempotencyMismatch(idempotency.key)
            return earlier.job_id
        _raise_refusal(guarded, reasons[first_guarded:])
        if reasons[1] == "ConditionalCheckFailed":
            raise self._quota_used_up(team, +1, +1 if job.exact else 0)
        raise RuntimeError(f"job insert cancelled: {reasons}")

    def _idem_key(self, record: IdempotencyRecord) -> Item:
        return {"pk": string_attribute(f"idem#{record.team}#{record.key}"), "sk": string_attribute("idem")}

    def _idem_item(self, record: IdempotencyRecord, now: datetime) -> Item:
        return {
            **self._idem_key(record),
            "request_hash": string_attribute(record.request_hash),
            "job_id": string_attribute(record.job_id),
            "created_at": time_attribute(now),
            "ttl": number_attribute(int(now.timestamp()) + 86_400),
        }

    def _idem_lookup(self, record: IdempotencyRecord) -> IdempotencyRecord | None:
        item = self.client.get_item(
            TableName=self.names.control, Key=self._idem_key(record), ConsistentRead=True
        ).get("Item")
        if not item:
            return None
        return IdempotencyRecord(record.team, record.key, item["request_hash"]["S"], item["job_id"]["S"])

    def get_job(self, job_id: str) -> Job | None:
        return read_job(self.client, self.names, job_id)

    def replace_job(
        self, before: Job, after: Job, team: Team, now: datetime, change: JobChange | None = None
    ) -> bool:
        """Write ``after`` over ``before`` if nobody changed it since (condition JOB_VERSION_IS); keeps the
        team's exact-job count, the job's index items and its history (``change``) right in the same
        transaction. False on a lost race; raises ``QuotaExceeded``."""
        items: list[TransactWriteItemTypeDef] = [
            {
                "Put": {
                    "TableName": self.names.jobs,
                    "Item": job_to_item(after, now, self.write_format()),
                    "ConditionExpression": c.JOB_VERSION_IS.expression,
                    "ExpressionAttributeValues": {
                        ":expected_version": number_attribute(before.state.version),
                        ":team": string_attribute(before.team),
                    },
                }
            }
        ]
        if after.exact != before.exact:  # second: a cancellation's reason 1 is the quota's
            items.append(self._team_counts(team, jobs=0, exact=+1 if after.exact else -1))
        items += self._index_writes(before, after) + ([self._history_put(change)] if change else [])
        guarded = self._calendar_counts(before, after) + self._key_writes(before, after)
        return self._transact_job(items, 0, +1 if after.exact and not before.exact else 0, team, guarded)

    def remove_job(self, job: Job, team: Team, change: JobChange | None = None) -> bool:
        items: list[TransactWriteItemTypeDef] = [
            {
                "Delete": {
                    "TableName": self.names.jobs,
                    "Key": {"job_id": string_attribute(job.id)},
                    "ConditionExpression": c.JOB_VERSION_IS.expression,
                    "ExpressionAttributeValues": {
                        ":expected_version": number_attribute(job.state.version),
                        ":team": string_attribute(job.team),
                    },
                }
            }
        ]
        items.append(self._team_counts(team, jobs=-1, exact=-1 if job.exact else 0))
        items += self._index_writes(job, None) + ([self._history_put(change)] if change else [])
        return self._transact_job(
            items, 0, 0, team, self._calendar_counts(job, None) + self._key_writes(job, None)
        )

    def _transact_job(
        self,
        items: list[TransactWriteItemTypeDef],
        gains_jobs: int,
        gains_exact: int,
        team: Team,
        guarded: list[tuple[Exception, TransactWriteItemTypeDef]],
    ) -> bool:
        """Run a job write with its team-count update and its ``guarded`` items (last: its calendars' counts
        and its key); False on a lost race (the job changed), raises ``QuotaExceeded`` when a count that grows
        hit its quota, and a guarded item's exception when its condition failed (``CalendarGone``,
        ``KeyTaken``)."""
        try:
            self.client.transact_write_items(TransactItems=items + [item for _, item in guarded])
            return True
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            reasons = _reasons(exc)
        _raise_refusal(guarded, reasons[len(items) :])
        if (
            (gains_jobs > 0 or gains_exact > 0)
            and len(reasons) > 1
            and reasons[1] == "ConditionalCheckFailed"
        ):
            raise self._quota_used_up(team, gains_jobs, gains_exact)
        return False

    def team_jobs(self, team_id: str, limit: int, cursor: str | None) -> Page:
        query: QueryInputTypeDef = {
            "TableName": self.names.jobs,
            "Limit": limit,
            "IndexName": TEAM_JOBS_INDEX,
            "KeyConditionExpression": "team = :team",
            "ExpressionAttributeValues": {":team": string_attribute(team_id)},
        }
        start = decode_cursor(cursor, ("team", team_id), TEAM_JOBS_KEY)
        if start:
            query["ExclusiveStartKey"] = start
        return self._page(query, "job_id", item_to_job)

    def search_jobs(
        self, team_id: str, limit: int, cursor: str | None, label: tuple[str, str] | None, words: list[str]
    ) -> Page:
        """One page of the team's jobs labelled ``label`` and/or with every word of ``words`` beginning a word
        of their name: one Query of the label's index items (else of the longest search word's), the jobs in
        one BatchGetItem, the rest of the filter applied to those. A page may hold fewer than ``limit`` jobs
        while ``cursor`` says more may follow; a job two of whose words match may come on two pages."""
        if label is not None:
            pk = label_pk(team_id, *label)
            ids, last = self.label_job_ids(
                team_id, *label, limit, decode_cursor(cursor, ("pk", pk), CONTROL_KEY)
            )
        else:
            prefix = max(words, key=len)
            start = decode_cursor(cursor, ("pk", words_pk(team_id)), CONTROL_KEY)
            if start is not None and not start["sk"]["S"].startswith(prefix):  # outside this search's keys
                raise InvalidCursor("cursor belongs to another listing")
            ids, last = self.word_job_ids(team_id, prefix, limit, start)
        ids = list(dict.fromkeys(ids))
        items = self._batch_get(self.names.jobs, "job_id", ids)
        jobs = [item_to_job(items[i]) for i in ids if i in items]
        found = [
            job
            for job in jobs
            if job.team == team_id
            and (label is None or job.labels.get(label[0]) == label[1])
            and matches_words(job.name, words)
        ]
        return Page(found, encode_cursor(last))

    def job_history(self, job_id: str, limit: int, cursor: str | None) -> Page:
        """A page of the job's changes (``JobChange``), newest first."""
        changes, last = self.job_changes(
            job_id, limit, decode_cursor(cursor, ("pk", history_pk(job_id)), CONTROL_KEY)
        )
        return Page(changes, encode_cursor(last))

    def _page(self, query: QueryInputTypeDef, key: str, decode: Callable[[Item], Any]) -> Page:
        """One page of a KEYS_ONLY index query, with the items read in one BatchGetItem, in index order."""
        response = self.client.query(**query)
        ids = [item[key]["S"] for item in response.get("Items", [])]
        items = self._batch_get(query["TableName"], key, ids)
        return Page(
            [decode(items[i]) for i in ids if i in items], encode_cursor(response.get("LastEvaluatedKey"))
        )

    def _batch_get(self, table: str, key: str, ids: Sequence[str]) -> dict[str, Item]:
        items = batch_get(self.client, table, [{key: string_attribute(i)} for i in ids])
        return {item[key]["S"]: item for item in items}

    # --- runs -------------------------------------------------------------------------------------------

    def get_run(self, run_id: str) -> Run | None:
        return read_run(self.client, self.names, run_id)

    def job_runs(self, job_id: str, limit: int, cursor: str | None) -> Page:
        """A job's runs, newest first: one Query on the runs table (keyed by job and nominal time)."""
        start = decode_cursor(cursor, ("job_id", job_id), RUNS_KEY)
        query: QueryInputTypeDef = {
            "TableName": self.names.runs,
            "KeyConditionExpression": "job_id = :job",
            "ExpressionAttributeValues": {":job": string_attribute(job_id)},
            "ScanIndexForward": False,
            "ConsistentRead": True,
            "Limit": limit,
        }
        if start:
            query["ExclusiveStartKey"] = start
        response = self.client.query(**query)
        runs = [item_to_run(item) for item in response.get("Items", [])]
        return Page(runs, encode_cursor(response.get("LastEvaluatedKey")))

    def insert_run(self, run: Run) -> bool:
        """A run created by hand (trigger); False if that run id exists (condition RUN_IS_NEW)."""
        return (
            conditional_write(
                self.client.put_item,
                TableName=self.names.runs,
                Item=run_to_item(run, self.lease_check, stored_format=self.write_format()),
                ConditionExpression=c.RUN_IS_NEW.expression,
            )
            is not None
        )

    def insert_runs(self, runs: Sequence[Run]) -> list[Run]:
        """Runs created together (a backfill), each unless its run id exists (RUN_IS_NEW: the run there is
        left alone), by PartiQL INSERTs 25 a request (``partiql``); the runs written, in order.

        A run whose fire time is ahead of its creation has its message sent delayed until then, so its first
        reap check counts from its fire time. The ids must be distinct (a request may not name an item
        twice). A statement failing for another reason raises once every statement was made; the rows
        written then wait for the reaper, which sends a run still queued at its queue deadline."""
        statements = [
            partiql.insert(
                self.names.runs,
                run_to_item(
                    run,
                    self.lease_check,
                    visible_at=max(run.created_at, run.fire_at),
                    stored_format=self.write_format(),
                ),
                c.RUN_IS_NEW,
            )
            for run in runs
        ]
        written = partiql.execute(self.client, statements)
        return [run for run, new in zip(runs, written, strict=True) if new]

    def requeue_run(self, run: Run, now: datetime, queue_deadline: datetime) -> Run | None:
        """failed|dead -> queued for one more attempt (condition RUN_ENDED_UNSUCCESSFULLY)."""
        response = conditional_write(
            self.client.update_item,
            TableName=self.names.runs,
            Key=run_key(run.run_id),
            UpdateExpression=(
                "SET #status = :queued, attempt = :attempt, max_attempts = :max_attempts, "
                "queue_deadline = :deadline, reap_shard = :shard, reap_at = :check, updated_at = :now "
                "REMOVE finished_at, #owner, lease_expires_at, retry_at"
            ),
            ConditionExpression=c.RUN_ENDED_UNSUCCESSFULLY.expression,
            ExpressionAttributeNames={"#status": "status", "#owner": "owner"},
            ExpressionAttributeValues={
                ":queued": string_attribute(RunStatus.QUEUED),
                ":failed": string_attribute(RunStatus.FAILED),
                ":dead": string_attribute(RunStatus.DEAD),
                ":attempt": number_attribute(run.attempt + 1),
                ":max_attempts": number_attribute(max(run.max_attempts, run.attempt + 1)),
                ":deadline": time_attribute(queue_deadline),
                ":check": time_attribute(waiting_check(now, queue_deadline, self.lease_check)),
                ":shard": string_attribute(reap_shard(run.partition)),
                ":now": time_attribute(now),
            },
            ReturnValues="ALL_NEW",
        )
        return item_to_run(response["Attributes"]) if response else None


def _implements_the_port(catalog: DynamoCatalog) -> Catalog:
    """Never called: mypy checks here that ``DynamoCatalog`` keeps the port's signatures."""
    return catalog
