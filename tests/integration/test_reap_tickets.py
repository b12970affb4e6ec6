"""Reap tickets on DynamoDB Local (``duetime.adapters.dynamodb.reap_tickets``): the runs of a claim share
one reap index entry until their first check. The contract suite holds the promise (a dead worker's
run and a lost message are found, never before they need it) for every store; these tests hold the ticket
to its own rules: a run is always covered by its own entry or by a ticket, finished runs cost the index
nothing, and a ticket leaves only once every run it lists needs nothing from it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest

from duetime.adapters.dynamodb.codec import job_to_item, run_key
from duetime.adapters.dynamodb.partiql import StatementFailed
from duetime.adapters.dynamodb.reap_tickets import (
    TICKET_RUNS_MAX,
    TICKET_RUNS_MIN,
    listed_run_ids,
    ticket_items,
)
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.dynamodb.tables import REAP_INDEX
from duetime.domain.claim_plan import make_claim, plan_claim
from duetime.domain.ids import partition_of
from duetime.domain.models import Job, Run, RunResult, RunStatus
from duetime.domain.timeutil import iso_z, minute_bucket
from duetime.ports import ResultWrite
from duetime_bench.accounting import item_size

from ..twin_support import T0, a_job, at
from .dynamo_tables import store_on_fresh_tables

LEASE = timedelta(seconds=60)
DEADLINE = timedelta(minutes=10)
OK = RunResult(status_code=200, duration_ms=3)


@pytest.fixture
def store() -> Iterator[DynamoStore]:
    with store_on_fresh_tables(LEASE) as fresh:
        yield fresh


def jobs_of_one_partition(count: int, partition: int = 7) -> list[Job]:
    jobs: list[Job] = []
    while len(jobs) < count:
        job = a_job(T0)
        if partition_of(job.id) == partition:
            jobs.append(job)
    return jobs


def claim(store: DynamoStore, jobs: list[Job]) -> list[Run]:
    """The jobs' runs due at T0, claimed at T0 + 1 s: their first check is T0 + 61 s."""
    for job in jobs:
        store.ensure_low_water_mark(partition_of(job.id), minute_bucket(at(-30)))
        store.client.put_item(TableName=store.names.jobs, Item=job_to_item(job, at(-30)))
    claims = [make_claim(plan_claim(job, at(1)), at(1), DEADLINE) for job in jobs]
    return store.claim(claims, at(1)).runs


def row(store: DynamoStore, run: Run) -> dict[str, Any]:
    key = run_key(run.run_id)
    item: dict[str, Any] = store.client.get_item(TableName=store.names.runs, Key=key, ConsistentRead=True)[
        "Item"
    ]
    return item


def entries(store: DynamoStore, partition: int = 7) -> list[dict[str, Any]]:
    """The reap index's entries of a shard, each with its item as the table holds it."""
    found = store.client.query(
        TableName=store.names.runs,
        IndexName=REAP_INDEX,
        KeyConditionExpression="reap_shard = :shard",
        ExpressionAttributeValues={":shard": {"S": f"p{partition:02d}"}},
    )["Items"]
    keys = [{"job_id": e["job_id"], "occurrence": e["occurrence"]} for e in found]
    items: list[dict[str, Any]] = [
        store.client.get_item(TableName=store.names.runs, Key=key, ConsistentRead=True)["Item"]
        for key in keys
    ]
    return items


def lease(store: DynamoStore, run: Run, owner: str, now: float) -> Run:
    leased = store.acquire_leases([(run.run_id, 1)], owner, at(now), at(now) + LEASE)
    assert set(leased) == {run.run_id}
    return leased[run.run_id]


def test_a_claim_of_several_runs_covers_them_with_one_ticket_under_1_kb(
    store: DynamoStore,
) -> None:
    runs = claim(store, jobs_of_one_partition(TICKET_RUNS_MAX))

    assert all("reap_at" not in row(store, run) for run in runs)  # no entry of their own
    assert not any(run.in_reap_index for run in runs)
    (ticket,) = entries(store)
    assert sorted(listed_run_ids(ticket)) == sorted(run.run_id for run in runs)
    assert ticket["reap_at"]["S"] == iso_z(at(61))  # the runs' first check
    assert item_size(ticket) <= 1024  # one write unit in, one out, one read unit at its check


def test_a_claims_runs_below_the_ticket_threshold_carry_their_own_entries(store: DynamoStore) -> None:
    runs = claim(store, jobs_of_one_partition(TICKET_RUNS_MIN - 1))

    assert sorted(e["run_id"]["S"] for e in entries(store)) == sorted(run.run_id for run in runs)
    assert all(run.in_reap_index for run in runs)


