"""The DynamoDB store: jobs, runs, team slots and low-water marks, through the low-level client.

Every write names its condition (``conditions.py``). ``ConditionalCheckFailed`` is a lost race and comes
back as ``False``/``None``; anything else is a real error and propagates.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import random
import time
import zlib
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from duetime.adapters.dynamodb import conditions as c
from duetime.adapters.dynamodb import partiql
from duetime.adapters.dynamodb.codec import (
    Item,
    item_to_job,
    item_to_run,
    n,
    reap_shard,
    run_key,
    run_to_item,
    s,
    scheduling_attributes,
    t,
)
from duetime.adapters.dynamodb.deadline_watches import DeadlineWatches
from duetime.adapters.dynamodb.outbox import DynamoOutbox
from duetime.adapters.dynamodb.reads import batch_get, read_job, read_run, read_team, team_key
from duetime.adapters.dynamodb.reap_checks import (
    DEFAULT_LEASE_CHECK,
    needs_reaper_at,
    next_check,
    waiting_check,
)
from duetime.adapters.dynamodb.reap_tickets import (
    is_ticket,
    listed_run_ids,
    ticket_items,
    ticket_key,
    ticketed_run_ids,
)
from duetime.adapters.dynamodb.tables import DUE_INDEX, REAP_INDEX, TableNames
from duetime.adapters.dynamodb.worker_batches import (
    SLOTS_PER_ITEM,
    WorkerBatches,
    slot_groups_to_search,
    slot_key,
)
from duetime.adapters.retrying import UNPROCESSED, Sleep, resend
from duetime.domain.claim_plan import Claim, sets_active_run
from duetime.domain.ids import partition_of, split_run_id
from duetime.domain.models import Job, JobSpec, Run, RunResult, RunStatus, Team
from duetime.domain.timeutil import iso_z, parse_iso_z
from duetime.ports import Alert, ClaimOutcome, PollerLease, ReapCandidate

log = logging.getLogger(__name__)

_STATUS = {"#status": "status"}
_OWNER = {"#owner": "owner"}


def _lost_race(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


def conditional_write(write: Callable[..., Any], **request: Any) -> dict[str, Any] | None:
    """Make one conditional write; its response, or None when the condition failed (a lost race)."""
    try:
        response: dict[str, Any] = write(**request)
        return response
    except ClientError as exc:
        if _lost_race(exc):
            return None
        raise


class DynamoStore(WorkerBatches, DeadlineWatches, DynamoOutbox):
    """Implements ``JobStore``, ``RunStore``, ``TeamStore``, ``PollerLeaseStore``, ``DeadlineStore`` and
    ``NotificationOutbox`` (see ``duetime.ports`` for the contracts)."""

    def __init__(
        self,
        client: Any,
        names: TableNames | None = None,
        claim_concurrency: int = 4,
        lease_check: timedelta = DEFAULT_LEASE_CHECK,
    ) -> None:
        self.client = client
        self.names = names or TableNames()
        self.lease_check = lease_check  # a waiting run's reap check: its message visible + this
        self._marks_known: set[int] = set()  # partitions whose low-water mark is known to exist
        # A midnight second holds thousands of claims: their batched writes go out a few requests at a time.
        self._claim_pool = ThreadPoolExecutor(max_workers=claim_concurrency, thread_name_prefix="claim")

    # --- jobs -------------------------------------------------------------------------------------------

    def get_job(self, job_id: str) -> Job | None:
        return read_job(self.client, self.names, job_id)

    def due_jobs(
        self, partition: int, bucket: str, until: datetime, limit: int, after: str | None = None
    ) -> list[Job]:
        return [item_to_job(item) for item in self._due_items(partition, bucket, until, limit, after)]

    def due_rows(
        self, partition: int, bucket: str, until: datetime, limit: int, after: str | None = None
    ) -> list[CompactDueRow]:
        items = self._due_items(partition, bucket, until, limit, after, CompactDueRow.ATTRIBUTES)
        return [CompactDueRow(item) for item in items]

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
                ":bucket": s(f"{partition:02d}#{bucket}"),
                ":low": s(low),
                ":until": s(f"{iso_z(until)}#~"),  # '~' sorts after every job id character
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
            ExpressionAttributeValues={":bucket": s(f"{partition:02d}#{bucket}")},
            Select="COUNT",
        )
        # A COUNT still reads (and pages) at most 1 MB of the index at a time: every page counts.
        return sum(int(page.get("Count", 0)) for page in pages)

    def claim(self, claims: Sequence[Claim], now: datetime) -> ClaimOutcome:
        """A consistent read of the jobs' versions, then three ordered steps, each one BatchExecuteStatement
        per 25 writes (a few at once): every current claim's run rows (INSERT, ``RUN_IS_NEW``), the reap
        tickets of the rows that carry no reap entry of their own (``reap_tickets``: the rows of a claim of
        several runs, and every row found in the way), then each claim's schedule move (UPDATE,
        ``JOB_UNCHANGED_SINCE_READ``), whether its rows were new or already there. No transaction: each write
        is billed once (a transaction bills each item twice), and the order keeps what the transaction kept
        (``ports.JobStore.claim``): a schedule moves only past rows that exist and the reaper can find."""
        current = self._current_versions(claims)
        fresh = [claim for claim in claims if current.get(claim.plan.job.id) == claim.plan.job.state.version]
        stale = len(claims) - len(fresh)  # lost races found by the read: nothing written for them
        guarded = self._claim_guarded([claim for claim in fresh if sets_active_run(claim)], now)
        fresh = [claim for claim in fresh if not sets_active_run(claim)]
        inserts = [(index, run) for index, claim in enumerate(fresh) for run in claim.runs]
        ticketed = ticketed_run_ids(run for _, run in inserts)
        run_rows, schedule_moves = self.claim_statements(fresh, now, ticketed)
        written = self._execute_in_parallel(run_rows)
        # A row found in the way may have been made by a claim that died before its ticket: ticket it too.
        uncovered = [
            run for (_, run), new in zip(inserts, written, strict=True) if not new or run.run_id in ticketed
        ]
        tickets = self._write_tickets(uncovered)
        watches = self.watch_statements([run for _, run in inserts])  # before the moves (DeadlineStore)
        self._execute_in_parallel(watches)
        moved = self._execute_in_parallel(schedule_moves)
        landed = [claim for claim, move_landed in zip(fresh, moved, strict=True) if move_landed]
        landed += guarded.landed
        skipped = self._record_skipped(landed)
        skip_writes = sum(len(claim.skipped) for claim in landed)
        created: list[Run] = []
        requeued: list[Run] = []
        for (index, run), new in zip(inserts, written, strict=True):
            if new:  # queued whatever the move: a row once written is always sent
                indexed = run.run_id not in ticketed
                if run.in_reap_index is not indexed:  # copied only to change it: most rows have a reap entry
                    run = run.model_copy(update={"in_reap_index": indexed})
                created.append(run)
            elif moved[index]:
                requeued.append(run)  # in the way of a move that landed: perhaps never sent (a cut claim)
        existing = len(inserts) - len(created)
        if existing:
            log.info(
                "claims found run rows already there (a claim cut between its steps, a concurrent poller, a "
                "restored table); the rows were left as they were",
                extra={"count": existing, "requeued": len(requeued)},
            )
        batch = partiql.BATCH_STATEMENTS_MAX
        return ClaimOutcome(
            runs=created + guarded.created,
            claimed_jobs=sum(moved) + len(guarded.landed),
            lost_races=stale + len(moved) - sum(moved) + guarded.lost,
            write_requests=sum(
                math.ceil(k / batch) for k in (len(inserts), tickets, len(watches), len(fresh), skip_writes)
            )
            + guarded.requests,
            existing_runs=existing + len(guarded.in_the_way),
            requeued=requeued + [run for claim, run in guarded.in_the_way if claim in guarded.landed],
            skipped=skipped,
        )

    def _claim_guarded(self, claims: Sequence[Claim], now: datetime) -> _GuardedClaims:
        """Claims that create runs of a job held to an overlap policy (``claim_plan.sets_active_run``): for
        each, its run rows (``RUN_IS_NEW``) and its schedule move, which names the last of them the job's
        active run (``JOB_UNCHANGED_SINCE_READ``), in one transaction, so no run of the job exists unfinished
        without being the active run the next claim reads. A row already there (a row written by hand, a
        restored table) is left alone: the transaction is made again without it, and the move still names
        it. Such claims are one job's one or two runs, a few a minute; each transaction bills its writes
        twice."""
        done = _GuardedClaims()
        for claim in claims:
            rows = [
                partiql.insert(self.names.runs, run_to_item(run, self.lease_check), c.RUN_IS_NEW)
                for run in claim.runs
            ]
            pending = list(zip(claim.runs, rows, strict=True))
            move = self._schedule_move(claim, now)
            watches = self.watch_statements(claim.runs)  # before the transaction moves the schedule
            if watches:
                done.requests += 1
                partiql.execute(self.client, watches)
            while True:
                done.requests += 1
                failed = partiql.transact(self.client, [row for _, row in pending] + [move])
                if failed is None:
                    done.landed.append(claim)
                    done.created += [run for run, _ in pending]
                    break
                if failed[-1]:  # the job moved since it was read: a lost race, nothing written
                    done.lost += 1
                    break
                if not any(failed):  # cancelled, yet no condition failed: not a race to resolve here
                    raise partiql.StatementFailed("TransactionCanceled", "no statement's condition failed")
                done.in_the_way += [
                    (claim, run) for (run, _), lost in zip(pending, failed, strict=False) if lost
                ]
                pending = [entry for entry, lost in zip(pending, failed, strict=False) if not lost]
        return done

    def _record_skipped(self, claims: Sequence[Claim]) -> list[Run]:
        """The skipped due times of claims whose schedule move landed, as finished rows (INSERT,
        ``RUN_IS_NEW``: a row already there stays as it is); the rows written. Written after the move, so
        only the winner of a race records its decision; a claim cut before this step loses only the record
        (nothing was to run)."""
        runs = [run for claim in claims for run in claim.skipped]
        statements = [partiql.insert(self.names.runs, run_to_item(run), c.RUN_IS_NEW) for run in runs]
        written = self._execute_in_parallel(statements)
        return [run for run, new in zip(runs, written, strict=True) if new]

    def _write_tickets(self, runs: Sequence[Run]) -> int:
        """The reap tickets of ``runs`` (``reap_tickets.ticket_items``), written before any schedule moves
        past them; how many. A ticket not written raises, and the claim moves no schedule: its rows are then
        found in the way by the next claim, which tickets them."""
        if not runs:
            return 0
        items = ticket_items(runs, self.lease_check, max(run.expires_at_epoch for run in runs))
        statements = [partiql.insert(self.names.runs, item, c.TICKET_IS_NEW) for item in items]
        if not all(self._execute_in_parallel(statements)):
            raise partiql.StatementFailed("TicketExists", "a reap ticket's random key was taken")
        return len(items)

    def _current_versions(self, claims: Sequence[Claim]) -> dict[str, int]:
        """Each claimed job's version as stored now (a consistent BatchGetItem of the key and the version;
        a deleted job is missing). A claim read from the due index or the preload may be older than an edit
        that landed since: it must not write a run row for a time the edit moved or paused."""
        keys = [{"job_id": s(job_id)} for job_id in dict.fromkeys(claim.plan.job.id for claim in claims)]
        wanted = ("job_id", "version")
        items = batch_get(self.client, self.names.jobs, keys, consistent=True, attributes=wanted)
        return {item["job_id"]["S"]: int(item["version"]["N"]) for item in items}

    def claim_statements(
        self, claims: Sequence[Claim], now: datetime, ticketed: Collection[str] = ()
    ) -> tuple[list[partiql.Statement], list[partiql.Statement]]:
        """The claims' writes, in the order ``claim`` makes them: every run row (claim by claim; those in
        ``ticketed`` without a reap entry of their own), then every schedule move (one a claim)."""
        rows = [
            partiql.insert(
                self.names.runs, run_to_item(run, self.lease_check, run.run_id not in ticketed), c.RUN_IS_NEW
            )
            for claim in claims
            for run in claim.runs
        ]
        return rows, [self._schedule_move(claim, now) for claim in claims]

    def _execute_in_parallel(self, statements: Sequence[partiql.Statement]) -> list[bool]:
        """``partiql.execute`` for many statements, a request of 25 per thread of the claim pool."""
        size = partiql.BATCH_STATEMENTS_MAX
        chunks = [statements[i : i + size] for i in range(0, len(statements), size)]
        if len(chunks) <= 1:
            return partiql.execute(self.client, statements) if statements else []
        results = self._claim_pool.map(lambda chunk: partiql.execute(self.client, chunk), chunks)
        return [written for chunk in results for written in chunk]

    def _schedule_move(self, claim: Claim, now: datetime) -> partiql.Statement:
        """The claim's schedule move: the job's next due time and the due index's keys, if it is still the
        version the poller read (``JOB_UNCHANGED_SINCE_READ``)."""
        job = claim.plan.job
        values, removes = scheduling_attributes(job, claim.plan.next_state, now)
        values["updated_at"] = t(now)
        bound: Item = {f":{name}": value for name, value in values.items()}
        bound[":expected_version"] = n(job.state.version)
        return partiql.update(
            self.names.jobs,
            {"job_id": s(job.id)},
            c.JOB_UNCHANGED_SINCE_READ,
            bound,
            sets=tuple(values),
            removes=tuple(removes),
        )

    # --- low-water marks ----------------------------------------------------------------------------------

    def low_water_marks(self, partitions: Sequence[int]) -> dict[int, str]:
        items = batch_get(self.client, self.names.control, [_mark_key(p) for p in partitions])
        return {int(item["pk"]["S"].split("#")[1]): item["low_water"]["S"] for item in items}

    def ensure_low_water_mark(self, partition: int, bucket: str) -> None:
        if partition in self._marks_known:
            return
        conditional_write(
            self.client.put_item,
            TableName=self.names.control,
            Item={**_mark_key(partition), "low_water": s(bucket)},
            ConditionExpression=c.WATERMARK_MISSING.expression,
        )
        self._marks_known.add(partition)

    def advance_low_water_marks(self, marks: Mapping[int, str]) -> None:
        """One BatchExecuteStatement per 25 marks (``WATERMARK_BEHIND``): at a minute's turn a poller moves
        all of its partitions' marks, 64 single writes before."""
        statements = [
            partiql.update(
                self.names.control,
                _mark_key(partition),
                c.WATERMARK_BEHIND,
                {":low_water": s(bucket), ":bucket": s(bucket)},
                sets=("low_water",),
            )
            for partition, bucket in marks.items()
        ]
        self._execute_in_parallel(statements)

    # --- runs -------------------------------------------------------------------------------------------

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
                ":queued": s(RunStatus.QUEUED),
                ":retry_wait": s(RunStatus.RETRY_WAIT),
                ":running": s(RunStatus.RUNNING),
                ":attempt": n(attempt),
                ":owner": s(owner),
                ":lease": t(lease_until),
                ":now": t(now),
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
                ":running": s(RunStatus.RUNNING),
                ":owner": s(owner),
                ":attempt": n(attempt),
                ":now": t(now),
                ":lease": t(lease_until),
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
                ":running": s(RunStatus.RUNNING),
                ":queued": s(RunStatus.QUEUED),
                ":owner": s(owner),
                ":attempt": n(attempt),
                ":deadline": t(queue_deadline),
                ":shard": _shard_of(run_id),
                ":check": t(waiting_check(now, queue_deadline, self.lease_check)),
                ":now": t(now),
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
            ":running": s(RunStatus.RUNNING),
            ":owner": s(owner),
            ":attempt": n(run.attempt),
            ":new_status": s(status),
            ":result": s(result.model_dump_json(exclude_none=True)),
            ":now": t(now),
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
                    ":next_attempt": n(run.attempt + 1),
                    ":retry_at": t(retry_at),
                    ":deadline": t(queue_deadline),
                    ":shard": _shard_of(run.run_id),
                    ":check": t(waiting_check(retry_at, queue_deadline, self.lease_check)),
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
                ":queued": s(RunStatus.QUEUED),
                ":retry_wait": s(RunStatus.RETRY_WAIT),
                ":running": s(RunStatus.RUNNING),
                ":cancelled": s(RunStatus.CANCELLED),
                ":now": t(now),
            },
        )
        return item_to_run(item) if item else None

    def runs_needing_attention(self, partition: int, now: datetime, limit: int) -> list[ReapCandidate]:
        """The runs of the reap index's checks that have come (``reap_checks``): each read consistently;
        those whose lease expired or whose queue deadline passed are the candidates, and the others get
        their next check here (25 a request, under ``LEASE_OUTLIVES_CHECK`` or ``WAIT_OUTLIVES_CHECK``).
        A ticket's check reads the runs it lists (``_settle_tickets``)."""
        response = self.client.query(
            TableName=self.names.runs,
            IndexName=REAP_INDEX,
            KeyConditionExpression="reap_shard = :shard AND reap_at < :now",
            ExpressionAttributeValues={":shard": s(reap_shard(partition)), ":now": t(now)},
            Limit=limit,
        )
        keys = [{"job_id": e["job_id"], "occurrence": e["occurrence"]} for e in response.get("Items", [])]
        if not keys:
            return []
        candidates: list[ReapCandidate] = []
        moves: list[partiql.Statement] = []
        tickets: list[Item] = []
        for item in batch_get(self.client, self.names.runs, keys, consistent=True):
            if "reap_at" not in item or item["reap_at"]["S"] >= t(now)["S"]:
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
        _delete_items(self.client, self.names.runs, settled)
        return candidates

    def _adopt(self, run: Run, check: datetime) -> partiql.Statement:
        """A ticketed run's own entry, at ``check`` (``RUN_UNCOVERED_AS_READ``)."""
        values: Item = {
            ":status": s(run.status),
            ":attempt": n(run.attempt),
            ":reap_shard": s(reap_shard(run.partition)),
            ":reap_at": t(check),
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
            ExpressionAttributeValues={":shard": s(reap_shard(partition)), ":until": t(until)},
            Limit=1,
        )
        return bool(response.get("Items"))

    def _next_check(self, run: Run, now: datetime) -> partiql.Statement:
        """The write that moves a live run's check on (``reap_checks.next_check``)."""
        key = run_key(run.run_id)
        values: Item = {":attempt": n(run.attempt), ":reap_at": t(next_check(run, now, self.lease_check))}
        if run.status is RunStatus.RUNNING:
            values.update({":running": s(RunStatus.RUNNING), ":now": t(now)})
            return partiql.update(self.names.runs, key, c.LEASE_OUTLIVES_CHECK, values, sets=("reap_at",))
        assert run.queue_deadline is not None
        values.update({":status": s(run.status), ":deadline": t(run.queue_deadline)})
        return partiql.update(self.names.runs, key, c.WAIT_OUTLIVES_CHECK, values, sets=("reap_at",))

    def requeue_expired_lease(
        self, candidate: ReapCandidate, now: datetime, queue_deadline: datetime
    ) -> Run | None:
        item = self._update_run(
            candidate.run_id,
            "SET #status = :queued, attempt = :next_attempt, queue_deadline = :deadline, "
            "reap_shard = :shard, reap_at = :check, updated_at = :now REMOVE #owner, lease_expires_at",
            c.LEASE_EXPIRED,
            {
                ":running": s(RunStatus.RUNNING),
                ":queued": s(RunStatus.QUEUED),
                ":attempt": n(candidate.attempt),
                ":next_attempt": n(candidate.attempt + 1),
                ":deadline": t(queue_deadline),
                ":shard": _shard_of(candidate.run_id),
                ":check": t(waiting_check(now, queue_deadline, self.lease_check)),
                ":now": t(now),
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
                ":running": s(RunStatus.RUNNING),
                ":dead": s(RunStatus.DEAD),
                ":attempt": n(candidate.attempt),
                ":result": s(result.model_dump_json(exclude_none=True)),
                ":now": t(now),
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
                ":status": s(candidate.status),
                ":attempt": n(candidate.attempt),
                ":deadline": t(queue_deadline),
                ":check": t(waiting_check(now, queue_deadline, self.lease_check)),
                ":now": t(now),
            },
        )
        return item_to_run(item) if item else None

    # --- teams and concurrency slots --------------------------------------------------------------------

    def get_team(self, team_id: str) -> Team | None:
        return read_team(self.client, self.names, team_id)

    def put_team(self, team: Team) -> None:
        """Create or update a team's settings (its job counts are left alone; its revision goes up)."""
        self.client.update_item(
            TableName=self.names.control,
            Key=team_key(team.team_id),
            UpdateExpression="SET team = :team ADD revision :one",
            ExpressionAttributeValues={":team": s(team.model_dump_json()), ":one": n(1)},
        )

    def acquire_slot(self, team: Team, run_id: str, now: datetime, lease_until: datetime) -> int | None:
        # A random first guess costs one write when the team is far from its cap; after a miss, read a few
        # groups of slots (one query each, groups in random order) and try their free ones.
        first = random.randrange(team.max_concurrency)
        if self._take_slot(team.team_id, first, run_id, now, lease_until):
            return first
        for group in slot_groups_to_search(team.max_concurrency):
            for slot in self._free_slots(team, group, now):
                if slot != first and self._take_slot(team.team_id, slot, run_id, now, lease_until):
                    return slot
        return None

    def _slot_write(self, team_id: str, slot: int, update: str, condition: str, values: Item) -> bool:
        """One conditional write to a slot item; False when its condition says the slot is not ours."""
        written = conditional_write(
            self.client.update_item,
            TableName=self.names.control,
            Key=slot_key(team_id, slot),
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeValues=values,
        )
        return written is not None

    def _take_slot(self, team_id: str, slot: int, run_id: str, now: datetime, lease_until: datetime) -> bool:
        k = slot % SLOTS_PER_ITEM
        values = {f":run_{k}": s(run_id), ":until": t(lease_until), ":now": t(now)}
        update = f"SET holder_{k} = :run_{k}, until_{k} = :until"
        return self._slot_write(team_id, slot, update, c.SLOT_FREE.for_slots([k]).expression, values)

    def _free_slots(self, team: Team, group: int, now: datetime) -> list[int]:
        """The free slots of one group, shuffled (one consistent Query of its partition key)."""
        free = self.slot_group_state(team, group, now)[0]
        random.shuffle(free)
        return free

    def extend_slot(self, team_id: str, slot: int, run_id: str, lease_until: datetime) -> bool:
        k = slot % SLOTS_PER_ITEM
        values = {f":run_{k}": s(run_id), ":until": t(lease_until)}
        update = f"SET until_{k} = :until"
        return self._slot_write(team_id, slot, update, c.SLOT_HELD.for_slots([k]).expression, values)

    def release_slot(self, team_id: str, slot: int, run_id: str) -> None:
        k = slot % SLOTS_PER_ITEM
        update = f"REMOVE holder_{k}, until_{k}"
        condition = c.SLOT_HELD.for_slots([k]).expression
        self._slot_write(team_id, slot, update, condition, {f":run_{k}": s(run_id)})

    # --- poller leases (one item per partition group; see ``duetime.scheduling.poller_lease``)
    # ----------------------

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
            {":me": s(me), ":now": _ms(now), ":until": _ms(until), ":zero": n(0), ":one": n(1)},
        )

    def renew_poller_lease(self, group: str, me: str, now: datetime, until: datetime) -> PollerLease | None:
        return self._lease_write(
            group,
            "SET expires_at = :until",
            c.POLLER_LEASE_HELD,
            {":me": s(me), ":now": _ms(now), ":until": _ms(until)},
        )

    def release_poller_lease(self, group: str, me: str) -> bool:
        released = self._lease_write(
            group, "REMOVE holder, since, expires_at, handover_at", c.POLLER_LEASE_MINE, {":me": s(me)}
        )
        return released is not None

    def register_poller_successor(self, group: str, me: str) -> PollerLease | None:
        return self._lease_write(group, "SET successor = :me", c.POLLER_SUCCESSOR_VACANT, {":me": s(me)})

    def withdraw_poller_successor(self, group: str, me: str) -> bool:
        withdrawn = self._lease_write(
            group, "REMOVE successor, handover_at", c.POLLER_SUCCESSOR_IS_ME, {":me": s(me)}
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
                ":me": s(me),
                ":successor": s(successor),
                ":at": _ms(at),
                ":now": _ms(now),
                ":until": _ms(until),
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
            {":me": s(me), ":holder": s(holder), ":at": _ms(at), ":until": _ms(until), ":one": n(1)},
        )

    def withdraw_poller_offer(self, group: str, me: str, at: datetime) -> PollerLease | None:
        return self._lease_write(
            group,
            "REMOVE handover_at, successor",
            c.POLLER_HANDOVER_UNANSWERED,
            {":me": s(me), ":at": _ms(at)},
        )

    def wake_poller_group(self, group: str) -> PollerLease:
        response = self.client.update_item(
            TableName=self.names.control,
            Key=_lease_key(group),
            UpdateExpression="ADD wakes :one",  # unconditional: a wake is counted whoever holds the lease
            ExpressionAttributeValues={":one": n(1)},
            ReturnValues="ALL_NEW",
        )
        return _item_to_lease(group, response.get("Attributes", {}))

    def release_quiet_poller_lease(self, group: str, me: str, wakes_seen: int) -> bool:
        released = self._lease_write(
            group,
            "REMOVE holder, since, expires_at, handover_at",
            c.POLLER_QUIET_UNWOKEN,
            {":me": s(me), ":seen": n(wakes_seen)},
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

    # --- alerts kept in the store (local mode) ----------------------------------------------------------

    def store_alert(self, alert: Alert) -> None:
        self.client.put_item(
            TableName=self.names.control,
            Item={
                "pk": s(f"alerts#{alert.team}"),
                "sk": s(f"{iso_z(alert.at)}#{alert.run_id}#{alert.attempt}#{alert.kind}"),
                "alert": s(json.dumps({**alert.__dict__, "at": iso_z(alert.at)})),
            },
        )

    def list_alerts(self, team: str) -> list[dict[str, Any]]:
        response = self.client.query(
            TableName=self.names.control,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": s(f"alerts#{team}")},
            ConsistentRead=True,
        )
        return [json.loads(item["alert"]["S"]) for item in response.get("Items", [])]


_PACKED_TIMES = ("created_at", "updated_at", "next_nominal_at", "last_scheduled_at")
_SEP = "\x1f"  # after each time and the team's length (none holds it); then the team (by length) and spec
_WBITS, _MEM_LEVEL = -11, 4  # raw deflate, a 2 KiB window: the preset and a usual spec fit in it


@functools.cache
def _preset() -> bytes:
    """The preset dictionary rows are deflated against: a spec's JSON with every default."""
    spec = JobSpec.model_validate(
        {"name": "-", "schedule": {"cron": "0 0 * * *"}, "target": {"url": "https://-"}}
    )
    return spec.model_dump_json().encode()


@functools.lru_cache(maxsize=4096)
def _epoch_seconds(text: str) -> int:
    """An ``iso_z`` time in seconds since the epoch; the same int object for the same time while cached."""
    return int(parse_iso_z(text).timestamp())


def _stored_time(text: str) -> datetime:
    """``parse_iso_z``, many times faster for the one shape the store writes (``iso_z``: 20
    characters, ``T`` and ``Z`` in place), with the same result: an aware datetime in ``UTC``."""
    if len(text) == 20 and text[10] == "T" and text[19] == "Z":
        return datetime.fromisoformat(text)
    return parse_iso_z(text)


@dataclass
class _GuardedClaims:
    """What ``DynamoStore._claim_guarded`` did."""

    landed: list[Claim] = field(default_factory=list)  # whose transaction committed
    created: list[Run] = field(default_factory=list)
    in_the_way: list[tuple[Claim, Run]] = field(default_factory=list)  # rows already there, left alone
    lost: int = 0
    requests: int = 0


class CompactDueRow:
    """A due row as the minute preload holds it (``duetime.ports.DueRow``), in a few hundred bytes instead
    of a model's few thousand: slots, no ``__dict__``; the fire time, job id and version at hand; everything
    else ``item_to_job`` reads (the spec JSON as stored, team, and the item's other times) in one bytes
    object, deflated against a preset dictionary of a spec's field names and default values, so what a job
    shares with every other job costs a few bytes and only what is its own (name, URL, headers, body) is
    kept. ``job()`` inflates it into the item's attributes and builds the model through ``item_to_job``,
    so it equals what ``due_jobs`` returns. Rows due in the same second share one fire-time integer."""

    __slots__ = ("_packed", "active_run", "fire_at", "job_id", "version")
    # What ``item_to_job`` reads: all a due row's reader asks the index for.
    ATTRIBUTES = ("job_id", "version", "next_fire_at", "active_run", "team", "spec", *_PACKED_TIMES)

    def __init__(self, item: Item) -> None:
        self.fire_at = _epoch_seconds(item["next_fire_at"]["S"])
        self.job_id: str = item["job_id"]["S"]
        self.version = int(item["version"]["N"])
        self.active_run: str | None = item["active_run"]["S"] if "active_run" in item else None
        team = item["team"]["S"]
        times = [item[name]["S"] if name in item else "" for name in _PACKED_TIMES]
        text = _SEP.join([*times, str(len(team)), team + item["spec"]["S"]])
        deflate = zlib.compressobj(6, zlib.DEFLATED, _WBITS, _MEM_LEVEL, zlib.Z_DEFAULT_STRATEGY, _preset())
        self._packed = deflate.compress(text.encode()) + deflate.flush()

    def job(self) -> Job:
        inflate = zlib.decompressobj(_WBITS, _preset())
        text = (inflate.decompress(self._packed) + inflate.flush()).decode()
        *times, team_length, rest = text.split(_SEP, len(_PACKED_TIMES) + 1)
        team, spec = rest[: int(team_length)], rest[int(team_length) :]
        item: Item = {
            "job_id": s(self.job_id),
            "version": n(self.version),
            "next_fire_at": s(iso_z(datetime.fromtimestamp(self.fire_at, UTC))),
            "team": s(team),
            "spec": s(spec),
        }
        for name, value in zip(_PACKED_TIMES, times, strict=True):
            if value:
                item[name] = s(value)
        if self.active_run is not None:
            item["active_run"] = s(self.active_run)
        return item_to_job(item, _stored_time)

    def __repr__(self) -> str:
        return f"CompactDueRow({self.job_id!r}, fire_at={self.fire_at}, version={self.version})"


def _lease_key(group: str) -> Item:
    return {"pk": s(f"poller#{group}"), "sk": s("lease")}


def _ms(value: datetime) -> dict[str, str]:
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


def _passed(instant: datetime, now: datetime) -> bool:
    """``instant < now`` as the store's conditions compare them: stored instants are to the second."""
    return t(instant)["S"] < t(now)["S"]


def _shard_of(run_id: str) -> dict[str, str]:
    """The reap shard of a run, from its job id (a run lives in its job's partition)."""
    return s(reap_shard(partition_of(split_run_id(run_id)[0])))


def _delete_items(client: Any, table: str, keys: Sequence[Item], sleep: Sleep = time.sleep) -> None:
    """Unconditional deletes, 25 a BatchWriteItem, sending what DynamoDB left unprocessed again after a
    backoff (``UNPROCESSED``) until none is left."""

    def send(request: dict[str, Any]) -> dict[str, Any]:
        return client.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}

    for start in range(0, len(keys), 25):
        deletes = [{"DeleteRequest": {"Key": key}} for key in keys[start : start + 25]]
        resend(send, {table: deletes}, UNPROCESSED, sleep=sleep)


def _mark_key(partition: int) -> Item:
    return {"pk": s(f"partition#{partition:02d}"), "sk": s("watermark")}
