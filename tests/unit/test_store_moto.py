"""The DynamoDB store's item codec and conditions on moto (small and fast; real semantics are tested on
DynamoDB Local in tests/integration)."""

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from duetime.adapters.dynamodb.catalog import DynamoCatalog
from duetime.adapters.dynamodb.codec import run_to_item
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.dynamodb.tables import TableNames, TableShapeMismatch, create_tables
from duetime.domain.claim_plan import make_claim, plan_claim
from duetime.domain.models import RunStatus

from ..job_support import create_job

NOW = datetime(2026, 12, 1, 9, 59, 0, tzinfo=UTC)
SPEC: dict[str, Any] = {
    "name": "nightly",
    "schedule": {"cron": "0 10 * * *", "timezone": "Europe/Berlin"},
    "target": {"url": "https://example.com/hook", "headers": {"X-A": "1"}, "body": "{}"},
    "retry": {"max_attempts": 2, "backoff_seconds": [5]},
    "exact": True,
}


@pytest.fixture
def store() -> Iterator[DynamoStore]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_tables(client, TableNames())
        yield DynamoStore(client)


def test_a_job_round_trips_through_its_item(store: DynamoStore) -> None:
    job = create_job(store, "team-a", SPEC, NOW)
    assert store.get_job(job.id) == job
    assert job.state.next_nominal_at == datetime(2026, 12, 2, 9, 0, tzinfo=UTC)  # 10:00 in Berlin (CET)


def test_a_job_id_cannot_be_written_twice(store: DynamoStore) -> None:
    job = create_job(store, "team-a", SPEC, NOW)
    catalog = DynamoCatalog(store.client, store.names)
    team = store.get_team("team-a")
    assert team is not None
    with pytest.raises(RuntimeError, match="ConditionalCheckFailed"):
        catalog.insert_job(job, team, NOW, None)
    assert catalog.exact_jobs("team-a") == 1  # the cancelled insert counted nothing


def test_a_claimed_run_round_trips_and_carries_the_jobs_payload(store: DynamoStore) -> None:
    job = create_job(store, "team-a", SPEC, NOW)
    due = job.state.next_fire_at + timedelta(seconds=1)  # type: ignore[operator]
    claim = make_claim(plan_claim(job, due), due)
    # The row the claim's INSERT writes (moto's PartiQL cannot parse the claim itself; the contract suite
    # claims on DynamoDB Local and the twin).
    store.client.put_item(TableName=store.names.runs, Item=run_to_item(claim.runs[0]))
    run = store.get_run(claim.runs[0].run_id)
    assert run == claim.runs[0]
    assert run is not None and run.status is RunStatus.QUEUED and run.target.headers == {"X-A": "1"}


def test_a_table_left_with_other_keys_is_refused_by_name_not_used() -> None:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(  # the runs table as an older duetime keyed it
            TableName=TableNames().runs,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "run_id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "run_id", "KeyType": "HASH"}],
        )
        with pytest.raises(TableShapeMismatch, match="table duetime-runs is keyed by \\['run_id'\\]"):
            create_tables(client, TableNames())