def test_a_claim_of_more_runs_than_a_ticket_holds_fills_its_tickets_evenly(store: DynamoStore) -> None:
    runs = claim(store, jobs_of_one_partition(TICKET_RUNS_MAX + 1))

    tickets = entries(store)
    assert sorted(len(listed_run_ids(ticket)) for ticket in tickets) == [9, 10]
    assert sorted(r for ticket in tickets for r in listed_run_ids(ticket)) == sorted(
        run.run_id for run in runs
    )


def test_a_ticket_in_the_first_runs_shard_covers_runs_of_other_partitions(store: DynamoStore) -> None:
    first, second, third = claim(store, [jobs_of_one_partition(1, p)[0] for p in (7, 8, 9)])
    lease(store, second, "worker-dies", 20)  # a partition-8 run whose worker dies; its lease ends at T0 + 80
    for run in (first, third):
        store.record_results([ResultWrite(lease(store, run, "a", 5), RunStatus.SUCCEEDED, OK)], "a", at(6))
    (ticket,) = entries(store, 7)
    assert sorted(listed_run_ids(ticket)) == sorted(run.run_id for run in (first, second, third))

    assert store.runs_needing_attention(7, at(62), 100) == []  # shard 7's reaper settles the ticket
    assert entries(store, 7) == []
    assert [e["run_id"]["S"] for e in entries(store, 8)] == [second.run_id]  # adopted into its own shard
    (candidate,) = store.runs_needing_attention(8, at(81), 100)
    assert candidate.run_id == second.run_id


def test_finished_runs_cost_the_index_nothing_and_their_ticket_leaves_at_its_check(
    store: DynamoStore,
) -> None:
    runs = claim(store, jobs_of_one_partition(4))
    leased = [lease(store, run, "worker-a", 5) for run in runs]
    assert not any(run.in_reap_index for run in leased)
    results = [ResultWrite(run, RunStatus.SUCCEEDED, OK) for run in leased]
    assert store.record_results(results, "worker-a", at(10)) == {run.run_id for run in runs}
    finished = [row(store, run) for run in runs]
    assert all("reap_at" not in item and "reap_shard" not in item for item in finished)

    assert store.runs_needing_attention(7, at(60), 100) == []  # the ticket's check has not come
    assert len(entries(store)) == 1
    assert store.runs_needing_attention(7, at(62), 100) == []
    assert entries(store) == []  # the ticket left
    assert [row(store, run) for run in runs] == finished  # and nothing was written to the runs


def test_a_dead_workers_ticketed_run_is_adopted_at_the_check_and_taken_back_at_its_lease_expiry(
    store: DynamoStore,
) -> None:
    first, *others = claim(store, jobs_of_one_partition(3))
    lease(store, first, "worker-dies", 20)  # expires at T0 + 80 s; its worker is never heard of again
    for run in others:
        finished = lease(store, run, "worker-a", 5)
        store.record_results([ResultWrite(finished, RunStatus.SUCCEEDED, OK)], "worker-a", at(6))

    assert store.runs_needing_attention(7, at(62), 100) == []  # alive at the ticket's check: adopted
    (entry,) = entries(store)
    assert entry["run_id"]["S"] == first.run_id and entry["reap_at"]["S"] == iso_z(at(80))

    (candidate,) = store.runs_needing_attention(7, at(81), 100)
    assert candidate.run_id == first.run_id and candidate.status is RunStatus.RUNNING
    again = store.requeue_expired_lease(candidate, at(81), at(81) + DEADLINE)
    assert again is not None and again.attempt == 2
    assert row(store, first)["reap_shard"]["S"] == "p07"  # waiting again, under an entry of its own


def test_a_ticketed_run_whose_message_was_lost_is_a_candidate_once_its_queue_deadline_passed(
    store: DynamoStore,
) -> None:
    runs = claim(store, jobs_of_one_partition(3))  # never leased: the messages were lost

    candidates = store.runs_needing_attention(7, at(602), 100)  # the ticket's check long passed

    assert sorted(c.run_id for c in candidates) == sorted(run.run_id for run in runs)
    assert all(c.status is RunStatus.QUEUED for c in candidates)
    assert sorted(e["run_id"]["S"] for e in entries(store)) == sorted(run.run_id for run in runs)
    for candidate in candidates:  # the reaper sends each again under a new deadline
        assert store.renew_queue_deadline(candidate, at(602), at(602) + DEADLINE) is not None


