"""AWS's limits where DynamoDB Local is lenient: claims of jobs with 60 KB bodies, all due in one second, go
out in batches AWS accepts, transactions over 4 MB are refused as AWS would, and due reads go on past 1 MB
pages."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import botocore.session
import pytest
from botocore.exceptions import ClientError

from duetime.adapters.aws.aws_limits import TRANSACT_WRITE_MAX_BYTES, enforce_aws_limits
from duetime.adapters.dynamodb.codec import run_to_item
from duetime.api import service as service_module
from duetime.domain.claim_plan import make_claim, plan_claim
from duetime.domain.ids import new_job_id, partition_of
from duetime.domain.models import Job
from duetime.domain.timeutil import minute_bucket
from duetime.scheduling.poller import PollerConfig, claim_due_jobs

from ..job_support import create_job
from .conftest import DDB_URL, Stack

DUE = datetime(2026, 12, 1, 0, 0, 0, tzinfo=UTC)
BODY = "x" * 60_000
JOBS = 70  # about 8.5 MB of items (more than two transactions could hold), five 1 MB pages of the due index
PARTITION = 5


@pytest.fixture
def one_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    """New job ids all hash to PARTITION, so one partition's due bucket holds every big job."""

    def job_id_in_partition() -> str:
        while partition_of(job_id := new_job_id()) != PARTITION:
            pass
        return job_id

    monkeypatch.setattr(service_module, "new_job_id", job_id_in_partition)


def big_jobs(stack: Stack, count: int) -> list[Job]:
    body = {
        "name": "big",
        "schedule": {"at": DUE.isoformat()},
        "target": {"url": "https://example.com/hook", "body": BODY},
        "exact": True,
    }
    return [create_job(stack.store, "team-a", body, DUE - timedelta(seconds=10)) for _ in range(count)]


def bare_dynamodb() -> Any:
    """A client with no strict check (tests/conftest.py adds it to boto3 clients only)."""
    return botocore.session.get_session().create_client(
        "dynamodb", endpoint_url=DDB_URL, region_name="us-east-1"
    )


@pytest.mark.usefixtures("one_partition")
def test_jobs_with_60_kb_bodies_due_in_one_second_are_all_claimed_in_batches_aws_accepts(
    stack: Stack,
) -> None:
    jobs = big_jobs(stack, JOBS)
    config = PollerConfig([PARTITION], preload_lead=None)
    report = claim_due_jobs(stack.store, stack.queue, config, DUE)
    assert report.due_rows == JOBS  # read on past the due index's 1 MB pages
    assert report.claimed_jobs == report.runs_created == JOBS and report.lost_races == 0
    assert report.write_requests == 7  # 70 run rows, their 4 reap tickets, 70 schedule moves: 25 a request
    assert {run.job_id for run in report.runs} == {job.id for job in jobs}
    assert len(stack.messages()) == JOBS
    assert claim_due_jobs(stack.store, stack.queue, config, DUE + timedelta(seconds=1)).due_rows == 0


@pytest.mark.usefixtures("one_partition")
def test_a_due_read_goes_on_past_a_1_mb_page(stack: Stack) -> None:
    """DynamoDB (Local too) ends a Query page at 1 MB, about 16 of these jobs: a short page is not the end."""
    big_jobs(stack, 40)
    bucket = f"{PARTITION:02d}#{minute_bucket(DUE)}"
    page = stack.dynamodb.query(
        TableName=stack.names.jobs,
        IndexName="due",
        KeyConditionExpression="due_bucket = :b",
        ExpressionAttributeValues={":b": {"S": bucket}},
    )
    assert "LastEvaluatedKey" in page and len(page["Items"]) < 20
    assert len(stack.store.due_jobs(PARTITION, minute_bucket(DUE), DUE, limit=500)) == 40
    assert len(stack.store.due_jobs(PARTITION, minute_bucket(DUE), DUE, limit=25)) == 25
    assert stack.store.count_due(PARTITION, minute_bucket(DUE)) == 40  # a COUNT pages at 1 MB too


def test_the_strict_check_refuses_the_transaction_dynamodb_local_lets_through(stack: Stack) -> None:
    """Fifty claims in one transaction, as duetime made them before claims went out in batches (a run's Put,
    its job's Update): DynamoDB Local commits it, counting the request's 3 MB; AWS (and the check) refuse
    it, because AWS counts each updated job item whole (6 MB)."""
    jobs = big_jobs(stack, 50)
    claims = [make_claim(plan_claim(job, DUE), DUE) for job in jobs]
    bump = {
        "UpdateExpression": "SET version = version + :one",
        "ExpressionAttributeValues": {":one": {"N": "1"}},
    }
    items = [
        action
        for claim in claims
        for action in (
            {"Put": {"TableName": stack.names.runs, "Item": run_to_item(claim.runs[0])}},
            {"Update": {"TableName": stack.names.jobs, "Key": {"job_id": {"S": claim.plan.job.id}}, **bump}},
        )
    ]
    assert len(items) == 100
    strict = enforce_aws_limits(bare_dynamodb())
    with pytest.raises(ClientError, match=f"AWS allows {TRANSACT_WRITE_MAX_BYTES}"):
        strict.transact_write_items(TransactItems=items)
    assert stack.store.get_run(claims[0].runs[0].run_id) is None  # refused before it was sent
    bare_dynamodb().transact_write_items(TransactItems=items)
    assert stack.store.get_run(claims[0].runs[0].run_id) is not None  # the emulator took all of it


def test_an_item_over_400_kb_is_refused_before_it_reaches_dynamodb() -> None:
    strict = enforce_aws_limits(bare_dynamodb())
    big = {"pk": {"S": "k"}, "v": {"S": "y" * 400_001}}
    with pytest.raises(ClientError, match="maximum allowed size"):
        strict.put_item(TableName=f"never-{uuid.uuid4().hex[:6]}", Item=big)
