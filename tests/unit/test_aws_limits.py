"""AWS's request limits as the strict check applies them (moto stands in for the services)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from duetime.adapters.aws.aws_limits import enforce_aws_limits, item_size, value_size


def test_item_sizes_follow_awss_rules() -> None:
    assert item_size({"name": {"S": "héllo"}}) == 4 + 6  # names and strings count UTF-8 bytes
    assert value_size({"N": "123"}) == 3 and value_size({"N": "-0.0012300"}) == 3  # digits / 2 + 1
    assert value_size({"BOOL": True}) == value_size({"NULL": True}) == 1
    assert value_size({"B": b"\x00\x01\x02"}) == 3
    assert value_size({"L": [{"S": "ab"}, {"N": "1"}]}) == 3 + (1 + 2) + (1 + 2)
    assert value_size({"M": {"k": {"S": "v"}}}) == 3 + 1 + 1 + 1
    assert value_size({"SS": ["a", "bc"]}) == 3


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    with mock_aws():
        client = enforce_aws_limits(boto3.client("dynamodb", region_name="us-east-1"))
        client.create_table(
            TableName="t",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        )
        yield client


def test_a_transaction_counts_each_updated_item_whole(dynamodb: Any) -> None:
    for i in range(12):  # 12 items of 350 KB: 4.2 MB, though each update's request is a few bytes
        dynamodb.put_item(TableName="t", Item={"pk": {"S": f"k{i}"}, "v": {"S": "x" * 350_000}})
    update = {
        "TableName": "t",
        "UpdateExpression": "SET n = :n",
        "ExpressionAttributeValues": {":n": {"N": "1"}},
    }
    actions = [{"Update": {**update, "Key": {"pk": {"S": f"k{i}"}}}} for i in range(12)]
    with pytest.raises(ClientError, match="add up to"):
        dynamodb.transact_write_items(TransactItems=actions)
    dynamodb.transact_write_items(TransactItems=actions[:11])  # 3.85 MB: accepted


def test_a_transaction_holds_100_actions_on_distinct_items(dynamodb: Any) -> None:
    put = [{"Put": {"TableName": "t", "Item": {"pk": {"S": f"k{i}"}}}} for i in range(101)]
    with pytest.raises(ClientError, match="at most 100"):
        dynamodb.transact_write_items(TransactItems=put)
    check = {"TableName": "t", "Key": {"pk": {"S": "a"}}, "ConditionExpression": "attribute_not_exists(pk)"}
    with pytest.raises(ClientError, match="multiple operations on one item"):
        dynamodb.transact_write_items(TransactItems=[{"ConditionCheck": check}, {"Delete": check}])


def test_batches_hold_25_writes_and_100_reads(dynamodb: Any) -> None:
    writes = [{"PutRequest": {"Item": {"pk": {"S": f"k{i}"}}}} for i in range(26)]
    with pytest.raises(ClientError, match="at most 25"):
        dynamodb.batch_write_item(RequestItems={"t": writes})
    keys = [{"pk": {"S": f"k{i}"}} for i in range(101)]
    with pytest.raises(ClientError, match="at most 100"):
        dynamodb.batch_get_item(RequestItems={"t": {"Keys": keys}})


@pytest.fixture
def sqs() -> Iterator[tuple[Any, str]]:
    with mock_aws():
        client = enforce_aws_limits(boto3.client("sqs", region_name="us-east-1"))
        yield client, client.create_queue(QueueName="q")["QueueUrl"]


def test_sqs_messages_batches_and_delays_are_held_to_awss_limits(sqs: tuple[Any, str]) -> None:
    client, url = sqs
    with pytest.raises(ClientError, match="SQS allows 262144"):
        client.send_message(QueueUrl=url, MessageBody="x" * (256 * 1024 + 1))
    with pytest.raises(ClientError, match="DelaySeconds 901"):
        client.send_message(QueueUrl=url, MessageBody="x", DelaySeconds=901)
    entries = [{"Id": str(i), "MessageBody": "x"} for i in range(11)]
    with pytest.raises(ClientError, match=r"1\.\.10"):
        client.send_message_batch(QueueUrl=url, Entries=entries)
    halves = [{"Id": str(i), "MessageBody": "x" * 140_000} for i in range(2)]
    with pytest.raises(ClientError, match="a batch of 280000 bytes"):
        client.send_message_batch(QueueUrl=url, Entries=halves)
    client.send_message_batch(QueueUrl=url, Entries=entries[:10])  # within every limit: sent
    assert len(client.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]) >= 1


def test_requests_within_the_limits_go_through_unchanged(dynamodb: Any) -> None:
    writes = [{"PutRequest": {"Item": {"pk": {"S": f"k{i}"}, "v": {"S": "x" * 1000}}}} for i in range(25)]
    assert not dynamodb.batch_write_item(RequestItems={"t": writes}).get("UnprocessedItems")
    keys = [{"pk": {"S": f"k{i}"}} for i in range(25)]
    assert len(dynamodb.batch_get_item(RequestItems={"t": {"Keys": keys}})["Responses"]["t"]) == 25
    puts = [{"Put": {"TableName": "t", "Item": {"pk": {"S": f"n{i}"}}}} for i in range(100)]
    dynamodb.transact_write_items(TransactItems=puts)
    page = dynamodb.query(
        TableName="t", KeyConditionExpression="pk = :k", ExpressionAttributeValues={":k": {"S": "k1"}}
    )
    assert page["Count"] == 1