def test_a_ticket_stays_when_a_run_it_lists_moved_on_during_the_pass(store: DynamoStore) -> None:
    first, *_ = claim(store, jobs_of_one_partition(3))
    other_client = boto3.session.Session().client("dynamodb")
    racing_worker = DynamoStore(other_client, store.names, lease_check=LEASE)
    raced: list[bool] = []

    def lease_first_before_the_adoptions(params: dict[str, Any], **_: Any) -> None:
        adopting = any("IS MISSING" in statement["Statement"] for statement in params["Statements"])
        if adopting and not raced:  # the worker takes its lease between the reaper's read and its write
            raced.append(
                racing_worker.acquire_lease(first.run_id, 1, "worker-a", at(62), at(122)) is not None
            )

    store.client.meta.events.register(
        "provide-client-params.dynamodb.BatchExecuteStatement", lease_first_before_the_adoptions
    )
    assert store.runs_needing_attention(7, at(62), 100) == []
    assert raced == [True]
    ticket_left = [e for e in entries(store) if e["occurrence"]["S"] == "ticket"]
    assert len(ticket_left) == 1  # the lost race keeps the ticket
    assert "reap_at" not in row(store, first)  # the run moved on before its adoption: not adopted

    assert store.runs_needing_attention(7, at(63), 100) == []  # the next pass reads it again: running
    assert row(store, first)["reap_at"]["S"] == iso_z(at(122))  # its lease expiry
    assert all(e["occurrence"]["S"] != "ticket" for e in entries(store))


def test_a_run_adopted_during_its_call_leaves_the_index_at_its_next_check(store: DynamoStore) -> None:
    first, *others = claim(store, jobs_of_one_partition(3))
    for run in others:
        finished = lease(store, run, "worker-a", 5)
        store.record_results([ResultWrite(finished, RunStatus.SUCCEEDED, OK)], "worker-a", at(6))
    leased = lease(store, first, "worker-a", 30)  # a long call: its lease expires at T0 + 90 s
    assert store.runs_needing_attention(7, at(62), 100) == []  # adopted at its lease expiry meanwhile
    assert row(store, first)["reap_at"]["S"] == iso_z(at(90))

    # The worker knows its run as leased (no entry) and records a result that leaves the index alone.
    assert store.record_results([ResultWrite(leased, RunStatus.SUCCEEDED, OK)], "worker-a", at(70))
    assert row(store, first)["status"]["S"] == "succeeded" and "reap_at" in row(store, first)

    assert store.runs_needing_attention(7, at(91), 100) == []  # finished: not a candidate
    assert "reap_at" not in row(store, first) and "reap_shard" not in row(store, first)
    assert entries(store) == []


def test_rows_a_claim_left_without_their_ticket_are_ticketed_by_the_next_claim(store: DynamoStore) -> None:
    jobs = jobs_of_one_partition(3)

    def refuse_the_tickets(params: dict[str, Any], **_: Any) -> None:
        if any("'runs': ?" in statement["Statement"] for statement in params["Statements"]):
            raise RuntimeError("the poller dies before its tickets")

    event = "provide-client-params.dynamodb.BatchExecuteStatement"
    store.client.meta.events.register(event, refuse_the_tickets)
    with pytest.raises(RuntimeError):
        claim(store, jobs)
    assert entries(store) == []  # rows without entries, and no ticket: no schedule moved either
    store.client.meta.events.unregister(event, refuse_the_tickets)

    claims = [make_claim(plan_claim(job, at(2)), at(2), DEADLINE) for job in jobs]
    outcome = store.claim(claims, at(2))
    assert outcome.runs == [] and len(outcome.requeued) == 3 and outcome.claimed_jobs == 3
    (ticket,) = entries(store)
    assert sorted(listed_run_ids(ticket)) == sorted(run.run_id for run in outcome.requeued)


def test_a_ticket_the_same_claim_wrote_before_a_retry_is_its_own_and_another_at_its_key_is_refused(
    store: DynamoStore,
) -> None:
    """A request the SDK sent again after it had landed (or a statement sent again after an internal error)
    finds its own tickets there: they are read back and taken as written, and the claim goes on to move the
    schedules. A different ticket at the same random key still stops the claim (``TicketExists``)."""
    runs = claim(store, jobs_of_one_partition(TICKET_RUNS_MIN + 2))
    items = ticket_items(runs, LEASE, max(run.expires_at_epoch for run in runs))
    store.insert_tickets(items)
    store.insert_tickets(items)  # the retry: the same items, already there
    taken = [{**items[0], "runs": {"S": "someone-else@2026-12-07T05:00:00Z"}}]
    with pytest.raises(StatementFailed, match="TicketExists"):
        store.insert_tickets(taken)
