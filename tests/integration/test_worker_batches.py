"""A worker's SQS batch worked as a batch, on DynamoDB Local: the batched writes keep each run's own
condition (a duplicate, a stale worker, a full team lose alone), a slow target delays no other run of its
batch, and the batch costs a few requests, not four per run."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from duetime.adapters.dynamodb.codec import run_key, string_attribute
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.dynamodb.worker_batches import SLOTS_PER_ITEM
from duetime.domain.ids import make_manual_run_id, new_job_id
from duetime.domain.models import Run, RunResult, RunStatus, Team
from duetime.execution.worker import WorkOutcome, WorkReport
from duetime.ports import ResultWrite, RunMessage
from duetime_bench.accounting import item_size

from .conftest import Stack, hooked, wait_until

OWNER = "worker-a"


@contextmanager
def requests_of(client: Any) -> Iterator[Counter[str]]:
    """The DynamoDB requests ``client`` sends, by operation, from any thread."""
    sent: Counter[str] = Counter()
    lock = threading.Lock()

    def count(model: Any, **_: Any) -> None:
        with lock:
            sent[model.name] += 1

    with hooked(client, "before-call.dynamodb", count):
        yield sent


def claimed(stack: Stack, *urls: str, team: str = "team-a") -> list[RunMessage]:
    """One exact job per url due now, claimed; their run messages, in the order of ``urls``."""
    jobs = [stack.job_due_now(team, url) for url in urls]
    assert stack.poller().claim().runs_created == len(urls)
    by_job = {message.run_id.split("@")[0]: message for message in stack.messages()}
    return [by_job[job.id] for job in jobs]


def leased(stack: Stack, messages: list[RunMessage], owner: str = OWNER) -> dict[str, Run]:
    now = stack.clock.now()
    attempts = [(m.run_id, m.attempt) for m in messages]
    return stack.store.acquire_leases(attempts, owner, now, now + timedelta(seconds=60))


# --- the store's batched writes ---------------------------------------------------------------------------


def test_a_batch_takes_each_waiting_lease_once_in_two_requests(stack: Stack, target) -> None:
    messages = claimed(stack, *[target.url] * 5)
    stray = RunMessage("not-a-run-id", 1)
    stale = RunMessage(messages[0].run_id, 2)  # attempt 2 of a run waiting for attempt 1

    with requests_of(stack.dynamodb) as sent:
        runs = stack.store.acquire_leases(
            [(m.run_id, m.attempt) for m in [*messages[1:], stray]] + [(stale.run_id, stale.attempt)],
            OWNER,
            stack.clock.now(),
            stack.clock.now() + timedelta(seconds=60),
        )
    assert sorted(runs) == sorted(m.run_id for m in messages[1:])
    assert sent == {"BatchGetItem": 1, "BatchExecuteStatement": 1}
    for run_id, run in runs.items():
        stored = stack.store.get_run(run_id)
        assert stored is not None and stored.status is RunStatus.RUNNING and stored.owner == OWNER
        assert run.status is RunStatus.RUNNING and run.lease_expires_at == stored.lease_expires_at
        assert run.started_at == stored.started_at and stored.queue_deadline is None
    first = stack.store.get_run(messages[0].run_id)
    assert first is not None and first.status is RunStatus.QUEUED  # the stale message took nothing

    assert leased(stack, messages[1:], owner="worker-b") == {}  # running already: duplicates


def test_runs_carried_by_a_pollers_messages_are_leased_in_one_request_without_a_read(
    stack: Stack, target
) -> None:
    messages = claimed(stack, *[target.url] * 5)  # one claim of five: their rows are ticketed, not indexed
    assert all(m.run is not None and not m.run.in_reap_index for m in messages)

    with requests_of(stack.dynamodb) as sent:
        runs = stack.store.acquire_leases(
            [(m.run_id, m.attempt) for m in messages],
            OWNER,
            stack.clock.now(),
            stack.clock.now() + timedelta(seconds=60),
            carried={m.run_id: m.run for m in messages if m.run is not None},
        )

    assert sent == {"BatchExecuteStatement": 1}
    assert runs == {m.run_id: stack.store.get_run(m.run_id) for m in messages}


def test_a_forged_message_is_read_and_its_worker_calls_the_stored_target(stack: Stack, target) -> None:
    messages = claimed(stack, *[target.url] * 3)
    first = messages[0].run
    assert first is not None
    forged = first.model_copy(
        update={"target": first.target.model_copy(update={"url": target.url + "?forged"})}
    )
    messages[0] = RunMessage.carrying(forged)

    with requests_of(stack.dynamodb) as sent:
        reports = stack.worker().process_batch(messages)

    assert [r.outcome for r in reports if isinstance(r, WorkReport)] == [WorkOutcome.SUCCEEDED] * 3
    assert sent["BatchGetItem"] == 1  # the forged run only: read, then leased as stored
    assert all("forged" not in f"{call.path}?{call.query}" for call in target.recorder.calls)
    assert len(target.recorder.calls) == 3


def test_a_run_whose_target_has_headers_travels_by_name(stack: Stack, target) -> None:
    """Header values are write-only secrets: they stay in the table, never in a message."""
    spec = {"url": target.url, "headers": {"Authorization": "Bearer s3cr3t"}}
    stack.job_due_now("team-a", target.url, target=spec)
    stack.job_due_now("team-a", target.url)
    assert stack.poller().claim().runs_created == 2
    with_headers, without = sorted(stack.messages(), key=lambda m: m.run is not None)
    assert with_headers.run is None and without.run is not None


def test_the_lease_write_keeps_its_condition_when_the_run_moved_after_the_read(stack: Stack, target) -> None:
    """The batch reads the runs, then writes; a run another worker leased in between is not taken twice."""
    messages = claimed(stack, target.url, target.url)
    store, now = stack.store, stack.clock.now()
    real_batch_get = store.client.batch_get_item

    def read_then_lose_one(**request: Any) -> Any:
        answer = real_batch_get(**request)
        assert store.acquire_lease(messages[0].run_id, 1, "worker-b", now, now + timedelta(seconds=60))
        return answer

    store.client.batch_get_item = read_then_lose_one  # type: ignore[method-assign]
    try:
        runs = leased(stack, messages)
    finally:
        store.client.batch_get_item = real_batch_get  # type: ignore[method-assign]
    assert list(runs) == [messages[1].run_id]
    first = store.get_run(messages[0].run_id)
    assert first is not None and first.owner == "worker-b"


def test_a_stale_worker_in_a_batch_records_nothing_and_its_batchmates_record(stack: Stack, target) -> None:
    messages = claimed(stack, *[target.url] * 3)
    runs = leased(stack, messages)
    taken_over = messages[1].run_id
    stack.dynamodb.update_item(  # another worker holds it now (the lease lapsed and it was taken over)
        TableName=stack.names.runs,
        Key=run_key(taken_over),
        UpdateExpression="SET #owner = :other",
        ExpressionAttributeNames={"#owner": "owner"},
        ExpressionAttributeValues={":other": string_attribute("worker-b")},
    )
    now = stack.clock.now()
    ok = RunResult(status_code=200, duration_ms=5)
    retry_at = now + timedelta(seconds=30)
    writes = [
        ResultWrite(runs[messages[0].run_id], RunStatus.SUCCEEDED, ok),
        ResultWrite(runs[taken_over], RunStatus.SUCCEEDED, ok),
        ResultWrite(
            runs[messages[2].run_id],
            RunStatus.RETRY_WAIT,
            RunResult(status_code=503, duration_ms=5, retryable=True),
            retry_at,
            retry_at + timedelta(minutes=10),
        ),
    ]
    assert stack.store.record_results(writes, OWNER, now) == {messages[0].run_id, messages[2].run_id}

    done, stolen, retrying = (stack.store.get_run(m.run_id) for m in messages)
    assert done is not None and done.status is RunStatus.SUCCEEDED and done.finished_at is not None
    assert stolen is not None and stolen.status is RunStatus.RUNNING and stolen.result is None
    assert retrying is not None and (retrying.status, retrying.attempt) == (RunStatus.RETRY_WAIT, 2)
    assert retrying.owner is None and retrying.retry_at == retry_at.replace(microsecond=0)  # to the second


def test_a_teams_slots_taken_by_batches_never_pass_its_cap(stack: Stack) -> None:
    team = Team(team_id="capped", max_concurrency=3)
    now, until = stack.clock.now(), stack.clock.now() + timedelta(seconds=60)
    first = stack.store.acquire_slots(team, [f"run-{i}" for i in range(5)], now, until)
    assert len(first) == 3 and len(set(first.values())) == 3
    assert stack.store.acquire_slots(team, ["run-5", "run-6"], now, until) == {}  # at the cap

    freed = dict(list(first.items())[:2])
    stack.store.release_slots(team.team_id, freed)
    again = stack.store.acquire_slots(team, ["run-5", "run-6", "run-7"], now, until)
    assert len(again) == 2 and set(again.values()) == set(freed.values())
    kept = {run_id: slot for run_id, slot in first.items() if run_id not in freed}
    assert stack.store.extend_slots(team.team_id, {**kept, **freed}, until) == set(kept)  # freed: not theirs


def test_batches_racing_for_a_teams_slots_never_pass_its_cap(stack: Stack) -> None:
    team = Team(team_id="raced", max_concurrency=7)
    now, until = stack.clock.now(), stack.clock.now() + timedelta(seconds=60)
    taken: list[dict[str, int]] = []

    def worker(number: int) -> None:
        taken.append(stack.store.acquire_slots(team, [f"w{number}-{i}" for i in range(4)], now, until))

    threads = [threading.Thread(target=worker, args=(number,)) for number in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    slots = [slot for batch in taken for slot in batch.values()]
    assert len(slots) == len(set(slots)) <= 7  # never one slot twice, never past the cap
    assert len(slots) >= 4  # the first batch to come got all it asked for at least


@contextmanager
def slot_statements_of(stack: Stack) -> Iterator[list[str]]:
    """The PartiQL statements on the control table (slot writes) the stack's client sends in batches."""
    texts: list[str] = []
    table = f'"{stack.names.control}"'

    def keep(params: dict[str, Any], **_: Any) -> None:
        texts.extend(st["Statement"] for st in params["Statements"] if table in st["Statement"])

    with hooked(stack.dynamodb, "provide-client-params.dynamodb.BatchExecuteStatement", keep):
        yield texts


