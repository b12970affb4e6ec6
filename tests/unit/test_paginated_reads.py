"""Reads that go to the end of a Query, Scan or log search do it by boto3's paginators: each page's
``LastEvaluatedKey`` (``nextToken``) is the next request's ``ExclusiveStartKey`` (``nextToken``), and every
page counts. botocore's Stubber answers in place of AWS and checks each request."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from duetime.adapters.dynamodb.codec import string_attribute
from duetime.adapters.dynamodb.reap_tickets import TICKET_OCCURRENCE
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.dynamodb.tables import DUE_INDEX, TableNames
from duetime.adapters.dynamodb.worker_batches import WorkerBatches
from duetime.domain.models import Team
from duetime.domain.timeutil import iso_z
from duetime_bench.chaos import _scan_runs_table
from duetime_bench.deployed import log_messages

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def stubbed(service: str) -> Iterator[tuple[Any, Stubber]]:
    """A plain client of ``service`` whose answers the Stubber gives (nothing is sent), all of them used."""
    session = boto3.session.Session(aws_access_key_id="AKID", aws_secret_access_key="secret")
    client = session.client(service, region_name="eu-west-1", endpoint_url="http://127.0.0.1:9")  # type: ignore[call-overload]
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


@pytest.fixture
def dynamodb() -> Iterator[tuple[Any, Stubber]]:
    yield from stubbed("dynamodb")


@pytest.fixture
def logs() -> Iterator[tuple[Any, Stubber]]:
    yield from stubbed("logs")


def test_a_due_count_adds_up_every_page_of_the_index(dynamodb: tuple[Any, Stubber]) -> None:
    client, stubber = dynamodb
    query = {
        "TableName": "jobs",
        "IndexName": DUE_INDEX,
        "KeyConditionExpression": "due_bucket = :bucket",
        "ExpressionAttributeValues": {":bucket": string_attribute("03#2026-12-01T10:00")},
        "Select": "COUNT",
    }
    last = {
        "job_id": string_attribute("j-7"),
        "due_bucket": string_attribute("03#2026-12-01T10:00"),
        "due_key": string_attribute("k"),
    }
    stubber.add_response("query", {"Count": 7, "ScannedCount": 7, "LastEvaluatedKey": last}, query)
    stubber.add_response("query", {"Count": 2, "ScannedCount": 2}, {**query, "ExclusiveStartKey": last})
    store = DynamoStore(client, TableNames(jobs="jobs"))
    assert store.count_due(3, "2026-12-01T10:00") == 9


def slot_item(first: int, holders: dict[int, datetime]) -> dict[str, Any]:
    item = {"pk": string_attribute("team#t#slots#0"), "sk": string_attribute(f"slot#{first:05d}")}
    for k, until in holders.items():
        item[f"holder_{k}"] = string_attribute(f"run-{first + k}")
        item[f"until_{k}"] = string_attribute(iso_z(until))
    return item


def test_a_slot_group_is_read_to_its_last_page(dynamodb: tuple[Any, Stubber]) -> None:
    client, stubber = dynamodb
    query = {
        "TableName": "control",
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": string_attribute("team#t#slots#0")},
        "ConsistentRead": True,
    }
    later, earlier = NOW + timedelta(seconds=30), NOW - timedelta(seconds=1)
    first_page = [slot_item(0, {1: later}), slot_item(5, {0: earlier})]  # slot 5's lease lapsed
    stubber.add_response(
        "query", {"Items": first_page, "LastEvaluatedKey": {k: first_page[1][k] for k in ("pk", "sk")}}, query
    )
    stubber.add_response(
        "query",
        {"Items": [slot_item(10, {2: later, 4: later})]},
        {**query, "ExclusiveStartKey": {k: first_page[1][k] for k in ("pk", "sk")}},
    )
    batches = SimpleNamespace(client=client, names=TableNames(control="control"))
    team = Team(team_id="t", max_concurrency=20)
    free, existing = WorkerBatches.slot_group_state(batches, team, 0, NOW)  # type: ignore[arg-type]
    assert existing == {0, 5, 10}
    assert free == [slot for slot in range(20) if slot not in (1, 12, 14)]


def test_the_chaos_checks_scan_the_whole_runs_table(dynamodb: tuple[Any, Stubber]) -> None:
    client, stubber = dynamodb
    scan = {"TableName": "runs", "ConsistentRead": True}
    ticket = {"job_id": string_attribute("j"), "occurrence": string_attribute(TICKET_OCCURRENCE)}
    watch = {
        "job_id": string_attribute("~watch"),
        "occurrence": string_attribute("w"),
    }  # a deadline watch: not a run
    stubber.add_response("scan", {"Items": [ticket], "LastEvaluatedKey": ticket}, scan)
    stubber.add_response("scan", {"Items": [watch, ticket]}, {**scan, "ExclusiveStartKey": ticket})
    stack = SimpleNamespace(dynamodb=client, names=TableNames(runs="runs"))
    assert _scan_runs_table(stack) == ({}, 2)  # type: ignore[arg-type]


def test_a_functions_log_lines_are_read_page_after_page(logs: tuple[Any, Stubber]) -> None:
    client, stubber = logs
    search = {"logGroupName": "/aws/lambda/poller", "startTime": 5}
    stubber.add_response("filter_log_events", {"events": [{"message": "a"}], "nextToken": "t1"}, search)
    stubber.add_response("filter_log_events", {"events": [{"message": "b"}]}, {**search, "nextToken": "t1"})
    assert log_messages(client, "poller", 5) == ["a", "b"]


def test_log_lines_end_at_a_token_answered_twice_or_a_missing_log_group(logs: tuple[Any, Stubber]) -> None:
    client, stubber = logs
    search = {"logGroupName": "/aws/lambda/worker", "startTime": 5}
    stubber.add_response("filter_log_events", {"events": [{"message": "a"}], "nextToken": "t1"}, search)
    stubber.add_response(
        "filter_log_events", {"events": [{"message": "b"}], "nextToken": "t1"}, {**search, "nextToken": "t1"}
    )
    assert log_messages(client, "worker", 5) == ["a", "b"]  # LocalStack's repeated token ends the search
    stubber.add_client_error("filter_log_events", "ResourceNotFoundException", "no such group")
    assert log_messages(client, "never-ran", 5) == []
