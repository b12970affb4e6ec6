"""Hypothesis stateful test of the claim / lease / result protocol on the real store adapter (DynamoDB
Local), with an injected clock and arbitrary interleavings of pollers, workers, duplicated and dropped
messages, heartbeats, lease expiry and the reaper. Three jobs fall due at the same second, so every claim of
them is covered by a reap ticket (``reap_tickets``) and the reaper's passes settle tickets and adopt runs."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from duetime.adapters.dynamodb.catalog import DynamoCatalog
from duetime.adapters.dynamodb.reap_tickets import listed_run_ids
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.dynamodb.tables import TableNames, create_tables
from duetime.api.service import JobService
from duetime.domain.claim_plan import DEFAULT_QUEUE_DEADLINE, PlannedRun, new_run
from duetime.domain.clock import ManualClock
from duetime.domain.errors import Conflict
from duetime.domain.ids import MANUAL_MARK, is_manual_run_id, partition_of
from duetime.domain.models import Run, RunResult, RunStatus
from duetime.domain.timeutil import whole_seconds
from duetime.execution.deadlines import check_deadlines, settle_succeeded
from duetime.ports import Alert, RunMessage
from duetime.ports.queue import decode, encode
from duetime.scheduling.poller import PollerConfig, claim_due_jobs, recover_runs
from duetime.wiring import run_budget

from ..job_support import create_job
from .conftest import new_clients

LEASE = timedelta(seconds=60)
WORKERS = ["w1", "w2", "w3"]
JOBS = 3  # due at the same second: a claim of them writes a reap ticket
DYNAMODB, _ = new_clients()


class ListQueue:
    """SQS stand-in: the test decides when messages arrive, twice, or never. The messages are kept in an
    order of the test's own (``order``, then the attempt), so that hypothesis, replaying an example, draws
    the same messages. Not in the order of the sends: pollers and the reaper send per partition, and a
    job's partition comes from its random id, so two replays of one example would send in other orders."""

    def __init__(self) -> None:
        self.messages: list[RunMessage] = []
        self.order: Callable[[str], Any] = str

    def send(self, messages: Any, delay_seconds: int = 0) -> None:
        self.messages.extend(messages)
        self.messages.sort(key=lambda m: (self.order(m.run_id), m.attempt))  # stable: ties keep their order


class NoAlerts:
    def publish(self, alert: Alert) -> None:
        return


class KeptAlerts:
    def __init__(self) -> None:
        self.published: list[Alert] = []

    def publish(self, alert: Alert) -> None:
        self.published.append(alert)


