"""Runs on DynamoDB: reads, leases, results, cancels and the reaper's writes (``RunStore``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from duetime.adapters.dynamodb import conditions as c
from duetime.adapters.dynamodb.codec import (
    Item,
    item_to_run,
    number_attribute,
    reap_shard,
    run_key,
    string_attribute,
    time_attribute,
)
from duetime.adapters.dynamodb.conditional import conditional_write
from duetime.adapters.dynamodb.reads import batch_get, read_run
from duetime.adapters.dynamodb.reap_checks import waiting_check
from duetime.adapters.dynamodb.store_part import StorePart
from duetime.domain.ids import partition_of, split_run_id
from duetime.domain.models import Run, RunResult, RunStatus
from duetime.ports import ReapCandidate

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

_STATUS = {"#status": "status"}
_OWNER = {"#owner": "owner"}


class DynamoRuns(StorePart):
    """``RunStore``'s single-run forms (mixed into ``DynamoStore``; batches: ``worker_batches.py``)."""

    def get_run(self, run_id: str) -> Run | None:
        return read_run(self.client, self.names, run_id)

    def _update_run(
        self,
        run_id: str,
        update: str,
        condition: c.Condition,
        values: Item,
        names: dict[str, str] | None = None,
    ) -> Item | None:
        """One conditional UpdateItem on a run; the new item, or None when the condition failed (or
        ``run_id`` is not a run id at all, say from a stray queue message)."""
        try:
            key = run_key(run_id)
        except ValueError:
            return None
        response = conditional_write(
            self.client.update_item,
            TableName=self.names.runs,
            Key=key,
            UpdateExpression=update,
            ConditionExpression=condition.expression,
            ExpressionAttributeValues=values,
            ExpressionAttributeNames={
                k: v
                for k, v in {**_STATUS, **_OWNER, **(names or {})}.items()
                if k in update or k in condition.expression
            },
            ReturnValues="ALL_NEW",
        )
        if response is None:
            return None
        item: Item = response["Attributes"]
        return item

    def acquire_lease(
        self, run_id: str, attempt: int, owner: str, now: datetime, lease_until: datetime
    ) -> Run | None:
        item = self._update_run(
            run_id,
            "SET #status = :running, #owner = :owner, lease_expires_at = :lease, "
            "started_at = if_not_exists(started_at, :now), updated_at = :now "
            "REMOVE queue_deadline, retry_at",
            c.RUN_WAITING_FOR_ATTEMPT,
            {
                ":queued": string_attribute(RunStatus.QUEUED),
                ":retry_wait": string_attribute(RunStatus.RETRY_WAIT),
                ":running": string_attribute(RunStatus.RUNNING),
                ":attempt": number_attribute(attempt),
                ":owner": string_attribute(owner),
                ":lease": time_attribute(lease_until),
                ":now": time_attribute(now),
            },
        )
        return item_to_run(item) if item else None

    def extend_lease(
        self, run_id: str, attempt: int, owner: str, now: datetime, lease_until: datetime
    ) -> bool:
        item = self._update_run(
            run_id,
            "SET lease_expires_at = :lease",
            c.LEASE_HELD,
            {
                ":running": string_attribute(RunStatus.RUNNING),
                ":owner": string_attribute(owner),
                ":attempt": number_attribute(attempt),
                ":now": time_attribute(now),
                ":lease": time_attribute(lease_until),
            },
        )
        return item is not None

    def return_to_queue(
        self, run_id: str, attempt: int, owner: str, now: datetime, queue_deadline: datetime
    ) -> bool:
        item = self._update_run(
            run_id,
            "SET #status = :queued, queue_deadline = :deadline, reap_shard = :shard, reap_at = :check, "
            "updated_at = :now REMOVE #owner, lease_expires_at",
            c.LEASE_OWNED,
            {
                ":running": string_attribute(RunStatus.RUNNING),
                ":queued": string_attribute(RunStatus.QUEUED),
                ":owner": string_attribute(owner),
                ":attempt": number_attribute(attempt),
                ":deadline": time_attribute(queue_deadline),
                ":shard": _shard_of(run_id),
                ":check": time_attribute(waiting_check(now, queue_deadline, self.lease_check)),
                ":now": time_attribute(now),
            },
        )
        return item is not None

    def record_result(
        self,
        run: Run,
        owner: str,
        status: RunStatus,
        result: RunResult,
        now: datetime,
        retry_at: datetime | None = None,
        queue_deadline: datetime | None = None,
    ) -> bool:
        values: Item = {
            ":running": string_attribute(RunStatus.RUNNING),
            ":owner": string_attribute(owner),
            ":attempt": number_attribute(run.attempt),
            ":new_status": string_attribute(status),
            ":result": string_attribute(result.model_dump_json(exclude_none=True)),
            ":now": time_attribute(now),
        }
        if status is RunStatus.RETRY_WAIT:
            assert retry_at is not None and queue_deadline is not None
            update = (
                "SET #status = :new_status, #result = :result, updated_at = :now, attempt = :next_attempt, "
                "retry_at = :retry_at, queue_deadline = :deadline, reap_shard = :shard, reap_at = :check "
                "REMOVE #owner, lease_expires_at"
            )
            values.update(
                {
                    ":next_attempt": number_attribute(run.attempt + 1),
                    ":retry_at": time_attribute(retry_at),
                    ":deadline": time_attribute(queue_deadline),
                    ":shard": _shard_of(run.run_id),
                    ":check": time_attribute(waiting_check(retry_at, queue_deadline, self.lease_check)),
                }
            )
        else:
            update = "SET #status = :new_status, #result = :result, updated_at = :now, finished_at = :now "
            update += "REMOVE lease_expires_at" + (", reap_shard, reap_at" if run.in_reap_index else "")
        item = self._update_run(run.run_id, update, c.LEASE_OWNED, values, {"#result": "result"})
        return item is not None

    def active_runs(self, run_ids: Sequence[str]) -> dict[str, Run]:
        return self.get_runs(run_ids)

    def get_runs(self, run_ids: Sequence[str]) -> dict[str, Run]:
        keys = []
        for run_id in dict.fromkeys(run_ids):
            try:
                keys.append(run_key(run_id))
            except ValueError:
                continue  # not a run id: no such run
        runs = [item_to_run(item) for item in batch_get(self.client, self.names.runs, keys, consistent=True)]
        return {run.run_id: run for run in runs}

    def cancel_run(self, run_id: str, now: datetime) -> Run | None:
        item = self._update_run(
            run_id,
            "SET #status = :cancelled, updated_at = :now, finished_at = :now "
            "REMOVE lease_expires_at, retry_at, queue_deadline, reap_shard, reap_at",
            c.RUN_CANCELLABLE,
            {
                ":queued": string_attribute(RunStatus.QUEUED),
                ":retry_wait": string_attribute(RunStatus.RETRY_WAIT),
                ":running": string_attribute(RunStatus.RUNNING),
                ":cancelled": string_attribute(RunStatus.CANCELLED),
                ":now": time_attribute(now),
            },
        )
        return item_to_run(item) if item else None

    def requeue_expired_lease(
        self, candidate: ReapCandidate, now: datetime, queue_deadline: datetime
    ) -> Run | None:
        item = self._update_run(
            candidate.run_id,
            "SET #status = :queued, attempt = :next_attempt, queue_deadline = :deadline, "
            "reap_shard = :shard, reap_at = :check, updated_at = :now REMOVE #owner, lease_expires_at",
            c.LEASE_EXPIRED,
            {
                ":running": string_attribute(RunStatus.RUNNING),
                ":queued": string_attribute(RunStatus.QUEUED),
                ":attempt": number_attribute(candidate.attempt),
                ":next_attempt": number_attribute(candidate.attempt + 1),
                ":deadline": time_attribute(queue_deadline),
                ":shard": _shard_of(candidate.run_id),
                ":check": time_attribute(waiting_check(now, queue_deadline, self.lease_check)),
                ":now": time_attribute(now),
            },
        )
        return item_to_run(item) if item else None

    def bury_expired_lease(self, candidate: ReapCandidate, now: datetime, result: RunResult) -> Run | None:
        item = self._update_run(
            candidate.run_id,
            "SET #status = :dead, #result = :result, updated_at = :now, finished_at = :now "
            "REMOVE #owner, lease_expires_at, reap_shard, reap_at",
            c.LEASE_EXPIRED,
            {
                ":running": string_attribute(RunStatus.RUNNING),
                ":dead": string_attribute(RunStatus.DEAD),
                ":attempt": number_attribute(candidate.attempt),
                ":result": string_attribute(result.model_dump_json(exclude_none=True)),
                ":now": time_attribute(now),
            },
            {"#result": "result"},
        )
        return item_to_run(item) if item else None

    def renew_queue_deadline(
        self, candidate: ReapCandidate, now: datetime, queue_deadline: datetime
    ) -> Run | None:
        item = self._update_run(
            candidate.run_id,
            "SET queue_deadline = :deadline, reap_shard = :shard, reap_at = :check, updated_at = :now",
            c.WAIT_EXPIRED,
            {
                ":shard": _shard_of(candidate.run_id),
                ":status": string_attribute(candidate.status),
                ":attempt": number_attribute(candidate.attempt),
                ":deadline": time_attribute(queue_deadline),
                ":check": time_attribute(waiting_check(now, queue_deadline, self.lease_check)),
                ":now": time_attribute(now),
            },
        )
        return item_to_run(item) if item else None


def _shard_of(run_id: str) -> AttributeValueTypeDef:
    """The reap shard of a run, from its job id (a run lives in its job's partition)."""
    return string_attribute(reap_shard(partition_of(split_run_id(run_id)[0])))
