"""Claims on DynamoDB: a poller's due times become run rows, reap tickets, watches and schedule moves."""

from __future__ import annotations

import logging
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from duetime.adapters.dynamodb import conditions as c
from duetime.adapters.dynamodb import partiql
from duetime.adapters.dynamodb.codec import (
    Item,
    number_attribute,
    run_to_item,
    scheduling_attributes,
    string_attribute,
    time_attribute,
)
from duetime.adapters.dynamodb.deadline_watches import DeadlineWatches
from duetime.adapters.dynamodb.reads import batch_get
from duetime.adapters.dynamodb.reap_tickets import ticket_items, ticket_key, ticketed_run_ids
from duetime.domain.claim_plan import Claim, sets_active_run
from duetime.domain.models import Run
from duetime.ports import ClaimOutcome

log = logging.getLogger(__name__)


class DynamoClaims(DeadlineWatches):
    """``JobStore.claim`` (mixed into ``DynamoStore``)."""

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
                partiql.insert(
                    self.names.runs,
                    run_to_item(run, self.lease_check, stored_format=self.write_format()),
                    c.RUN_IS_NEW,
                )
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
        stored_format = self.write_format()
        statements = [
            partiql.insert(self.names.runs, run_to_item(run, stored_format=stored_format), c.RUN_IS_NEW)
            for run in runs
        ]
        written = self._execute_in_parallel(statements)
        return [run for run, new in zip(runs, written, strict=True) if new]

    def _write_tickets(self, runs: Sequence[Run]) -> int:
        """The reap tickets of ``runs`` (``reap_tickets.ticket_items``), written before any schedule moves
        past them; how many. A ticket not written raises, and the claim moves no schedule: its rows are then
        found in the way by the next claim, which tickets them."""
        if not runs:
            return 0
        items = ticket_items(runs, self.lease_check, max(run.expires_at_epoch for run in runs))
        self.insert_tickets(items)
        return len(items)

    def insert_tickets(self, items: Sequence[Item]) -> None:
        """Each ticket INSERTed under ``TICKET_IS_NEW``. A ticket whose condition failed is read back
        (consistently): the same item is this claim's own, written by an earlier attempt of the request
        (the SDK's retry of a request that had landed, or a statement sent again after an internal error)
        and is written; another item at its random key raises ``TicketExists`` (nothing moves past rows a
        ticket does not cover)."""
        statements = [partiql.insert(self.names.runs, item, c.TICKET_IS_NEW) for item in items]
        written = self._execute_in_parallel(statements)
        refused = [item for item, ok in zip(items, written, strict=True) if not ok]
        if not refused:
            return
        found = batch_get(
            self.client, self.names.runs, [ticket_key(item) for item in refused], consistent=True
        )
        stored = {item["job_id"]["S"]: item for item in found}
        if any(stored.get(item["job_id"]["S"]) != item for item in refused):
            raise partiql.StatementFailed("TicketExists", "a reap ticket's random key was taken")

    def _current_versions(self, claims: Sequence[Claim]) -> dict[str, int]:
        """Each claimed job's version as stored now (a consistent BatchGetItem of the key and the version;
        a deleted job is missing). A claim read from the due index or the preload may be older than an edit
        that landed since: it must not write a run row for a time the edit moved or paused."""
        keys = [
            {"job_id": string_attribute(job_id)}
            for job_id in dict.fromkeys(claim.plan.job.id for claim in claims)
        ]
        wanted = ("job_id", "version")
        items = batch_get(self.client, self.names.jobs, keys, consistent=True, attributes=wanted)
        return {item["job_id"]["S"]: int(item["version"]["N"]) for item in items}

    def claim_statements(
        self, claims: Sequence[Claim], now: datetime, ticketed: Collection[str] = ()
    ) -> tuple[list[partiql.Statement], list[partiql.Statement]]:
        """The claims' writes, in the order ``claim`` makes them: every run row (claim by claim; those in
        ``ticketed`` without a reap entry of their own), then every schedule move (one a claim)."""
        stored_format = self.write_format()
        rows = [
            partiql.insert(
                self.names.runs,
                run_to_item(run, self.lease_check, run.run_id not in ticketed, stored_format=stored_format),
                c.RUN_IS_NEW,
            )
            for claim in claims
            for run in claim.runs
        ]
        return rows, [self._schedule_move(claim, now) for claim in claims]

    def _schedule_move(self, claim: Claim, now: datetime) -> partiql.Statement:
        """The claim's schedule move: the job's next due time and the due index's keys, if it is still the
        version the poller read (``JOB_UNCHANGED_SINCE_READ``)."""
        job = claim.plan.job
        values, removes = scheduling_attributes(job, claim.plan.next_state, now)
        values["updated_at"] = time_attribute(now)
        bound: Item = {f":{name}": value for name, value in values.items()}
        bound[":expected_version"] = number_attribute(job.state.version)
        return partiql.update(
            self.names.jobs,
            {"job_id": string_attribute(job.id)},
            c.JOB_UNCHANGED_SINCE_READ,
            bound,
            sets=tuple(values),
            removes=tuple(removes),
        )


@dataclass
class _GuardedClaims:
    """What ``DynamoClaims._claim_guarded`` did."""

    landed: list[Claim] = field(default_factory=list)  # whose transaction committed
    created: list[Run] = field(default_factory=list)
    in_the_way: list[tuple[Claim, Run]] = field(default_factory=list)  # rows already there, left alone
    lost: int = 0
    requests: int = 0
