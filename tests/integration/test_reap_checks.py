"""The reap index's checks on DynamoDB Local (``duetime.adapters.dynamodb.reap_checks``): what each write
costs the index, and where a check moves. The contract suite holds the promise itself (a dead worker's run
is taken back when its lease expires, never before) for the store and its twin alike; these tests hold the
DynamoDB store to the cost that is the reason for checks: a lease and its heartbeats write nothing to the
index, and a live run's check moves once per lease, not once per heartbeat."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from duetime.adapters.dynamodb.codec import job_to_item, run_key
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.dynamodb.tables import REAP_INDEX
from duetime.domain.claim_plan import make_claim, plan_claim
from duetime.domain.ids import partition_of
from duetime.domain.models import Run, RunResult, RunStatus
from duetime.domain.timeutil import iso_z, minute_bucket

from ..twin_support import T0, a_job, at
from .dynamo_tables import store_on_fresh_tables

LEASE = timedelta(seconds=60)
DEADLINE = timedelta(minutes=10)


class IndexWrites:
    """The reap index's write units of each write request, as DynamoDB Local reports them; a
    BatchExecuteStatement, for which it reports none, as minus its number of statements."""

    def __init__(self, client: Any, runs_table: str) -> None:
        self.runs_table = runs_table
        self.units: list[float] = []
        client.meta.events.register("provide-client-params.dynamodb", self._ask)
        client.meta.events.register("after-call.dynamodb", self._count)

    @staticmethod
    def _ask(params: dict[str, Any], model: Any, **_: Any) -> None:
        if "ReturnConsumedCapacity" in model.input_shape.members:
            params["ReturnConsumedCapacity"] = "INDEXES"

    def _count(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "BatchExecuteStatement":  # DynamoDB Local reports no capacity for these: statements
            self.units.append(-len(parsed.get("Responses", [])))
            return
        if model.name not in ("PutItem", "UpdateItem", "TransactWriteItems"):
            return
        consumed = parsed.get("ConsumedCapacity") or []
        for entry in consumed if isinstance(consumed, list) else [consumed]:
            if entry.get("TableName") == self.runs_table:
                self.units.append(
                    entry.get("GlobalSecondaryIndexes", {}).get(REAP_INDEX, {}).get("CapacityUnits", 0)
                )

    def take(self) -> list[float]:
        units, self.units = self.units, []
        return units


@pytest.fixture
def store() -> Iterator[DynamoStore]:
    with store_on_fresh_tables(LEASE) as fresh:
        yield fresh


def claimed_run(store: DynamoStore) -> Run:
    """A run due at T0, claimed at T0 + 1 s: its first check is T0 + 61 s."""
    job = a_job(T0)
    store.ensure_low_water_mark(partition_of(job.id), minute_bucket(at(-30)))
    store.client.put_item(TableName=store.names.jobs, Item=job_to_item(job, at(-30)))
    (run,) = store.claim([make_claim(plan_claim(job, at(1)), at(1), DEADLINE)], at(1)).runs
    return run


def check_of(store: DynamoStore, run: Run) -> str | None:
    item = store.client.get_item(TableName=store.names.runs, Key=run_key(run.run_id), ConsistentRead=True)[
        "Item"
    ]
    return item["reap_at"]["S"] if "reap_at" in item else None


def test_a_lease_and_its_heartbeats_write_nothing_to_the_reap_index(store: DynamoStore) -> None:
    writes = IndexWrites(store.client, store.names.runs)
    run = claimed_run(store)
    assert writes.take() == [-1, -1]  # the claim's two batches: its run row, then its schedule move
    assert check_of(store, run) is not None  # the claim put the run in the index

    assert store.acquire_lease(run.run_id, 1, "worker-a", at(2), at(2) + LEASE) is not None
    for beat in (22, 42):
        assert store.extend_lease(run.run_id, 1, "worker-a", at(beat), at(beat) + LEASE)
    assert writes.take() == [0, 0, 0]
    assert check_of(store, run) == iso_z(at(61))  # where the claim put it

    leased = store.get_run(run.run_id)
    assert leased is not None
    ok = RunResult(status_code=200, duration_ms=3)
    assert store.record_result(leased, "worker-a", RunStatus.SUCCEEDED, ok, at(50))
    assert writes.take() == [1] and check_of(store, run) is None  # the result takes it out


def test_a_live_runs_check_moves_to_its_lease_expiry_once(store: DynamoStore) -> None:
    run = claimed_run(store)
    assert store.acquire_lease(run.run_id, 1, "worker-a", at(40), at(100)) is not None
    writes = IndexWrites(store.client, store.names.runs)

    assert store.runs_needing_attention(run.partition, at(62), 100) == []
    assert check_of(store, run) == iso_z(at(100)) and writes.take() == [-1]  # one statement moved it

    assert store.extend_lease(run.run_id, 1, "worker-a", at(80), at(140))
    assert store.runs_needing_attention(run.partition, at(90), 100) == []
    assert writes.take() == [0]  # only the heartbeat wrote, and not to the index: no check had come


def test_a_waiting_runs_check_moves_a_lease_at_a_time_until_its_queue_deadline(store: DynamoStore) -> None:
    run = claimed_run(store)  # queued until T0 + 601 s
    for now, check in ((62, 122), (130, 190), (560, 601)):
        assert store.runs_needing_attention(run.partition, at(now), 100) == []
        assert check_of(store, run) == iso_z(at(check))
