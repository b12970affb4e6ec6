"""`duetime bench midnight --simulate`: the midnight spike at full scale, as a discrete-event simulation.

The real code runs: ``Poller.run_until`` (sweeps, the minute preload, ``plan_claim``/``make_claim``, the
claim), ``work_batch``/``Worker.process_batch`` (leases, team slots, results), on the in-memory twin
(``adapters.memory``) under a virtual clock. Nothing sleeps and nothing is timed by the wall clock: each
store and queue call the code makes is charged its modelled AWS latency (``midnight_model.AwsModel``) on
the virtual clock, each poller's and worker's CPU work the cost ``bench runcpu`` measured (the saved
calibration, ``bench/calibration.py``) scaled to the Lambda function's vCPU share, and each write's units go
to the partition key it lands on and to the table or index it writes, where a key past 1,000 units a second,
or a table or index past its on-demand capacity (``AwsModel.table_write_capacity``), holds the write back.

How the actors take turns: a heap of (virtual time, actor). A poller runs its real ``run_until`` loop in a
thread of its own, but only while the simulation hands it the baton: its ``sleep`` gives the baton back and
names its next wake-up, so exactly one piece of code runs at a time and the run is deterministic. A worker
is a slot of the SQS event source (``esm_concurrency`` of them at a time, growing as Lambda's does): it
receives a batch, works it with the real worker (whose target calls, made at once, end together after
``target_ms``), deletes what succeeded and receives again; with nothing visible it parks until a message
becomes visible (long polling).

What the simulation adds to the twin, in this module only: an index of the due rows by bucket and shared
(not deep-copied) models on the read paths, for speed; a queue with a heap of visible messages; and the
worker's calls made one after the other in this thread instead of a pool (the heartbeat is not simulated:
calls shorter than the 20 s heartbeat never need one). Not modelled: the poller group lease (one poller per
group, never handed over), failures and retries, SQS duplicates, DynamoDB's adaptive capacity and burst
beyond one second, read units, the run's target outside its duration.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import math
import resource
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from duetime.adapters.dynamodb.codec import job_to_item, run_to_item
from duetime.adapters.dynamodb.reap_checks import (
    DEFAULT_LEASE_CHECK,
    needs_reaper_at,
    next_check,
    waiting_check,
)
from duetime.adapters.dynamodb.reap_tickets import ticket_chunks, ticketed_run_ids
from duetime.adapters.dynamodb.worker_batches import SLOTS_PER_ITEM, SLOTS_PER_KEY
from duetime.adapters.memory import MemoryAlerts, MemoryQueue, MemoryStore
from duetime.adapters.memory.jobs import MemoryDueRow
from duetime.adapters.memory.stored import maybe_second
from duetime.capacity import calibration
from duetime.capacity.midnight_model import (
    CALIBRATED,
    AwsModel,
    KeyMeter,
    esm_activation,
    esm_concurrency,
    model_flags,
)
from duetime.capacity.plan import PlanInputs, capacity_plan
from duetime.capacity.plan_midnight import TABLE_NAMES, claims_per_second_within, midnight_estimate
from duetime.capacity.prices import PRICES_USD
from duetime.capacity.warm_throughput import NEW_TABLE_WRITE_UNITS, parse_units
from duetime.domain.claim_plan import Claim, initial_state
from duetime.domain.clock import ManualClock
from duetime.domain.due_index import due_bucket
from duetime.domain.ids import PARTITIONS, new_job_id, partition_of, split_run_id
from duetime.domain.models import Job, JobSpec, Run, Team
from duetime.domain.schedule import fire_time, next_nominal_after, rate_anchor
from duetime.domain.timeutil import minute_bucket
from duetime.execution.run_batch import work_batch
from duetime.execution.worker import Flight, TargetCall, Worker, WorkReport
from duetime.ports import (
    ClaimOutcome,
    PollerLease,
    ResultWrite,
    RunMessage,
    TargetRequest,
    TargetResponse,
    UnreadableRow,
)
from duetime.ports.functions import HelperAssignment
from duetime.ports.queue import ReceivedMessage
from duetime.scheduling.fan_out import FanOutPolicy
from duetime.scheduling.poller import Poller, PollerConfig
from duetime.scheduling.poller_lease import LeaseTimings, PollerShift
from duetime.scheduling.prescale import PrescalePolicy
from duetime_bench.accounting import item_size

MIDNIGHT = datetime(2026, 1, 1, tzinfo=UTC)
BATCH = 10  # the worker's SQS batch (StackConfig.worker_batch_size)
STATEMENTS_PER_BATCH = 25  # BatchExecuteStatement
CLAIM_STATEMENTS = 25  # BatchExecuteStatement: the claim's writes a request holds
VERSION_READ_KEYS = 100  # BatchGetItem: the jobs' versions a claim reads first, a request


def midnight_jobs(
    count: int, minute: datetime, jitter: int, exact_fraction: float, created: datetime, teams: int
) -> list[Job]:
    """What ``bench.spike.spike_jobs`` builds (daily jobs at ``minute``, the first ``exact_fraction`` exact,
    ``jitter`` seconds of jitter), spread round-robin over ``teams`` teams, sharing one spec object (the
    models are never changed in place) so 500,000 of them fit in memory."""
    base = JobSpec.model_validate(
        {
            "name": "midnight",
            "schedule": {"cron": f"{minute.minute} {minute.hour} * * *", "timezone": "UTC"},
            "target": {"url": "https://hooks.example.com/duetime"},
            "jitter_seconds": jitter,
            "retry": {"max_attempts": 1},
        }
    )
    template = Job(**base.model_dump(), id=new_job_id(), team="t0", created_at=created, updated_at=created)
    # initial_state's cron arithmetic is the same for every job; only the jitter offset (by id) differs.
    first = initial_state(template, created)
    assert first.next_nominal_at is not None
    following = next_nominal_after(template, rate_anchor(template, created), first.next_nominal_at)
    exact_count = round(count * exact_fraction)
    jobs = []
    for i in range(count):
        job = template.model_copy(
            update={"id": new_job_id(), "exact": i < exact_count, "team": f"t{i % teams}"}
        )
        fire = fire_time(job.id, job, first.next_nominal_at, following)
        jobs.append(job.model_copy(update={"state": first.model_copy(update={"next_fire_at": fire})}))
    return jobs


def _seconds(instant: datetime) -> float:
    return (instant - MIDNIGHT).total_seconds()


def _check(visible_at: datetime, queue_deadline: datetime) -> datetime:
    """A waiting run's reap check in the DynamoDB store, at the workers' default lease (``reap_checks``)."""
    return waiting_check(visible_at, queue_deadline, DEFAULT_LEASE_CHECK)


def _partition_of_run(run_id: str) -> int:
    return partition_of(split_run_id(run_id)[0])


class SimStore(MemoryStore):
    """The twin, charging each call its modelled latency, CPU and write units on the simulation's clock."""

    def __init__(self, sim: Simulation) -> None:
        super().__init__(copies=False)  # the simulation never changes a model in place
        self.sim = sim
        # The DynamoDB store's reap checks (``reap_checks``), which the twin's exact index does not have:
        # each run's current check, and per partition a heap of (check, run id) holding stale entries too.
        self._checks: dict[str, datetime] = {}
        self._check_heaps: dict[int, list[tuple[datetime, str]]] = defaultdict(list)
        self.check_moves = 0
        # Its reap tickets (``reap_tickets``): the runs a claim created without an entry of their own, and per
        # partition a heap of (check, run ids) of the tickets that cover them.
        self._ticketed: set[str] = set()
        self._creating_ticketed: set[str] = set()
        self._ticket_heaps: dict[int, list[tuple[datetime, tuple[str, ...]]]] = defaultdict(list)
        self.tickets_written = 0
        self.ticket_adoptions = 0
        self.item_units: dict[str, int] = {}
        self._ticket_wait = (0.0, "key_throttle")

    # --- bulk set-up (not part of the timeline) --------------------------------------------------------

    def load_jobs(self, jobs: Sequence[Job], now: datetime) -> None:
        for partition in range(PARTITIONS):
            self.ensure_low_water_mark(partition, minute_bucket(now))
        self.put_stored_jobs(jobs, now)

    # --- the jobs table -----------------------------------------------------------------------------------

    def due_rows(
        self, partition: int, bucket: str, until: datetime, limit: int, after: str | None = None
    ) -> list[MemoryDueRow]:
        rows = super().due_rows(partition, bucket, until, limit, after)
        self._charge_read(len(rows))
        return rows

    def due_jobs(
        self,
        partition: int,
        bucket: str,
        until: datetime,
        limit: int,
        after: str | None = None,
        unreadable: list[UnreadableRow] | None = None,
    ) -> list[Job]:
        jobs = super().due_jobs(partition, bucket, until, limit, after, unreadable)
        self._charge_read(len(jobs))
        return jobs

    def _charge_read(self, rows: int) -> None:
        """A Query page of the due index: its latency, and the poller's CPU for each row it returns (as
        ``bench runcpu`` measured ``due_jobs``; the preload's lighter ``due_rows`` is charged the same)."""
        m = self.sim.model
        self.sim.spend(m.ddb_query_ms / 1000)
        self.sim.spend(m.poller_cpu_s(rows * m.poller_read_cpu_us_per_row, self.sim.memory_mb()), "cpu")

    def count_due(self, partition: int, bucket: str) -> int:
        """A ``Select=COUNT`` Query: one page's latency, no rows' CPU."""
        self.sim.spend(self.sim.model.ddb_query_ms / 1000)
        return super().count_due(partition, bucket)

    def read_poller_lease(self, group: str) -> PollerLease:
        """A GetItem (the fan-out's reads of its helpers' leases, a helper's lease steps)."""
        self.sim.spend(self.sim.model.ddb_read_ms / 1000)
        return super().read_poller_lease(group)

    def read_poller_leases(self, groups: Sequence[str]) -> dict[str, PollerLease]:
        """A BatchGetItem (the fan-out's reads of its helpers' leases): one read's latency."""
        self.sim.spend(self.sim.model.ddb_read_ms / 1000)
        return super().read_poller_leases(groups)

    def _units(self, kind: str, item: Callable[[], dict[str, Any]]) -> int:
        """Write units of one write of an item of ``kind`` (AWS: ceil(size / 1 KB)), from the first such
        item the code writes (encoded by the DynamoDB store's codec): the midnight's jobs all have one
        shape, and so have their runs."""
        units = self.item_units.get(kind)
        if units is None:
            units = self.item_units[kind] = max(1, math.ceil(item_size(item()) / 1024))
        return units

    def _job_units(self, job: Job) -> int:
        return self._units("job", lambda: job_to_item(job, self.sim.clock.now()))

    def _run_units(self, run: Run) -> int:
        kind = "finished run" if run.result is not None else "run"
        return self._units(kind, lambda: run_to_item(run))

    def claim(self, claims: Sequence[Claim], now: datetime) -> ClaimOutcome:
        m, sim = self.sim.model, self.sim
        runs = sum(len(c.runs) for c in claims)
        sim.spend(m.poller_cpu_s(runs * m.poller_claim_cpu_us_per_run, sim.memory_mb()), "cpu")
        self._creating_ticketed = ticketed_run_ids(run for claim in claims for run in claim.runs)
        outcome = super().claim(claims, now)
        self._index_created([*outcome.runs, *outcome.skipped])
        tickets = self._write_tickets([run for run in outcome.runs if run.run_id in self._creating_ticketed])
        self._creating_ticketed = set()
        # DynamoStore reads the jobs' versions (a BatchGetItem per 100), then writes the claims' run rows,
        # then their reap tickets, then their schedule moves, each step in requests of 25 statements
        # (BatchExecuteStatement), claim_concurrency requests at once; a claim counts as claimed when the
        # request moving its schedule returns.
        request_s = m.ddb_batch_statement_ms / 1000
        rows = sum(len(claim.runs) for claim in claims)
        row_requests = math.ceil(rows / CLAIM_STATEMENTS)
        start = sim.now()
        elapsed = math.ceil(len(claims) / VERSION_READ_KEYS) * m.ddb_batch_get_ms / 1000
        elapsed += math.ceil(row_requests / m.claim_concurrency) * request_s
        elapsed += math.ceil(math.ceil(tickets / CLAIM_STATEMENTS) / m.claim_concurrency) * request_s
        latency, throttled = elapsed, [self._ticket_wait]
        elapsed += self._ticket_wait[0]  # the tickets' writes come before the schedule moves
        moves = [claims[i : i + CLAIM_STATEMENTS] for i in range(0, len(claims), CLAIM_STATEMENTS)]
        for first in range(0, len(moves), m.claim_concurrency):
            at = start + elapsed
            waits = [
                self._claim_writes(claim, at)
                for r in moves[first : first + m.claim_concurrency]
                for claim in r
            ]
            slowest = max(waits, default=(0.0, "key_throttle"))
            elapsed += request_s + slowest[0]
            latency += request_s
            throttled.append(slowest)
            for request in moves[first : first + m.claim_concurrency]:
                for claim in request:
                    sim.claimed_at(partition_of(claim.plan.job.id), len(claim.runs), start + elapsed)
        sim.spend(latency)
        for wait, cause in throttled:
            sim.spend(wait, cause)
        return outcome

    def _index_created(self, created: Sequence[Run]) -> None:
        """The reap checks of the runs a claim created that need minding: a ticketed run's ticket stands for
        its own check; the others get theirs at their check as stored (to the second)."""
        for run in created:
            if run.queue_deadline is None:
                continue
            if run.run_id in self._creating_ticketed:
                self._ticketed.add(run.run_id)
            else:
                created_at, deadline = maybe_second(run.created_at), maybe_second(run.queue_deadline)
                assert created_at is not None and deadline is not None
                self._set_check(run.run_id, _check(created_at, deadline))

    def _write_tickets(self, runs: Sequence[Run]) -> int:
        """The reap tickets of a claim's ticketed runs, as ``DynamoStore`` writes them (``ticket_chunks``),
        each 1 write unit on the shard key of its first run (and on the runs table and its reap index); how
        many."""
        chunks = ticket_chunks(runs)
        waits = [(0.0, "key_throttle")]
        for chunk in chunks:
            assert chunk[0].queue_deadline is not None
            check = _check(chunk[0].created_at, chunk[0].queue_deadline)
            heapq.heappush(
                self._ticket_heaps[chunk[0].partition], (check, tuple(run.run_id for run in chunk))
            )
            key = f"reap:p{chunk[0].partition:02d}"
            waits.append(self.sim.write({key: 1}, {"runs": 1, "runs/reap": 1}))
        self._ticket_wait = max(waits)
        self.tickets_written += len(chunks)
        return len(chunks)

    def _claim_writes(self, claim: Claim, at: float) -> tuple[float, str]:
        """The writes of one claim: on shared keys, the due entry leaves its bucket and enters the next one,
        each run with an entry of its own enters its partition's reap shard (a ticket covers the others:
        ``_write_tickets``); on the tables, the job's row and its due-index entry (ALL projected: a key
        change is a delete and a put of the whole item), each run's row and reap entry. The wait for the
        slowest, and whether a key or a table held it."""
        job = claim.plan.job
        partition = partition_of(job.id)
        keys: dict[str, float] = {}
        entries = 0
        if job.state.next_fire_at is not None:
            keys[f"due:{due_bucket(job.id, job.state.next_fire_at, job.state.next_fire_at)}"] = 1
            entries += 1
        if claim.plan.next_state.next_fire_at is not None:
            fire = claim.plan.next_state.next_fire_at
            key = f"due:{due_bucket(job.id, fire, fire)}"
            keys[key] = keys.get(key, 0) + 1
            entries += 1
        own_entries = sum(1 for run in claim.runs if run.run_id not in self._creating_ticketed)
        if own_entries:
            keys[f"reap:p{partition:02d}"] = own_entries
        job_units = self._job_units(job)
        tables = {
            "jobs": job_units,
            "jobs/due": entries * job_units,
            "runs": sum(self._run_units(run) for run in claim.runs),
            "runs/reap": own_entries,
        }
        return self.sim.write(keys, tables, at)

    def low_water_marks(self, partitions: Sequence[int]) -> dict[int, str]:
        self.sim.spend(self.sim.model.ddb_batch_get_ms / 1000)
        return super().low_water_marks(partitions)

    def advance_low_water_marks(
        self, marks: Mapping[int, str], read: Mapping[int, str] | None = None
    ) -> set[int]:
        wait = self.sim.write({f"mark:{partition:02d}": 1 for partition in marks}, {"control": len(marks)})
        self.sim.spend(math.ceil(len(marks) / 25) * self.sim.model.ddb_write_ms / 1000)  # 25 a request
        self.sim.spend(*wait)
        return super().advance_low_water_marks(marks, read)

    # --- runs -------------------------------------------------------------------------------------------

    def _set_check(self, run_id: str, check: datetime | None) -> None:
        self._ticketed.discard(run_id)  # a write that gives a run a check gives it an entry of its own
        if check is None:
            self._checks.pop(run_id, None)
            return
        self._checks[run_id] = check
        heapq.heappush(self._check_heaps[_partition_of_run(run_id)], (check, run_id))

    def _batch_s(self, count: int, read_first: bool) -> float:
        """A batch of ``count`` writes: one UpdateItem alone; else (a read and) BatchExecuteStatements."""
        m = self.sim.model
        if count <= 1:
            return m.ddb_write_ms / 1000
        statements = math.ceil(count / STATEMENTS_PER_BATCH) * m.ddb_batch_statement_ms
        return (statements + (m.ddb_batch_get_ms if read_first else 0.0)) / 1000

    def _reap_writes(self, run_ids: Sequence[str], units: int, row_units: int) -> tuple[float, str]:
        """``units`` each of ``run_ids`` writes to its reap shard's key (and the reap index), with
        ``row_units`` written to the runs table beside them; the wait."""
        by_shard = Counter(_partition_of_run(run_id) for run_id in run_ids)
        keys = {f"reap:p{p:02d}": float(units * n) for p, n in by_shard.items()}
        return self.sim.write(keys, {"runs": row_units, "runs/reap": units * len(run_ids)})

    def _stored_run(self, run_id: str) -> Run:
        run = self.get_run(run_id)  # not a copy: the store keeps none
        assert run is not None, run_id
        return run

    def _rows_units(self, run_ids: Sequence[str]) -> int:
        return sum(self._run_units(run) for run_id in run_ids if (run := self.get_run(run_id)) is not None)

    def acquire_leases(
        self,
        attempts: Sequence[tuple[str, int]],
        owner: str,
        now: datetime,
        lease_until: datetime,
        carried: Mapping[str, Run] | None = None,
    ) -> dict[str, Run]:
        leased = super().acquire_leases(attempts, owner, now, lease_until, carried)
        # A lease writes nothing to the reap index (its check stays where the claim put it: reap_checks).
        # Runs carried by their messages are not read first (a carried run that is not the stored one is,
        # afterwards, in the DynamoDB store: the twin has none such).
        read_first = any(run_id not in (carried or {}) for run_id, _ in attempts)
        wait = self.sim.write({}, {"runs": self._rows_units([run_id for run_id, _ in attempts])})
        self.sim.spend(self._batch_s(len(attempts), read_first=read_first))
        self.sim.spend(*wait)
        self.sim.started(leased.values())
        return leased

    def record_results(self, results: Sequence[ResultWrite], owner: str, now: datetime) -> set[str]:
        recorded = super().record_results(results, owner, now)
        in_index = [run_id for run_id in recorded if run_id not in self._ticketed]
        # The result takes a run with its own entry out of its shard.
        wait = self._reap_writes(in_index, 1, self._rows_units([w.run.run_id for w in results]))
        for write in results:
            if write.run.run_id in recorded:  # a retry waits with its check; a finished run has none
                waits = write.retry_at is not None and write.queue_deadline is not None
                check = _check(write.retry_at, write.queue_deadline) if waits else None  # type: ignore[arg-type]
                self._set_check(write.run.run_id, check)
        self.sim.spend(self._batch_s(len(results), read_first=False))
        self.sim.spend(*wait)
        self.sim.finished += len(recorded)
        return recorded

    def return_to_queue(
        self, run_id: str, attempt: int, owner: str, now: datetime, queue_deadline: datetime
    ) -> bool:
        back = super().return_to_queue(run_id, attempt, owner, now, queue_deadline)
        if back:
            self._set_check(run_id, _check(now, queue_deadline))
        wait = self._reap_writes([run_id], 2, self._rows_units([run_id]))
        self.sim.spend(self.sim.model.ddb_write_ms / 1000)
        self.sim.spend(*wait)
        self.sim.deferred += 1
        return back

    def requeue_expired_lease(self, candidate: Any, now: datetime, queue_deadline: datetime) -> Run | None:
        run = super().requeue_expired_lease(candidate, now, queue_deadline)
        return self._waiting_again(run, candidate, now)

    def renew_queue_deadline(self, candidate: Any, now: datetime, queue_deadline: datetime) -> Run | None:
        run = super().renew_queue_deadline(candidate, now, queue_deadline)
        return self._waiting_again(run, candidate, now)

    def _waiting_again(self, run: Run | None, candidate: Any, now: datetime) -> Run | None:
        """The reaper's write of a run it sent again: one UpdateItem, its check moved (2 units)."""
        if run is not None and run.queue_deadline is not None:
            self._set_check(run.run_id, _check(now, run.queue_deadline))
        wait = self._reap_writes([candidate.run_id], 2, self._rows_units([candidate.run_id]))
        self.sim.spend(self.sim.model.ddb_write_ms / 1000)
        self.sim.spend(*wait)
        return run

    def runs_needing_attention(self, partition: int, now: datetime, limit: int) -> list[Any]:
        """The DynamoDB store's pass over a shard's checks (``reap_checks``): up to ``limit`` checks that
        have come, read in one BatchGetItem; a live run's check moved on (25 a BatchExecuteStatement, 2
        units each on the shard's key). The candidates are the twin's (its index is exact)."""
        m = self.sim.model
        heap = self._check_heaps[partition]
        due: list[str] = []
        while heap and heap[0][0] < now and len(due) < limit:
            check, run_id = heapq.heappop(heap)
            if self._checks.get(run_id) == check:
                due.append(run_id)
        (tickets, listed), adopted = self._settle_tickets(partition, now, limit - len(due))
        moved: list[str] = []
        for run_id in due:
            run = self._stored_run(run_id)
            needs_at = needs_reaper_at(run)
            if needs_at is not None and needs_at >= now:  # alive: the store moves its check on
                self._set_check(run_id, next_check(run, now, DEFAULT_LEASE_CHECK))
                moved.append(run_id)
            else:
                self._checks.pop(run_id, None)  # a candidate (the twin returns it) or finished
        self.check_moves += len(moved)
        spent = m.ddb_query_ms / 1000
        waits = [(0.0, "key_throttle")]
        if due:
            spent += math.ceil(len(due) / 100) * m.ddb_batch_get_ms / 1000
        if moved:
            spent += math.ceil(len(moved) / STATEMENTS_PER_BATCH) * m.ddb_batch_statement_ms / 1000
            waits.append(self._reap_writes(moved, 2, self._rows_units(moved)))
        if tickets:  # the runs they list read, the live ones adopted, the tickets deleted (1 unit each)
            spent += math.ceil(listed / 100) * m.ddb_batch_get_ms / 1000
            spent += math.ceil(len(adopted) / STATEMENTS_PER_BATCH) * m.ddb_batch_statement_ms / 1000
            spent += math.ceil(tickets / 25) * m.ddb_write_ms / 1000
            waits.append(self._reap_writes(adopted, 1, self._rows_units(adopted)))
            tables = {"runs": tickets, "runs/reap": tickets}
            waits.append(self.sim.write({f"reap:p{partition:02d}": tickets}, tables))
        self.sim.spend(spent)
        for wait, cause in waits:
            self.sim.spend(wait, cause)
        return super().runs_needing_attention(partition, now, limit)

    def _settle_tickets(self, partition: int, now: datetime, limit: int) -> tuple[tuple[int, int], list[str]]:
        """The tickets of ``partition`` whose check came (up to ``limit``), as ``DynamoStore`` settles them:
        ((tickets, runs listed), the live runs adopted at their next check or the instant they needed it)."""
        heap = self._ticket_heaps[partition]
        tickets = listed = 0
        adopted: list[str] = []
        while heap and heap[0][0] < now and tickets < limit:
            _, run_ids = heapq.heappop(heap)
            tickets += 1
            listed += len(run_ids)
            for run_id in run_ids:
                run = self._stored_run(run_id)
                needs_at = needs_reaper_at(run)
                if run_id not in self._ticketed or needs_at is None:
                    self._ticketed.discard(run_id)
                    continue  # an entry of its own, or finished
                check = needs_at if needs_at < now else next_check(run, now, DEFAULT_LEASE_CHECK)
                self._set_check(run_id, check)
                adopted.append(run_id)
        self.ticket_adoptions += len(adopted)
        return (tickets, listed), adopted

    # --- teams and slots ----------------------------------------------------------------------------------

    def get_team(self, team_id: str) -> Team | None:
        self.sim.spend(self.sim.model.ddb_read_ms / 1000)
        return super().get_team(team_id)

    def _slot_writes(self, team_id: str, slots: Sequence[int]) -> tuple[float, str]:
        """The slot writes' wait on their keys and the control table: one write per item of SLOTS_PER_ITEM
        slots, as the store."""
        items = {slot - slot % SLOTS_PER_ITEM for slot in slots}
        groups = Counter(first // SLOTS_PER_KEY for first in items)
        keys = {f"slots:{team_id}#{g}": float(n) for g, n in groups.items()}
        return self.sim.write(keys, {"control": len(items)})

    def acquire_slots(
        self, team: Team, run_ids: Sequence[str], now: datetime, lease_until: datetime
    ) -> dict[str, int]:
        taken = super().acquire_slots(team, run_ids, now, lease_until)
        wait = self._slot_writes(team.team_id, list(taken.values()))
        m = self.sim.model
        io = (
            m.ddb_write_ms / 1000 if len(run_ids) == 1 else (m.ddb_query_ms + m.ddb_batch_statement_ms) / 1000
        )
        self.sim.spend(io)
        self.sim.spend(*wait)
        return taken

    def release_slots(self, team_id: str, slots: Mapping[str, int]) -> None:
        super().release_slots(team_id, slots)
        wait = self._slot_writes(team_id, list(slots.values()))
        self.sim.spend(self._batch_s(len(slots), read_first=False))
        self.sim.spend(*wait)


class SimQueue(MemoryQueue):
    """The twin queue, each call charged its modelled latency; a send wakes the parked event-source slots
    when its messages show."""

    def __init__(self, sim: Simulation, visibility_timeout: int = 90) -> None:
        super().__init__(sim.clock, visibility_timeout)
        self.sim = sim

    def send(self, messages: Sequence[RunMessage], delay_seconds: int = 0) -> None:
        m = self.sim.model
        requests = math.ceil(len(messages) / BATCH)
        self.sim.sqs_requests += requests
        self.sim.spend(math.ceil(requests / m.sqs_senders) * m.sqs_send_ms / 1000)
        visible_at = self.clock.now() + timedelta(seconds=delay_seconds)
        super().send(messages, delay_seconds)
        self.sim.messages_visible(_seconds(visible_at))

    def receive(self, max_messages: int = 10, wait_seconds: int = 1) -> list[ReceivedMessage]:
        self.sim.sqs_requests += 1
        self.sim.spend(self.sim.model.sqs_receive_ms / 1000)
        return super().receive(max_messages, wait_seconds)

    def delete(self, receipt_handles: Sequence[str]) -> None:
        requests = math.ceil(len(receipt_handles) / BATCH)
        self.sim.sqs_requests += requests
        self.sim.spend(requests * self.sim.model.sqs_delete_ms / 1000)
        super().delete(receipt_handles)


class _LaneFuture(Future[None]):
    """A send done on the preload's sender lane: waiting for it moves the poller's clock to its end."""

    def __init__(self, sim: Simulation, ends: float, error: Exception | None) -> None:
        super().__init__()
        self.sim, self.ends = sim, ends
        if error is None:
            self.set_result(None)
        else:
            self.set_exception(error)

    def result(self, timeout: float | None = None) -> None:
        self.sim.wait_until(self.ends)
        return super().result(timeout)


class LaneSender:
    """Stands in for the preload's one sender thread: each send starts when the previous one ended (or now)
    and overlaps the poller's next claim, without moving the poller's clock."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.free = -math.inf

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[None]:
        poller_now = self.sim.now()
        self.sim.set_now(max(poller_now, self.free))
        error: Exception | None = None
        try:
            fn(*args)
        except Exception as exc:
            error = exc
        self.free = self.sim.now()
        self.sim.set_now(poller_now)
        return _LaneFuture(self.sim, self.free, error)

    def shutdown(self, wait: bool = True) -> None:
        pass


class SimTarget:
    """Every target answers 200 after ``target_ms`` (the worker's calls of a batch run at once)."""

    def __init__(self, milliseconds: float) -> None:
        self.milliseconds = milliseconds

    def call(self, request: TargetRequest) -> TargetResponse:
        return TargetResponse(200, "", None, duration_ms=int(self.milliseconds))


class SimWorker(Worker):
    """The real worker, its batch's calls made in this thread: they run at once, so they all end together
    ``target_ms`` later and land in one wave (the real ``land_wave``: results, slots, retries, alerts)."""

    sim: Simulation

    def call_targets(
        self, calls: list[TargetCall], started: datetime, lease_until: datetime
    ) -> dict[str, WorkReport | Exception]:
        if not calls:
            return {}
        flight = Flight({call.run.run_id: call for call in calls})
        wave: list[tuple[TargetCall, Future[TargetResponse]]] = []
        longest = 0.0
        for call in calls:
            future: Future[TargetResponse] = Future()
            try:
                response = self.call_target(call, lease_until)
                longest = max(longest, response.duration_ms / 1000)
                future.set_result(response)
            except Exception as exc:
                future.set_exception(exc)
            wave.append((call, future))
        self.sim.spend(longest, "target")
        flight.land([call.run.run_id for call in calls])
        return self.land_wave(wave, started, flight)


class Actor:
    def step(self) -> float | None:
        """Run until the actor waits; the virtual time (s from midnight) it wakes again, or None."""
        raise NotImplementedError


class PollerActor(Actor):
    """A real ``Poller.run_until`` in a thread that runs only while it holds the baton."""

    def __init__(self, sim: Simulation, poller: Poller, name: str) -> None:
        self.sim, self.poller, self.name = sim, poller, name
        self._turn = threading.Event()
        self._back = threading.Event()
        self._wake: float | None = None
        self.finished = False
        self.peak_rows = 0
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)
        self.thread.start()

    def _main(self) -> None:
        self._turn.wait()
        self._turn.clear()
        try:
            self.poller.run_until(
                stop=lambda: self.sim.stopping,
                sleep=self._sleep,
                on_error=self.sim.errors.append,
            )
        finally:
            self.finished = True
            self._back.set()

    def _sleep(self, seconds: float) -> None:
        self._note_rows()
        self._wake = self.sim.now() + seconds
        self._back.set()
        self._turn.wait()
        self._turn.clear()

    def _note_rows(self) -> None:
        preload = self.poller.preload
        if preload is not None:
            self.peak_rows = max(self.peak_rows, preload.rows_in_memory)

    def step(self) -> float | None:
        if self.finished:
            return None
        self._back.clear()
        self._turn.set()
        self._back.wait()
        return None if self.finished else self._wake


# The simulation starts 40 s before midnight (before the fan-out's launch lead); what actors spend is tallied
# from 20 s before it (the preload's approach), so idle sweeps do not weigh in ``bound_by``.
TALLY_FROM_S = -20.0


class HelperActor(PollerActor):
    """A helper invocation (``duetime.scheduling.fan_out``): ``PollerShift.serve_helper`` on its slice, under
    its own lease, from when Lambda has started it (the launch's ``invoke_ms`` and a cold start later)."""

    def __init__(self, sim: Simulation, poller: Poller, name: str, assignment: HelperAssignment) -> None:
        self.assignment = assignment
        self.memory_mb = sim.model.helper_memory_mb
        self.started_at: float | None = None
        self.ended_at: float | None = None
        super().__init__(sim, poller, name)

    def _main(self) -> None:
        self._turn.wait()
        self._turn.clear()
        self.started_at = self.sim.now()
        try:
            shift = PollerShift(self.poller, self.sim.store, LeaseTimings())
            shift.serve_helper(self.name, self.assignment, self._sleep, stop=lambda: self.sim.stopping)
        except Exception as exc:
            self.sim.errors.append(exc)
        finally:
            self.ended_at = self.sim.now()
            self.finished = True
            self._back.set()


class SimHelpers:
    """Implements ``duetime.scheduling.fan_out.HelperLauncher`` on the simulation: each launch a
    ``HelperActor``."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.parent: Poller | None = None  # the holder whose slices these are

    def launch(self, assignment: HelperAssignment) -> None:
        sim, m = self.sim, self.sim.model
        assert self.parent is not None
        poller = self.parent.alone(assignment.partitions)
        sim.use_lanes(poller)
        actor = HelperActor(sim, poller, f"helper-{assignment.lease_name}", assignment)
        sim.helpers.append(actor)
        sim._schedule(sim.now() + (m.invoke_ms + m.helper_cold_start_ms) / 1000, actor)


class WorkerSlot(Actor):
    """One concurrent batch of the SQS event source, invoking one worker environment."""

    def __init__(self, sim: Simulation, index: int) -> None:
        self.sim, self.index = sim, index
        self.worker = SimWorker(
            sim.store,
            sim.store,
            sim.queue,
            sim.alerts,
            SimTarget(sim.model.target_ms),
            sim.clock,
            owner=f"w{index}",
        )
        self.worker.sim = sim
        self.warm = index < sim.model.provisioned_workers
        self.batches = 0
        self.busy_s = 0.0
        self.parked = False

    def step(self) -> float | None:
        sim, m = self.sim, self.sim.model
        began = sim.now()
        received = sim.queue.receive(BATCH)
        if not received:
            upcoming = sim.queue.next_visible()
            if upcoming is not None:
                return max(_seconds(upcoming), sim.now())
            self.parked = True
            sim.parked.append(self)
            return None
        if not self.warm:
            sim.spend(m.cold_start_ms / 1000, "cold_start")
            self.warm = True
        sim.spend(m.invoke_ms / 1000)
        sim.spend(m.worker_cpu_s(len(received)), "cpu")
        outcome = work_batch(self.worker, [(r.message_id, r.body) for r in received])
        failed = set(outcome.failed)
        sim.failed_messages += len(failed)
        done = [r.receipt_handle for r in received if r.message_id not in failed]
        if done:
            sim.queue.delete(done)
        self.batches += 1
        self.busy_s += sim.now() - began
        sim.batch_runs += len(received)
        return sim.now()


@dataclass
class _Event:
    at: float
    seq: int
    actor: Actor

    def __lt__(self, other: _Event) -> bool:
        return (self.at, self.seq) < (other.at, other.seq)


class Simulation:
    def __init__(self, model: AwsModel, jobs: int, jitter: int, exact_fraction: float) -> None:
        self.model = model
        self.jobs = jobs
        self.jitter = jitter
        self.exact_fraction = exact_fraction
        self.clock = ManualClock(MIDNIGHT - timedelta(seconds=40))  # before the fan-out's launch lead
        self.meter = KeyMeter(model.key_write_limit)
        # Tables and their indexes ("jobs", "jobs/due", "runs", "runs/reap", "control"): each takes
        # table_write_capacity() units a second (on-demand throughput, warm throughput, the table quota).
        self.tables = KeyMeter(model.table_write_capacity(), model.table_write_capacities(TABLE_NAMES))
        self.sqs_requests = 0
        self.current: Actor | None = None
        # Virtual seconds each kind of actor spent in its phase, by what it waited on (cpu, latency, target,
        # cold_start, key_throttle, table_throttle).
        self.spent: dict[str, defaultdict[str, float]] = {
            "poller": defaultdict(float),
            "helper": defaultdict(float),
            "worker": defaultdict(float),
        }
        self.store = SimStore(self)
        self.queue = SimQueue(self)
        self.alerts = MemoryAlerts()
        self.errors: list[Exception] = []
        self.stopping = False
        self.parked: list[WorkerSlot] = []
        self.helpers: list[HelperActor] = []
        self._events: list[_Event] = []
        self._seq = itertools.count()
        self.first_message: float | None = None
        self.slots: list[WorkerSlot] = []
        self.claims_by_partition_second: Counter[tuple[int, int]] = Counter()
        self.claims = 0
        self.last_claim = -math.inf
        self.starts: dict[str, float] = {}
        self.lateness: list[float] = []
        self.starts_by_second: Counter[int] = Counter()
        self.finished = 0
        self.deferred = 0
        self.failed_messages = 0
        self.batch_runs = 0
        self.events = 0
        self.peak_concurrency = 0

    # --- the clock --------------------------------------------------------------------------------------

    def now(self) -> float:
        return _seconds(self.clock.now())

    def set_now(self, seconds: float) -> None:
        self.clock.set(MIDNIGHT + timedelta(seconds=seconds))

    def spend(self, seconds: float, cause: str = "latency") -> None:
        """Move the running actor's clock on by ``seconds`` spent on ``cause`` (tallied while its phase
        lasts: a poller's until every run is claimed, a worker's until every run has started)."""
        if seconds > 0:
            self.clock.advance(seconds)
            worker = isinstance(self.current, WorkerSlot)
            kind = "worker" if worker else "helper" if isinstance(self.current, HelperActor) else "poller"
            if self.now() < TALLY_FROM_S:
                return  # the idle sweeps before the spike's approach: not the spike's
            if len(self.starts) < self.jobs if worker else self.claims < self.jobs:
                self.spent[kind][cause] += seconds

    def memory_mb(self) -> int:
        """The running actor's memory size (a helper's, or the pollers')."""
        return getattr(self.current, "memory_mb", self.model.poller_memory_mb)

    def use_lanes(self, poller: Poller) -> None:
        """The preload's sends on the simulation's lanes, not a real thread."""
        assert poller.preload is not None
        poller.preload.send_with(LaneSender(self))

    def write(
        self, keys: Mapping[str, float], tables: Mapping[str, float], at: float | None = None
    ) -> tuple[float, str]:
        """Offer a write's units to its partition keys and to the tables and indexes it lands on; the wait
        before all of them have taken it, and which kind of limit held it longest."""
        at = self.now() if at is None else at
        key_wait = self.meter.write_many(keys, at)
        table_wait = self.tables.write_many(tables, at)
        return (table_wait, "table_throttle") if table_wait > key_wait else (key_wait, "key_throttle")

    def wait_until(self, seconds: float) -> None:
        if seconds > self.now():
            self.set_now(seconds)

    # --- what the store and queue report ----------------------------------------------------------------

    def claimed_at(self, partition: int, runs: int, at: float) -> None:
        self.claims += runs
        self.claims_by_partition_second[partition, math.floor(at)] += runs
        self.last_claim = max(self.last_claim, at)

    def started(self, runs: Any) -> None:
        at = self.now()
        for run in runs:
            if run.attempt == 1 and run.run_id not in self.starts:
                self.starts[run.run_id] = at
                self.lateness.append(at - _seconds(run.fire_at))
                self.starts_by_second[math.floor(at)] += 1

    def messages_visible(self, at: float) -> None:
        """Messages show at ``at``: the event source notices (and starts growing), parked slots wake."""
        if self.first_message is None:
            self.first_message = at
            for slot in self.slots[self.model.esm_start() :]:
                self._schedule(self._activation(slot.index), slot)
        for slot in self.parked:
            slot.parked = False
            self._schedule(at, slot)
        self.parked.clear()

    def _activation(self, index: int) -> float:
        """When the event source's ``index``-th concurrent batch starts (``esm_activation``)."""
        assert self.first_message is not None
        return self.first_message + esm_activation(self.model, index)

    def _schedule(self, at: float, actor: Actor) -> None:
        heapq.heappush(self._events, _Event(at, next(self._seq), actor))

    # --- the run ----------------------------------------------------------------------------------------

    def run(self, horizon_s: float) -> None:
        self._load()
        pollers = [self._start_poller(g) for g in range(self.model.poller_groups)]
        self.slots = [WorkerSlot(self, i) for i in range(self.model.esm_cap())]
        for slot in self.slots[: self.model.esm_start()]:
            self._schedule(self.now(), slot)
        self._play(horizon_s)
        self._stop([*pollers, *self.helpers])
        self.pollers = pollers

    def _load(self) -> None:
        """The teams and the midnight's jobs, written before the timeline starts."""
        created = MIDNIGHT - timedelta(minutes=1)
        jobs = midnight_jobs(self.jobs, MIDNIGHT, self.jitter, self.exact_fraction, created, self.model.teams)
        for team in range(min(self.model.teams, self.jobs)):
            self.store.put_team(Team(team_id=f"t{team}"))
        self.store.load_jobs(jobs, created)

    def _start_poller(self, group: int) -> PollerActor:
        """Poller group ``group``'s real poller (with its helpers if the model fans out), scheduled now."""
        m = self.model
        groups = m.poller_groups
        partitions = [p for p in range(PARTITIONS) if p * groups // PARTITIONS == group]
        # Paced claims (duetime.scheduling.claim_pace): each group its share of what the tables take of claims
        # + starts.
        capacities = m.table_write_capacities(TABLE_NAMES)
        group_rate = claims_per_second_within(capacities) / groups if m.claims_paced else None
        policy = FanOutPolicy(
            holder_rows=m.fan_out_holder_rows, partitions_per_helper=m.fan_out_partitions_per_helper
        )
        helpers = SimHelpers(self) if m.fan_out else None
        poller = Poller(
            self.store,
            self.store,
            self.queue,
            self.alerts,
            self.clock,
            PollerConfig(partitions, claims_per_second=group_rate),
            self.store,
            leases=self.store,
            helpers=helpers,
            fan_out=policy,
        )
        if helpers is not None:
            helpers.parent = poller
        self.use_lanes(poller)
        actor = PollerActor(self, poller, f"poller-{group}")
        self._schedule(self.now(), actor)
        return actor

    def _play(self, horizon_s: float) -> None:
        """Step the actors in virtual-time order until every job started or ``horizon_s`` passed."""
        while self._events and len(self.starts) < self.jobs:
            event = heapq.heappop(self._events)
            if event.at > horizon_s:
                break
            self.set_now(event.at)
            self.events += 1
            current = self.current = event.actor
            if (
                isinstance(current, WorkerSlot)
                and self.first_message is not None
                and current.index >= esm_concurrency(self.model, event.at - self.first_message)
            ):
                self._schedule(self._activation(current.index), current)  # the event source has not grown yet
                continue
            wake = current.step()
            if wake is not None:
                self._schedule(wake, current)

    def _stop(self, pollers: Sequence[PollerActor]) -> None:
        """Each poller and helper stops after its next sweep."""
        self.stopping = True
        for poller_actor in pollers:
            self.current = poller_actor
            next_wake: float | None = self.now()
            for _ in range(100):
                if poller_actor.finished or next_wake is None:
                    break
                self.set_now(max(self.now(), next_wake))
                next_wake = poller_actor.step()
            poller_actor.thread.join(timeout=5)


def run_midnight(
    jobs: int,
    jitter: int = 0,
    exact_fraction: float = 0.0,
    model: AwsModel | None = None,
    horizon_s: float | None = None,
) -> dict[str, Any]:
    model = model or AwsModel()
    if model.esm_forecast_pollers and not model.esm_min_pollers:  # what the prescaler switches on for it
        model = replace(model, esm_min_pollers=PrescalePolicy().pollers_for(jobs))
    wall = time.perf_counter()
    cpu = time.process_time()
    sim = Simulation(model, jobs, jitter, exact_fraction)
    sim.run(horizon_s if horizon_s is not None else jitter + 900.0)
    window = 60.0 + jitter
    workers = _WorkerFigures.of(sim)
    rows = max((p.peak_rows for p in sim.pollers), default=0)
    rss = model.poller_base_mb + rows * model.preload_bytes_per_row / 2**20
    estimate = plan_estimate(jobs, window, model, exact_fraction)
    result: dict[str, Any] = {
        **_run_figures(sim, jobs, jitter, exact_fraction),
        **_key_figures(sim),
        "poller_peak_rows_held": rows,
        "poller_peak_rss_mb": round(rss, 1),
        "poller_memory_mb": model.poller_memory_mb,
        **workers.figures(jobs, window),
        **_store_figures(sim),
        "time_spent_s": {k: {c: round(v, 1) for c, v in sorted(t.items())} for k, t in sim.spent.items()},
        "spike_cost_usd": spike_cost(sim, workers.busy),
        "calibration": calibration_used(model),
        "plan": _plan_figures(jobs, window, model, workers.rate),
        "plan_on_the_aws_model": estimate,  # duetime plan's arithmetic on this model (bench/plan_midnight.py)
        "decided_by_model": DECIDED_BY_MODEL,
        "model": model.as_dict(),
        "simulated_events": sim.events,
        "simulation_wall_s": round(time.perf_counter() - wall, 1),
        "simulation_cpu_s": round(time.process_time() - cpu, 1),
        "simulation_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    result["goals"] = _goals(result, jitter, rss, model)
    result["goal_met"] = all(result["goals"].values())
    result["bound_by"] = bound_by(sim, result, jitter)
    # The simulation over the plan, figure by figure: within 0.5-2 is within the model's stated error.
    result["simulation_over_plan"] = {
        name: _over(result[name], estimate[name]) for name in estimate if name in result
    }
    return result


def _run_figures(sim: Simulation, jobs: int, jitter: int, exact_fraction: float) -> dict[str, Any]:
    """The runs the simulation made and started: none lost or twice, when claimed and started, how late."""
    runs = sim.store.all_runs()
    started = len(sim.starts)
    lateness = sorted(sim.lateness)
    statuses = Counter(run.status.value for run in runs.values())
    return {
        "jobs": jobs,
        "jitter_s": jitter,
        "exact_fraction": exact_fraction,
        "runs_created": len(runs),
        "runs_started": started,
        "lost": jobs - started,
        "duplicate_runs": len(runs) - len({run.job_id for run in runs.values()}),
        "run_statuses": dict(sorted(statuses.items())),
        "seconds_to_all_claimed": round(sim.last_claim, 2) if sim.claims >= jobs else None,
        "seconds_to_all_started": round(max(sim.starts.values()), 2) if started >= jobs else None,
        "goal_met": None,  # set once the goals are known (kept here for the figures' order)
        "start_lateness_p50_s": _pct(lateness, 0.5),
        "start_lateness_p99_s": _pct(lateness, 0.99),
        "start_lateness_max_s": round(lateness[-1], 2) if lateness else None,
        "peak_claims_per_s_per_partition": max(sim.claims_by_partition_second.values(), default=0),
        "peak_starts_per_s": max(sim.starts_by_second.values(), default=0),
    }


def _key_figures(sim: Simulation) -> dict[str, Any]:
    """The writes on shared keys: the hottest, those past their limit, the peaks by kind of key."""
    hottest_key, hottest = sim.meter.hottest()
    return {
        "peak_write_units_per_s_hottest_key": round(hottest, 1),
        "hottest_key": hottest_key,
        "key_write_limit": sim.model.key_write_limit,
        "keys_over_limit": len(sim.meter.keys_over()),
        "keys_over_limit_sample": sim.meter.keys_over()[:5],
        "peak_write_units_per_s_by_key_kind": sim.meter.peak_by_kind(),
        "throttled_write_units": round(sim.meter.throttled_units, 1),
    }


@dataclass(frozen=True)
class _WorkerFigures:
    """The workers that worked batches, their mean batch cycle and each one's start rate."""

    busy: list[WorkerSlot]
    cycle_s: float
    rate: float  # runs started a second by one worker (nan: no batch)

    @classmethod
    def of(cls, sim: Simulation) -> _WorkerFigures:
        busy = [s for s in sim.slots if s.batches]
        cycle_s = sum(s.busy_s for s in busy) / max(1, sum(s.batches for s in busy))
        runs_per_batch = sim.batch_runs / max(1, sum(s.batches for s in busy))
        return cls(busy, cycle_s, runs_per_batch / cycle_s if cycle_s else math.nan)

    def figures(self, jobs: int, window: float) -> dict[str, Any]:
        known = self.rate == self.rate
        return {
            "worker_batch_cycle_s": round(self.cycle_s, 4),
            "worker_starts_per_s_each": round(self.rate, 1),
            "workers_used": len(self.busy),
            "workers_needed": math.ceil(jobs / window / self.rate) if known else None,
        }


def _store_figures(sim: Simulation) -> dict[str, Any]:
    """The store's side: deferrals, reap work, errors, helpers, the tables' capacities and peaks."""
    model = sim.model
    return {
        "deferred_runs": sim.deferred,
        "reap_check_moves": sim.store.check_moves,  # live runs whose reap check came (2 write units each)
        "reap_tickets": sim.store.tickets_written,  # one entry for up to 18 runs of a claim (reap_tickets)
        "reap_ticket_adoptions": sim.store.ticket_adoptions,  # ticketed runs still alive at their check
        "failed_messages": sim.failed_messages,
        "poller_errors": len(sim.errors),
        "helpers_invoked": len(sim.helpers),
        "table_write_capacity": model.table_write_capacities(TABLE_NAMES),
        "peak_table_wru_per_s": sim.tables.peaks(),
        "tables_over_capacity": sim.tables.keys_over(),
        "write_units_per_item": dict(sorted(sim.store.item_units.items())),
        "throttled_requests": sim.meter.throttled_writes + sim.tables.throttled_writes,
        "throttled_requests_by_limit": {
            "key_write_limit": sim.meter.throttled_writes,
            "table_write_capacity": sim.tables.throttled_writes,
        },
    }


def _plan_figures(jobs: int, window: float, model: AwsModel, worker_rate: float) -> dict[str, Any]:
    """What ``duetime plan`` says of this midnight at the simulated worker rate."""
    plan = capacity_plan(
        PlanInputs(
            spike_jobs=jobs,
            poller_groups=model.poller_groups,
            spike_window_s=int(window),
            worker_rate=round(worker_rate, 1) if worker_rate == worker_rate else 100.0,
        )
    )
    return {
        "peak_claims_per_s_per_partition": plan["peak_claims_per_s_per_partition"],
        "peak_wcu_per_s_reap_shard_key": plan["peak_wcu_per_s_reap_shard_key"],
        "peak_wcu_per_s_due_bucket_key": plan["peak_wcu_per_s_due_bucket_key"],
        "poller_preload_mb": plan["poller_preload_mb"],
        "workers_for_peak_at_simulated_rate": plan["workers_for_peak"],
    }


def _goals(result: Mapping[str, Any], jitter: int, rss: float, model: AwsModel) -> dict[str, bool]:
    # Started within 60 s: of midnight without jitter; of each run's own (jittered) second with it.
    in_time = result["seconds_to_all_started"] is not None and (
        result["seconds_to_all_started"] <= 60.0
        if jitter == 0
        else (result["start_lateness_max_s"] or 0.0) <= 60.0
    )
    return {
        "none_lost": result["lost"] == 0 and result["duplicate_runs"] == 0,
        "all_started_within_60_s": bool(in_time),
        "no_key_over_its_limit": result["keys_over_limit"] == 0,
        "poller_inside_its_memory": rss <= model.poller_memory_mb,
        "no_table_or_index_over_its_capacity": not result["tables_over_capacity"],
    }


def _over(simulated: Any, planned: Any) -> float | None:
    """The simulation's figure over the plan's; of a bill (``spike_cost_usd``), its totals."""
    if isinstance(simulated, dict) and isinstance(planned, dict):
        simulated, planned = simulated.get("total"), planned.get("total")
    return round(simulated / planned, 2) if simulated and planned else None


def plan_estimate(jobs: int, window_s: float, model: AwsModel, exact_fraction: float) -> dict[str, Any]:
    """``duetime plan``'s arithmetic for the spike the simulation runs, on the same model: its tables and
    indexes at the model's warm throughput (``ddb_warm_write_units``), as the simulation meters them."""
    warm = parse_units(model.ddb_warm_write_units, NEW_TABLE_WRITE_UNITS)
    return midnight_estimate(jobs, window_s, model, exact_fraction=exact_fraction, warm_write_units=warm)


def calibration_used(model: AwsModel) -> dict[str, Any]:
    """The saved calibration the model's CPU figures come from (its commit and date), and any a flag
    overrode (a what-if: the figure is then the flag's, not the code's)."""
    try:
        cal = calibration.saved()
    except calibration.NoCalibration as missing:
        return {"saved": None, "why": str(missing), "figures": {n: getattr(model, n) for n in CALIBRATED}}
    overridden = {n: getattr(model, n) for n in CALIBRATED if getattr(model, n) != getattr(cal, n)}
    return cal.summary() | {"overridden_by_flags": overridden}


def spike_cost(sim: Simulation, busy: Sequence[WorkerSlot]) -> dict[str, Any]:
    """What the simulated horizon bills, at ``prices.PRICES_USD``: the workers' duration (their busy time,
    cold starts included) and requests (one a batch), the pollers' duration while they claim the spike,
    the helpers' (from their cold start to their return) and requests,
    the write units offered to every table and index, and the SQS
    requests. Left out: read units, and the capacity bought ahead of the spike (``duetime plan``)."""
    m = sim.model
    worker_gb_s = sum(s.busy_s for s in busy) * m.worker_memory_mb / 1024
    poller_gb_s = sum(sim.spent["poller"].values()) * m.poller_memory_mb / 1024
    helper_s = sum((h.ended_at or sim.now()) - h.started_at for h in sim.helpers if h.started_at is not None)
    helper_gb_s = (helper_s + len(sim.helpers) * m.helper_cold_start_ms / 1000) * m.helper_memory_mb / 1024
    parts = {
        "worker_duration": worker_gb_s * PRICES_USD["lambda_gb_second_arm64"],
        "worker_requests": sum(s.batches for s in busy) * PRICES_USD["lambda_request"],
        "poller_duration": poller_gb_s * PRICES_USD["lambda_gb_second_arm64"],
        "helper_duration": helper_gb_s * PRICES_USD["lambda_gb_second_arm64"],
        "helper_requests": len(sim.helpers) * PRICES_USD["lambda_request"],
        "dynamodb_writes": sim.tables.total() * PRICES_USD["dynamodb_write_request_unit"],
        "sqs_requests": sim.sqs_requests * PRICES_USD["sqs_request"],
        # Provisioned mode switched on for the spike (the prescaler: from 5-10 minutes before it until its
        # first look after the queue drained, esm_forecast_hold_minutes), the minimum pollers billed.
        "event_pollers": (
            m.esm_min_pollers * m.esm_forecast_hold_minutes / 60 * PRICES_USD["lambda_sqs_event_poller_hour"]
            if m.esm_forecast_pollers
            else 0.0
        ),
    }
    return {"total": round(sum(parts.values()), 4)} | {k: round(v, 4) for k, v in parts.items()}


CAUSE_LIMITS = {
    "cpu": "CPU (the function's memory_mb: its vCPU share)",
    "latency": "request latencies (ddb_*_ms, sqs_*_ms)",
    "target": "the target's answer (target_ms)",
    "cold_start": "cold starts (cold_start_ms)",
    "key_throttle": "key_write_limit",
    "table_throttle": "table_write_capacity (ddb_warm_wru_per_s, ddb_previous_peak_wru_per_s, quota)",
}


def bound_by(sim: Simulation, result: dict[str, Any], jitter: int) -> dict[str, str]:
    """Which limit set each phase's pace. Claims: the due times when they kept up with them (claimed within
    a second of the last run falling due), else what the pollers spent most time on. Starts: the claims
    when the last start came within 2 s of the last claim, else the event source's concurrency, at its
    cap (``esm_cap_bound_by``) or still ramping (the faster of its own ramp and Lambda's scaling rate
    setting the pace); beside each, what one poller or worker spent most time on."""
    m = sim.model

    def most(kind: str) -> str:
        spent = sim.spent[kind]
        return CAUSE_LIMITS[max(spent, key=lambda c: spent[c])] if spent else "nothing: idle"

    last_due = float(jitter)
    claimed = result["seconds_to_all_claimed"]
    claims = "due times" if claimed is not None and claimed <= last_due + 1 else most("poller")
    started = result["seconds_to_all_started"]
    if started is None or sim.first_message is None:
        starts = "unfinished within the horizon"
    elif sim.claims and started - sim.last_claim <= 2:
        starts = "claims"
    else:
        full_at = sim.first_message + esm_activation(m, m.esm_cap() - 1)
        if full_at <= started:
            starts = m.esm_cap_bound_by()
        else:
            ramp_s = (m.esm_cap() - m.esm_start()) * 60 / m.esm_growth_per_minute()
            lambda_s = 10.0 * ((m.esm_cap() - 1) // m.lambda_scale_per_10s)
            starts = (
                "lambda_scale_per_10s"
                if lambda_s > ramp_s
                else "the event source's ramp (esm_*scale_per_minute)"
            )
    return {
        "claims": claims,
        "claims_per_poller": most("poller"),
        "starts": starts,
        "starts_per_worker": most("worker"),
    }


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    return round(values[min(len(values) - 1, int(q * len(values)))], 2)


DECIDED_BY_MODEL = {
    "seconds_to_all_claimed": "model: poller CPU per claim over its vCPU share, ddb_batch_statement_ms, "
    "claim_concurrency, key throttling; code: order, chunks, sweeps, what is claimed",
    "seconds_to_all_started": "model: esm_initial, esm_scale_per_minute, max_concurrency (or esm_*_pollers "
    "in provisioned mode), cold_start_ms, "
    "the worker's latencies and CPU, target_ms; code: the requests each batch makes",
    "start_lateness_*": "as seconds_to_all_started",
    "peak_claims_per_s_per_partition": "model: the claim rate; code: which partitions a chunk holds",
    "peak_write_units_per_s_hottest_key": "code: which writes, on which keys, in what order (units by "
    "AWS's billing rules); model: when they land",
    "poller_peak_rss_mb": "code: rows the preload holds; measured once (BENCHMARKS.md, Preload memory): "
    "bytes per row and the base process",
    "worker_starts_per_s_each": "model: latencies, CPU and target_ms over the requests the code makes",
    "workers_needed": "model: from worker_starts_per_s_each",
    "lost, duplicate_runs, run_statuses, deferred_runs": "code, on the twin (conditions, claims, leases)",
    "peak_table_wru_per_s, throttled_requests": "code: which writes, on which tables and indexes, of which "
    "item sizes (units by AWS's billing rules); model: when they land, table_write_capacity",
    "spike_cost_usd": "AWS list prices (prices.py) over the model's durations and the code's requests",
    "bound_by": "model: which modelled limit the virtual time was spent on",
    "calibration": "measured: bench runcpu on this machine (its commit and date)",
}


def add_midnight_flags(parser: argparse.ArgumentParser) -> None:
    """``duetime bench midnight``'s flags: the workload, then one flag per knob of the model."""
    parser.add_argument(
        "--simulate",
        action="store_true",
        help="required: the bench is a simulation (virtual time, AWS modelled), not a measurement",
    )
    parser.add_argument("--jobs", type=int, default=500_000)
    parser.add_argument("--jitter", type=int, default=0, help="jitter window in seconds (0: all at :00)")
    parser.add_argument("--exact-fraction", type=float, default=0.0)
    parser.add_argument("--horizon", type=float, help="virtual seconds after midnight to give up at")
    parser.add_argument("--json", action="store_true")
    model = parser.add_argument_group("the AWS model (defaults and sources: BENCHMARKS.md)")
    for name, kind, default in model_flags():
        model.add_argument(f"--{name}", type=kind, default=default, help=f"default {default}")


def run_midnight_args(args: argparse.Namespace) -> dict[str, Any]:
    if not args.simulate:
        raise SystemExit("duetime bench midnight runs only as a simulation: pass --simulate")
    given = {f.name: getattr(args, f.name) for f in fields(AwsModel)}
    model = AwsModel(**{name: value for name, value in given.items() if value is not None})
    return run_midnight(args.jobs, args.jitter, args.exact_fraction, model, args.horizon)
