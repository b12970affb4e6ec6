"""The reaper's reads on DynamoDB: the reap index's checks that have come, and reap tickets settled."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from duetime.adapters.dynamodb import conditions as c
from duetime.adapters.dynamodb import partiql
from duetime.adapters.dynamodb.codec import (
    Item,
    item_to_run,
    number_attribute,
    reap_shard,
    run_key,
    string_attribute,
    time_attribute,
)
from duetime.adapters.dynamodb.reads import batch_get
from duetime.adapters.dynamodb.reap_checks import needs_reaper_at, next_check
from duetime.adapters.dynamodb.reap_tickets import is_ticket, listed_run_ids, ticket_key
from duetime.adapters.dynamodb.store_part import StorePart
from duetime.adapters.dynamodb.tables import REAP_INDEX
from duetime.adapters.retrying import UNPROCESSED, Sleep, resend
from duetime.domain.models import Run, RunStatus
from duetime.ports import ReapCandidate

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient


class DynamoReapIndex(StorePart):
    """``RunStore.runs_needing_attention`` and ``has_reap_work_before`` (mixed into ``DynamoStore``)."""

    def runs_needing_attention(self, partition: int, now: datetime, limit: int) -> list[ReapCandidate]:
        """The runs of the reap index's checks that have come (``reap_checks``): each read consistently;
        those whose lease expired or whose queue deadline passed are the candidates, and the others get
        their next check here (25 a request, under ``LEASE_OUTLIVES_CHECK`` or ``WAIT_OUTLIVES_CHECK``).
        A ticket's check reads the runs it lists (``_settle_tickets``)."""
        response = self.client.query(
            TableName=self.names.runs,
            IndexName=REAP_INDEX,
            KeyConditionExpression="reap_shard = :shard AND reap_at < :now",
            ExpressionAttributeValues={
                ":shard": string_attribute(reap_shard(partition)),
                ":now": time_attribute(now),
            },
            Limit=limit,
        )
        keys = [{"job_id": e["job_id"], "occurrence": e["occurrence"]} for e in response.get("Items", [])]
        if not keys:
            return []
        candidates: list[ReapCandidate] = []
        moves: list[partiql.Statement] = []
        tickets: list[Item] = []
        for item in batch_get(self.client, self.names.runs, keys, consistent=True):
            if "reap_at" not in item or item["reap_at"]["S"] >= time_attribute(now)["S"]:
                continue  # finished, or its check moved since the index was read (the index lags)
            if is_ticket(item):
                tickets.append(item)
                continue
            run = item_to_run(item)
            needs_attention_at = needs_reaper_at(run)
            if needs_attention_at is None:  # finished, its entry adopted during its call (reap_tickets)
                moves.append(self._leave_reap_index(run))
            elif _passed(needs_attention_at, now):
                candidates.append(
                    ReapCandidate(run.run_id, run.status, run.attempt, run.max_attempts, needs_attention_at)
                )
            else:
                moves.append(self._next_check(run, now))
        partiql.execute(self.client, moves)
        return candidates + self._settle_tickets(tickets, now)

    def _settle_tickets(self, tickets: Sequence[Item], now: datetime) -> list[ReapCandidate]:
        """The checks of reap tickets (``reap_tickets``): every run they list read consistently; each run
        still alive and without an entry of its own adopted (``RUN_UNCOVERED_AS_READ``) at its next check,
        or at the instant it needed the reaper when that passed (then it is a candidate); every ticket whose
        runs all needed nothing or were adopted deleted. A ticket with a lost race stays for the next pass."""
        if not tickets:
            return []
        listed: dict[str, list[int]] = defaultdict(list)  # a run found in the way may be on two tickets
        for i, ticket in enumerate(tickets):
            for run_id in listed_run_ids(ticket):
                listed[run_id].append(i)
        runs = batch_get(
            self.client, self.names.runs, [run_key(run_id) for run_id in listed], consistent=True
        )
        adoptions: list[partiql.Statement] = []
        adopted: list[tuple[str, ReapCandidate | None]] = []
        for item in runs:
            if "reap_at" in item:
                continue  # an entry of its own covers it
            run = item_to_run(item)
            needs_attention_at = needs_reaper_at(run)
            if needs_attention_at is None:
                continue  # finished: the common case, nothing written
            if _passed(needs_attention_at, now):
                check = needs_attention_at
                candidate = ReapCandidate(run.run_id, run.status, run.attempt, run.max_attempts, check)
            else:
                check, candidate = next_check(run, now, self.lease_check), None
            adoptions.append(self._adopt(run, check))
            adopted.append((run.run_id, candidate))
        unsettled: set[int] = set()
        candidates: list[ReapCandidate] = []
        for (run_id, candidate), written in zip(
            adopted, partiql.execute(self.client, adoptions), strict=True
        ):
            if not written:
                unsettled.update(listed[run_id])
            elif candidate is not None:
                candidates.append(candidate)
        settled = [ticket_key(ticket) for i, ticket in enumerate(tickets) if i not in unsettled]
        delete_items(self.client, self.names.runs, settled)
        return candidates

    def _adopt(self, run: Run, check: datetime) -> partiql.Statement:
        """A ticketed run's own entry, at ``check`` (``RUN_UNCOVERED_AS_READ``)."""
        values: Item = {
            ":status": string_attribute(run.status),
            ":attempt": number_attribute(run.attempt),
            ":reap_shard": string_attribute(reap_shard(run.partition)),
            ":reap_at": time_attribute(check),
        }
        return partiql.update(
            self.names.runs,
            run_key(run.run_id),
            c.RUN_UNCOVERED_AS_READ,
            values,
            sets=("reap_shard", "reap_at"),
        )

    def _leave_reap_index(self, run: Run) -> partiql.Statement:
        """A finished run's entry removed (``RUN_FINISHED``)."""
        return partiql.update(
            self.names.runs, run_key(run.run_id), c.RUN_FINISHED, {}, removes=("reap_shard", "reap_at")
        )

    def has_reap_work_before(self, partition: int, until: datetime) -> bool:
        response = self.client.query(
            TableName=self.names.runs,
            IndexName=REAP_INDEX,
            KeyConditionExpression="reap_shard = :shard AND reap_at < :until",
            ExpressionAttributeValues={
                ":shard": string_attribute(reap_shard(partition)),
                ":until": time_attribute(until),
            },
            Limit=1,
        )
        return bool(response.get("Items"))

    def _next_check(self, run: Run, now: datetime) -> partiql.Statement:
        """The write that moves a live run's check on (``reap_checks.next_check``)."""
        key = run_key(run.run_id)
        values: Item = {
            ":attempt": number_attribute(run.attempt),
            ":reap_at": time_attribute(next_check(run, now, self.lease_check)),
        }
        if run.status is RunStatus.RUNNING:
            values.update({":running": string_attribute(RunStatus.RUNNING), ":now": time_attribute(now)})
            return partiql.update(self.names.runs, key, c.LEASE_OUTLIVES_CHECK, values, sets=("reap_at",))
        assert run.queue_deadline is not None
        values.update(
            {":status": string_attribute(run.status), ":deadline": time_attribute(run.queue_deadline)}
        )
        return partiql.update(self.names.runs, key, c.WAIT_OUTLIVES_CHECK, values, sets=("reap_at",))


def _passed(instant: datetime, now: datetime) -> bool:
    """``instant < now`` as the store's conditions compare them: stored instants are to the second."""
    return time_attribute(instant)["S"] < time_attribute(now)["S"]


def delete_items(client: DynamoDBClient, table: str, keys: Sequence[Item], sleep: Sleep = time.sleep) -> None:
    """Unconditional deletes, 25 a BatchWriteItem, sending what DynamoDB left unprocessed again after a
    backoff (``UNPROCESSED``) until none is left."""

    def send(request: dict[str, Any]) -> dict[str, Any]:
        return client.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}

    for start in range(0, len(keys), 25):
        deletes = [{"DeleteRequest": {"Key": key}} for key in keys[start : start + 25]]
        resend(send, {table: deletes}, UNPROCESSED, sleep=sleep)