class Protocol(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        prefix = f"proto{uuid.uuid4().hex[:8]}"  # every example starts from empty tables
        self.names = TableNames(f"{prefix}-jobs", f"{prefix}-runs", f"{prefix}-control")
        create_tables(DYNAMODB, self.names)
        self.store = DynamoStore(DYNAMODB, self.names)
        self.clock = ManualClock(datetime(2026, 12, 1, 10, 0, 30, tzinfo=UTC))
        self.queue = ListQueue()
        self.team = f"t{uuid.uuid4().hex[:8]}"
        spec = {
            "name": "p",
            "schedule": {"rate": "1 minute"},
            "target": {"url": "https://example.com"},
            "exact": True,
            "retry": {"max_attempts": 3, "backoff_seconds": [0]},
        }
        # The first is also watched by a success deadline of a minute (``duetime.execution.deadlines``).
        self.jobs = [
            create_job(
                self.store,
                self.team,
                {**spec, "success_deadline_seconds": 60} if i == 0 else spec,
                self.clock.now(),
            )
            for i in range(JOBS)
        ]
        self.job = self.jobs[0]  # the one triggered by hand and given rows in the way
        # One more, held to overlap skip: its claims write its run and its active run in one transaction.
        self.skip_job = create_job(self.store, self.team, {**spec, "overlap": "skip"}, self.clock.now())
        self.jobs.append(self.skip_job)
        self.job_index = {job.id: index for index, job in enumerate(self.jobs)}
        self.queue.order = self.stable_key
        self.catalog = DynamoCatalog(DYNAMODB, self.names)
        self.service = JobService(
            self.catalog, self.store, self.queue, self.clock, run_budget=run_budget(self.catalog)
        )
        team_record = self.store.get_team(self.team)
        assert team_record is not None
        self.team_record = team_record
        self.config = PollerConfig(partitions=list(range(64)), preload_lead=None)
        self.held: dict[str, Run] = {}  # worker (or batch/run) -> the run as its lease handed it over
        self.terminal_writes: dict[str, int] = {}  # run id -> accepted terminal result writes
        self.claimed_nominals: set[str] = set()
        self.claimed_in_order: list[str] = []  # the same runs, in an order replays repeat (for draws)
        self.noted_at: dict[str, int] = {}  # run id -> its place in claimed_in_order
        self.batches = 0
        self.last_next_nominal = {job.id: job.state.next_nominal_at for job in self.jobs}
        self.cancelled: set[str] = set()
        self.alerts = KeptAlerts()  # missed and recovered alerts, from deadline checks and worker settles

    def stable_key(self, run_id: str) -> tuple[int, str, int]:
        """A run's place in the test's own order: its job's index, its nominal second, then the order the
        test first saw it in. Never a manual run's random nonce: two triggers in one second would be
        ordered differently when hypothesis replays an example, which then draws other runs (a CI run
        failed on it with ``FlakyStrategyDefinition``)."""
        job_id, _, occurrence = run_id.partition("@")
        second, _, _ = occurrence.partition(MANUAL_MARK)
        return self.job_index.get(job_id, -1), second, self.noted_at.get(run_id, -1)

    def claim_noted(self, run_id: str) -> None:
        self.noted_at[run_id] = len(self.claimed_in_order)
        self.claimed_nominals.add(run_id)
        self.claimed_in_order.append(run_id)

    @rule(seconds=st.sampled_from([1, 20, 45, 61, 130]))
    def advance(self, seconds: int) -> None:
        self.clock.advance(seconds)

    @rule()
    def poll(self) -> None:
        report = claim_due_jobs(self.store, self.queue, self.config, self.clock.now())
        for run in sorted(report.runs, key=lambda r: self.stable_key(r.run_id)):
            assert run.run_id not in self.claimed_nominals, "a second run for one nominal time"
            self.claim_noted(run.run_id)
        for job_id in self.last_next_nominal:
            job = self.store.get_job(job_id)
            assert job is not None and job.state.next_fire_at is not None
            assert job.state.next_fire_at > self.clock.now(), "after a poll the job's next due time is ahead"

    @rule()
    def trigger(self) -> None:
        """Someone presses "run now", in whatever second the clock is at (the job's own nominal second
        included): a manual run of its own, never in the way of a scheduled one."""
        run = self.service.trigger(self.team_record, self.job.id)
        assert is_manual_run_id(run.run_id) and run.run_id not in self.claimed_nominals
        self.claim_noted(run.run_id)

    @rule()
    def a_run_row_is_already_there(self) -> None:
        """A row for the job's next nominal time appears before the claim (a restored table, a row written
        by hand): the claim must leave it alone and still move the schedule."""
        job = self.store.get_job(self.job.id)
        assert (
            job is not None and job.state.next_nominal_at is not None and job.state.next_fire_at is not None
        )
        now = self.clock.now()
        planned = PlannedRun(job.state.next_nominal_at, job.state.next_fire_at)
        run = new_run(job, planned, now, now + DEFAULT_QUEUE_DEADLINE)
        if self.catalog.insert_run(run):
            self.claim_noted(run.run_id)
            self.queue.messages.append(RunMessage(run.run_id, run.attempt))

    @rule(wait=st.booleans())
    def reap(self, wait: bool) -> None:
        """The reaper runs, optionally after every live lease has run out (a paused or dead worker)."""
        if wait:
            self.clock.advance(LEASE.total_seconds() + 1)
        recover_runs(self.store, self.queue, NoAlerts(), self.config, self.clock.now())

    @precondition(lambda self: self.queue.messages)
    @rule(data=st.data())
    def duplicate_a_message(self, data: st.DataObject) -> None:
        self.queue.messages.append(data.draw(st.sampled_from(self.queue.messages)))

    @precondition(lambda self: self.queue.messages)
    @rule(data=st.data())
    def drop_a_message(self, data: st.DataObject) -> None:
        self.queue.messages.pop(data.draw(st.integers(0, len(self.queue.messages) - 1)))

    @precondition(lambda self: self.queue.messages)
    @rule(worker=st.sampled_from(WORKERS), data=st.data())
    def deliver(self, worker: str, data: st.DataObject) -> None:
        message = self.queue.messages.pop(data.draw(st.integers(0, len(self.queue.messages) - 1)))
        now = self.clock.now()
        run = self.store.acquire_lease(message.run_id, message.attempt, worker, now, now + LEASE)
        if run is not None:
            for other, held in self.held.items():
                if held.run_id == run.run_id and other != worker:
                    assert held.attempt < run.attempt, "two workers were handed the same attempt"
            self.held[worker] = run

    @precondition(lambda self: any(m.run is not None for m in self.queue.messages))
    @rule(data=st.data())
    def a_message_lies(self, data: st.DataObject) -> None:
        """A message carries a run that is not the stored one (forged, garbled): its lease, if any, must
        still be the stored run's (``deliver_a_batch``)."""
        carrying = [i for i, m in enumerate(self.queue.messages) if m.run is not None]
        index = data.draw(st.sampled_from(carrying))
        run = self.queue.messages[index].run
        assert run is not None
        elsewhere = run.target.model_copy(update={"url": "https://attacker.example/steal"})
        self.queue.messages[index] = RunMessage.carrying(run.model_copy(update={"target": elsewhere}))

    @precondition(lambda self: len(self.queue.messages) >= 2)
    @rule(worker=st.sampled_from(WORKERS), data=st.data())
    def deliver_a_batch(self, worker: str, data: st.DataObject) -> None:
        """A worker's batch of two or three messages, leased in one call: the runs a poller's messages
        carry are leased without a read when they are the stored ones, and as read when they are not (a
        run adopted by the reaper, requeued, already started): the leases are the stored runs either way."""
        batch = [
            self.queue.messages.pop(data.draw(st.integers(0, len(self.queue.messages) - 1)))
            for _ in range(data.draw(st.integers(2, min(3, len(self.queue.messages)))))
        ]
        chosen: dict[str, RunMessage] = {}  # one message a run, the highest attempt (``Worker``)
        for message in batch:
            if message.run_id not in chosen or message.attempt > chosen[message.run_id].attempt:
                chosen[message.run_id] = decode(encode(message))  # as the queue hands it over
        self.batches += 1
        now, owner = self.clock.now(), f"{worker}-batch-{self.batches}"
        leased = self.store.acquire_leases(
            [(m.run_id, m.attempt) for m in chosen.values()],
            owner,
            now,
            now + LEASE,
            carried={m.run_id: m.run for m in chosen.values() if m.run is not None},
        )
        for run in leased.values():
            assert run == self.store.get_run(run.run_id), "a lease returned a run that is not the stored one"
            for held in self.held.values():
                assert held.run_id != run.run_id or held.attempt < run.attempt, "one attempt leased twice"
            self.held[f"{owner}/{self.stable_key(run.run_id)}"] = run

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        worker = data.draw(st.sampled_from(sorted(self.held)))
        if worker in self.held:
            held, now = self.held[worker], self.clock.now()
            assert held.owner is not None
            self.store.extend_lease(held.run_id, held.attempt, held.owner, now, now + LEASE)

    @precondition(lambda self: self.held)
    @rule(data=st.data(), succeed=st.booleans())
    def finish(self, data: st.DataObject, succeed: bool) -> None:
        worker = data.draw(st.sampled_from(sorted(self.held)))
        held = self.held.pop(worker)  # the worker's view: the run as leased, perhaps stale by now
        run_id, attempt, owner = held.run_id, held.attempt, held.owner
        run = self.store.get_run(run_id)
        assert run is not None and owner is not None
        status = RunStatus.SUCCEEDED if succeed else RunStatus.FAILED
        accepted = self.store.record_result(held, owner, status, RunResult(duration_ms=1), self.clock.now())
        current = self.store.get_run(run_id)
        assert current is not None
        if accepted:
            assert run.owner == owner and run.attempt == attempt, "a stale worker's result was accepted"
            self.terminal_writes[run_id] = self.terminal_writes.get(run_id, 0) + 1
            assert current.status is status
            if succeed:  # as the worker does: a met deadline settled at once
                settle_succeeded(self.store, self.alerts, [held], self.clock.now())
        else:
            assert run.owner != owner or run.attempt != attempt or run.status is not RunStatus.RUNNING

    @precondition(lambda self: self.claimed_nominals)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        """Someone cancels a run, in whatever state it is: queued, leased, waiting to retry, finished."""
        run_id = data.draw(st.sampled_from(self.claimed_in_order))
        before = self.store.get_run(run_id)
        assert before is not None
        try:
            cancelled = self.service.cancel_run(self.team_record, run_id)
        except Conflict:
            assert before.status.terminal, "an unfinished run could not be cancelled"
            return
        assert not before.status.terminal, "a finished run was cancelled"
        assert cancelled.status is RunStatus.CANCELLED
        self.cancelled.add(run_id)
        self.terminal_writes[run_id] = self.terminal_writes.get(run_id, 0) + 1

    @rule()
    def check_deadlines(self) -> None:
        """A poller's deadline check: afterwards every watched time whose deadline passed is settled, with
        one missed alert if and only if its run had not succeeded by its deadline."""
        now = self.clock.now()
        check_deadlines(self.store, self.store, self.store, self.alerts, self.config.partitions, now)
        missed = [a.run_id for a in self.alerts.published if a.kind == "missed"]
        assert len(missed) == len(set(missed)), "two missed alerts for one time"
        for run_id in self.claimed_in_order:
            run = self.store.get_run(run_id)
            if run is None or run.success_by is None or run.success_by >= whole_seconds(now):
                continue
            met = (
                run.status is RunStatus.SUCCEEDED
                and run.finished_at is not None
                and run.finished_at <= run.success_by
            )
            assert met != (run_id in missed), f"{run_id}: met={met}, missed alert={run_id in missed}"
        assert self.store.due_watches(partition_of(self.job.id), now, 10) == [], "a due watch left unsettled"

    def teardown(self) -> None:
        for table in (self.names.jobs, self.names.runs, self.names.control):
            DYNAMODB.delete_table(TableName=table)

    @invariant()
    def one_terminal_result_per_run(self) -> None:
        """A result or a cancel: one ends a run, and nothing after it is accepted."""
        assert all(count == 1 for count in self.terminal_writes.values())

    @invariant()
    def an_overlap_skip_job_never_has_two_unfinished_runs(self) -> None:
        items = DYNAMODB.query(
            TableName=self.names.runs,
            KeyConditionExpression="job_id = :job",
            ExpressionAttributeValues={":job": {"S": self.skip_job.id}},
            ConsistentRead=True,
        )["Items"]
        unfinished = [i["run_id"]["S"] for i in items if not RunStatus(i["status"]["S"]).terminal]
        assert len(unfinished) <= 1, f"overlap skip let two runs be unfinished: {unfinished}"
        job = self.store.get_job(self.skip_job.id)
        assert job is not None and (not unfinished or job.state.active_run == unfinished[0])

    @invariant()
    def a_cancelled_run_stays_cancelled(self) -> None:
        for run_id in self.cancelled:
            run = self.store.get_run(run_id)
            assert run is not None and run.status is RunStatus.CANCELLED, "a cancelled run came back"

    @invariant()
    def no_run_is_forgotten_by_the_reaper(self) -> None:
        """Every run that is not finished is covered, by a check of its own in the reap index or by a reap
        ticket there that lists it (``reap_tickets``), and the check comes no later than the run could need
        the reaper: its lease expiry while running, its queue deadline while waiting (``reap_checks``:
        leases and heartbeats leave the check where it is, so this is what keeps a dead worker's run from
        being found late). A finished run may keep an entry it was given during its call (its worker did not
        know of it); the reaper removes it at that check."""
        tickets = DYNAMODB.scan(  # test inspection: the few tickets of a small table
            TableName=self.names.runs,
            FilterExpression="occurrence = :ticket",
            ExpressionAttributeValues={":ticket": {"S": "ticket"}},
            ConsistentRead=True,
        )["Items"]
        ticket_checks: dict[str, str] = {}
        for ticket in tickets:
            for run_id in listed_run_ids(ticket):
                ticket_checks[run_id] = min(ticket["reap_at"]["S"], ticket_checks.get(run_id, "~"))
        for job_id in self.last_next_nominal:
            items = DYNAMODB.query(
                TableName=self.names.runs,
                KeyConditionExpression="job_id = :job",
                ExpressionAttributeValues={":job": {"S": job_id}},
                ConsistentRead=True,
            )["Items"]
            for item in items:
                status = RunStatus(item["status"]["S"])
                if status.terminal:
                    continue
                own = item["reap_at"]["S"] if "reap_at" in item and "reap_shard" in item else None
                checks = [c for c in (own, ticket_checks.get(item["run_id"]["S"])) if c is not None]
                assert checks, f"a {status} run is neither in the reap index nor on a ticket"
                needs_reaper_at = item[
                    "lease_expires_at" if status is RunStatus.RUNNING else "queue_deadline"
                ]
                assert min(checks) <= needs_reaper_at["S"], "the reaper would find this run late"

    @invariant()
    def the_schedule_only_moves_forward(self) -> None:
        for job_id, last in self.last_next_nominal.items():
            job = self.store.get_job(job_id)
            assert job is not None and job.state.next_nominal_at is not None
            assert last is not None and job.state.next_nominal_at >= last
            self.last_next_nominal[job_id] = job.state.next_nominal_at


Protocol.TestCase.settings = settings(
    max_examples=40, stateful_step_count=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_claim_lease_result_protocol = Protocol.TestCase


def test_the_stale_worker_interleaving_step_by_step() -> None:
    """The interleaving the protocol exists for, spelled out: A's lease lapses, the reaper re-queues, B
    takes attempt 2, then A wakes and tries to record attempt 1."""
    machine = Protocol()
    try:
        machine.advance(61)
        machine.poll()
        assert len(machine.queue.messages) == JOBS + 1  # and the overlap skip job's
        first = machine.queue.messages.pop()
        machine.queue.messages.clear()  # the other jobs' messages are lost: the reaper sends them again
        now = machine.clock.now()
        leased = machine.store.acquire_lease(first.run_id, 1, "w1", now, now + LEASE)
        assert leased is not None
        machine.held["w1"] = leased
        machine.reap(wait=True)
        (second,) = [m for m in machine.queue.messages if m.run_id == first.run_id]
        assert second == RunMessage(first.run_id, 2)
        now = machine.clock.now()
        assert machine.store.acquire_lease(second.run_id, 2, "w2", now, now + LEASE) is not None
        run = machine.store.get_run(first.run_id)
        assert run is not None
        stale = run.model_copy(update={"attempt": 1})
        assert not machine.store.record_result(
            stale, "w1", RunStatus.SUCCEEDED, RunResult(duration_ms=1), now
        )
        assert machine.store.record_result(run, "w2", RunStatus.SUCCEEDED, RunResult(duration_ms=1), now)
    finally:
        machine.teardown()