def test_a_batch_takes_extends_and_frees_its_slots_with_one_write_per_item_of_five(stack: Stack) -> None:
    team = Team(team_id="wide", max_concurrency=10_000)
    now, until = stack.clock.now(), stack.clock.now() + timedelta(seconds=60)
    runs = [f"run-{i}" for i in range(10)]
    with slot_statements_of(stack) as taking:
        taken = stack.store.acquire_slots(team, runs, now, until)
    assert len(taken) == 10 and len(set(taken.values())) == 10
    assert len(taking) == 2  # a group's items are all free: two items of five slots each
    assert len({slot // SLOTS_PER_ITEM for slot in taken.values()}) == 2

    with slot_statements_of(stack) as extending:
        assert stack.store.extend_slots(team.team_id, taken, until + timedelta(seconds=60)) == set(runs)
    with slot_statements_of(stack) as freeing:
        stack.store.release_slots(team.team_id, taken)
    assert (len(extending), len(freeing)) == (2, 2)
    assert stack.store.acquire_slots(team, ["again"], now, until)  # and they are free again


def test_a_batch_takes_the_slots_its_process_freed_lately_without_reading_their_group(stack: Stack) -> None:
    team = Team(team_id="reused", max_concurrency=10_000)
    now, until = stack.clock.now(), stack.clock.now() + timedelta(seconds=60)
    first = stack.store.acquire_slots(team, [f"run-{i}" for i in range(10)], now, until)
    stack.store.record_results_and_free_slots([], OWNER, now, {team.team_id: first})

    with requests_of(stack.dynamodb) as sent, slot_statements_of(stack) as taking:
        again = stack.store.acquire_slots(team, [f"next-{i}" for i in range(10)], now, until)
    assert sorted(again.values()) == sorted(first.values())
    assert sent == {"BatchExecuteStatement": 1}, sent  # no Query
    assert len(taking) == 2  # the two items of five slots, as after a Query


def test_a_freed_slot_another_worker_took_meanwhile_is_looked_for_as_before(stack: Stack) -> None:
    team = Team(team_id="contended", max_concurrency=3)
    now, until = stack.clock.now(), stack.clock.now() + timedelta(seconds=60)
    other = DynamoStore(stack.dynamodb, stack.names)  # another worker's process: it remembers nothing
    mine = stack.store.acquire_slots(team, ["mine-0", "mine-1"], now, until)
    stack.store.record_results_and_free_slots([], OWNER, now, {team.team_id: mine})
    theirs = other.acquire_slots(team, ["theirs-0", "theirs-1"], now, until)

    again = stack.store.acquire_slots(team, ["mine-2", "mine-3"], now, until)
    held = [*theirs.values(), *again.values()]
    assert len(held) == len(set(held)) == 3  # the cap's three slots, none twice: one of the two guessed
    assert set(again.values()).isdisjoint(theirs.values())


def test_slot_item_stays_under_one_kilobyte(stack: Stack) -> None:
    """Each slot write is billed one write unit only while the item, before and after, is under 1 KB:
    five slots held by the longest run ids (a manual run's) of a team with a long id."""
    team = Team(team_id="t" * 64, max_concurrency=5)
    now, until = stack.clock.now(), stack.clock.now() + timedelta(seconds=60)
    longest = [make_manual_run_id(new_job_id(), now) for _ in range(5)]
    assert {len(run_id) for run_id in longest} == {65}
    assert len(stack.store.acquire_slots(team, longest, now, until)) == 5
    items = stack.dynamodb.scan(TableName=stack.names.control)["Items"]
    (item,) = [i for i in items if i["pk"]["S"].startswith(f"team#{team.team_id}#slots#")]
    assert [f"holder_{k}" in item for k in range(5)] == [True] * 5
    assert item_size(item) < 1024, item_size(item)


# --- the worker -------------------------------------------------------------------------------------------


def test_a_slow_target_delays_no_other_run_of_its_batch(stack: Stack, target) -> None:
    messages = claimed(stack, target.url + "?sleep=3", *[target.url] * 4)
    worker = stack.worker()
    with requests_of(stack.dynamodb) as sent:
        reports = worker.process_batch(messages)

    assert all(isinstance(r, WorkReport) and r.outcome is WorkOutcome.SUCCEEDED for r in reports), reports
    slow, *fast = (stack.store.get_run(m.run_id) for m in messages)
    assert slow is not None and slow.finished_at is not None
    for run in fast:
        assert run is not None and run.finished_at is not None
        assert (slow.finished_at - run.finished_at).total_seconds() > 2  # recorded before the slow one ended
    # Leases 2, slots 2 (a Query and a write), then per wave of ended calls one request that records its
    # results and frees its slots (two waves here at least: the fast calls, then the slow one), and a read of
    # the team: at most 10 where run by run it was 4 per run (20), and fewer the more calls end together.
    assert sent["BatchExecuteStatement"] + sent["UpdateItem"] <= 1 + 1 + 4, sent
    assert sum(sent.values()) <= 10, sent
    calls = target.recorder.calls
    assert len(calls) == 5 and len({c.headers["idempotency-key"] for c in calls}) == 5


def test_a_batch_over_its_teams_cap_calls_what_fits_and_defers_the_rest(stack: Stack, target) -> None:
    stack.store.put_team(Team(team_id="small", max_concurrency=2, exact_quota=100))
    messages = claimed(stack, *[target.url + "?sleep=1"] * 4, team="small")
    reports = stack.worker().process_batch(messages)

    outcomes = Counter(r.outcome for r in reports if isinstance(r, WorkReport))
    assert outcomes == {WorkOutcome.SUCCEEDED: 2, WorkOutcome.DEFERRED: 2}
    deferred = [
        m
        for m, r in zip(messages, reports, strict=True)
        if isinstance(r, WorkReport) and r.outcome is WorkOutcome.DEFERRED
    ]
    for message in deferred:
        run = stack.store.get_run(message.run_id)
        assert run is not None and run.status is RunStatus.QUEUED and run.attempt == 1  # attempt not used
    requeued: list[RunMessage] = []

    def both_requeued() -> bool:  # they come back after the deferral's delay (5 s)
        requeued.extend(stack.messages())
        return len(requeued) >= 2

    wait_until(both_requeued, timeout=20)
    assert sorted(m.run_id for m in requeued) == sorted(m.run_id for m in deferred)
    assert len(target.recorder.calls) == 2


def test_a_message_twice_in_one_batch_is_called_once(stack: Stack, target) -> None:
    [message] = claimed(stack, target.url)
    reports = stack.worker().process_batch([message, message])
    assert [r.outcome for r in reports if isinstance(r, WorkReport)] == [
        WorkOutcome.SUCCEEDED,
        WorkOutcome.DUPLICATE,
    ]
    assert len(target.recorder.calls) == 1
