"""The lean transport answers as botocore does, on DynamoDB Local and LocalStack: the same calls, made by a
plain boto3 client on one table (queue) and by the lean client on a twin, give the same results and raise
the same errors, for every operation it sends. What the emulators cannot show: AWS's check of the
signature (tests/unit/test_sigv4 compares it with botocore's) and TLS (the emulators speak plain HTTP)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest

from duetime.adapters.aws.lean_transport import LEAN_OPERATIONS, LeanClient, with_lean_transport

Call = Callable[[Any, str], Any]  # (client, table or queue url) -> answer


def plain_and_lean(service: str) -> tuple[Any, LeanClient]:
    session = boto3.session.Session()
    lean = with_lean_transport(session.client(service), session.get_credentials())
    assert isinstance(lean, LeanClient)
    return session.client(service), lean


def outcome(call: Call, client: Any, where: str) -> tuple[str, Any]:
    """What the call returned, or the exception class and the error response it raised; without the
    request's own metadata and with the table's (queue's) name made the same for both."""
    try:
        answer: Any = call(client, where)
        kind = "returned"
    except client.exceptions.ClientError as exc:
        answer, kind = exc.response, f"raised {type(exc).__name__}"
    answer = {k: v for k, v in answer.items() if k != "ResponseMetadata"}
    return kind, _renamed(answer, where)


def _renamed(value: Any, where: str) -> Any:
    if isinstance(value, str):
        return value.replace(where, "<here>")
    if isinstance(value, list):
        return [_renamed(v, where) for v in value]
    if isinstance(value, dict):
        return {_renamed(k, where): _renamed(v, where) for k, v in value.items()}
    return value


# --- DynamoDB ---------------------------------------------------------------------------------------------

KEY = {"job_id": {"S": "j-1"}}
ITEM = {
    **KEY,
    "due_bucket": {"S": "07#2026-12-03T00:00"},
    "due_key": {"S": "2026-12-03T00:00:00Z#j-1"},
    "version": {"N": "1"},
    "spec": {"S": '{"target":"https://example.com/\\u00e9"}'},
    "labels": {"M": {"team": {"S": "a"}, "n": {"N": "1.50"}}},
    "tags": {"SS": ["x", "y"]},
    "flags": {"L": [{"BOOL": True}, {"NULL": True}]},
}
DYNAMODB_CALLS: dict[str, Call] = {
    "PutItem": lambda c, t: c.put_item(TableName=t, Item=ITEM, ReturnConsumedCapacity="TOTAL"),
    "GetItem": lambda c, t: c.get_item(TableName=t, Key=KEY, ConsistentRead=True),
    "UpdateItem": lambda c, t: c.update_item(
        TableName=t,
        Key=KEY,
        UpdateExpression="SET version = version + :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
        ReturnValues="ALL_NEW",
    ),
    "UpdateItem lost race": lambda c, t: c.update_item(
        TableName=t,
        Key=KEY,
        UpdateExpression="SET version = :v",
        ConditionExpression="version = :old",
        ExpressionAttributeValues={":v": {"N": "9"}, ":old": {"N": "1"}},
        ReturnValuesOnConditionCheckFailure="ALL_OLD",
    ),
    "Query": lambda c, t: c.query(
        TableName=t,
        IndexName="due",
        KeyConditionExpression="due_bucket = :b",
        ExpressionAttributeValues={":b": {"S": "07#2026-12-03T00:00"}},
        Limit=1,
    ),
    "BatchWriteItem": lambda c, t: c.batch_write_item(
        RequestItems={t: [{"PutRequest": {"Item": {**ITEM, "job_id": {"S": f"j-{i}"}}}} for i in range(2, 5)]}
    ),
    "BatchGetItem": lambda c, t: c.batch_get_item(
        RequestItems={
            t: {"Keys": [{"job_id": {"S": "j-2"}}, {"job_id": {"S": "nope"}}], "ConsistentRead": True}
        }
    ),
    "BatchExecuteStatement": lambda c, t: c.batch_execute_statement(
        Statements=[
            {"Statement": f'UPDATE "{t}" SET version = 5 WHERE job_id = ? AND version = 1', "Parameters": [v]}
            for v in ({"S": "j-2"}, {"S": "j-1"})  # j-1 is at version 2: a failed condition of one statement
        ]
    ),
    "ExecuteStatement": lambda c, t: c.execute_statement(
        Statement=f'SELECT job_id, version FROM "{t}" WHERE job_id = ?', Parameters=[{"S": "j-2"}]
    ),
    "TransactWriteItems cancelled": lambda c, t: c.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": t, "Item": {**ITEM, "job_id": {"S": "j-9"}}}},
            {
                "ConditionCheck": {
                    "TableName": t,
                    "Key": KEY,
                    "ConditionExpression": "attribute_not_exists(job_id)",
                }
            },
        ]
    ),
    "TransactGetItems": lambda c, t: c.transact_get_items(
        TransactItems=[
            {"Get": {"TableName": t, "Key": KEY}},
            {"Get": {"TableName": t, "Key": {"job_id": {"S": "j-3"}}}},
        ]
    ),
    "DeleteItem": lambda c, t: c.delete_item(
        TableName=t, Key={"job_id": {"S": "j-4"}}, ReturnValues="ALL_OLD"
    ),
    "GetItem of no table": lambda c, t: c.get_item(TableName=f"{t}-missing", Key=KEY),
    "Query refused": lambda c, t: c.query(TableName=t, KeyConditionExpression="nope = :x"),
}


@pytest.fixture
def twin_tables() -> Iterator[tuple[str, str]]:
    plain, _ = plain_and_lean("dynamodb")
    names = [f"lean-{uuid.uuid4().hex[:8]}-{side}" for side in ("plain", "lean")]
    for name in names:
        plain.create_table(
            TableName=name,
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "job_id", "KeyType": "HASH"}],
            AttributeDefinitions=[
                {"AttributeName": a, "AttributeType": "S"} for a in ("job_id", "due_bucket", "due_key")
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "due",
                    "KeySchema": [
                        {"AttributeName": "due_bucket", "KeyType": "HASH"},
                        {"AttributeName": "due_key", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
        )
    yield names[0], names[1]
    for name in names:
        plain.delete_table(TableName=name)


def test_every_dynamodb_operation_answers_and_fails_as_botocores(twin_tables: tuple[str, str]) -> None:
    plain, lean = plain_and_lean("dynamodb")
    plain_table, lean_table = twin_tables
    operations = set()
    for name, call in DYNAMODB_CALLS.items():  # in order: each builds on the last, on both twins alike
        operations.add(name.split()[0])
        expected = outcome(call, plain, plain_table)
        got = outcome(call, lean, lean_table)
        assert got == expected, name
    assert operations == LEAN_OPERATIONS["dynamodb"]  # none left out
    # The errors were the client's own classes, as botocore raises them.
    assert outcome(DYNAMODB_CALLS["UpdateItem lost race"], lean, lean_table)[0] == (
        "raised ConditionalCheckFailedException"
    )
    assert (
        outcome(DYNAMODB_CALLS["GetItem of no table"], lean, lean_table)[0]
        == "raised ResourceNotFoundException"
    )


def test_a_paginated_query_reads_the_same_pages_by_the_lean_client(twin_tables: tuple[str, str]) -> None:
    """``get_paginator("query")`` of the lean client sends each page itself (``LeanClient.get_paginator``)
    and reads what botocore's paginator reads, page by page, on DynamoDB Local."""
    plain, lean = plain_and_lean("dynamodb")
    lean_calls: list[str] = []
    call = lean._call
    lean._call = lambda operation, **params: lean_calls.append(operation) or call(operation, **params)  # type: ignore[method-assign]
    bucket = {"S": "07#2026-12-03T00:00"}

    def pages(client: Any, table: str) -> list[Any]:
        for i in range(7):
            item = {**ITEM, "job_id": {"S": f"j-{i}"}, "due_key": {"S": f"2026-12-03T00:00:00Z#j-{i}"}}
            client.put_item(TableName=table, Item=item)
        paginator = client.get_paginator("query").paginate(
            TableName=table,
            IndexName="due",
            KeyConditionExpression="due_bucket = :b",
            ExpressionAttributeValues={":b": bucket},
            PaginationConfig={"PageSize": 3},
        )
        answered = [{k: v for k, v in page.items() if k != "ResponseMetadata"} for page in paginator]
        return [_renamed(page, table) for page in answered]

    expected = pages(plain, twin_tables[0])
    got = pages(lean, twin_tables[1])
    assert [len(page["Items"]) for page in got] == [3, 3, 1]
    assert got == expected
    assert lean_calls.count("Query") == 3


# --- SQS --------------------------------------------------------------------------------------------------


def _masked(result: tuple[str, Any]) -> tuple[str, Any]:
    """Message ids differ from queue to queue: only their shape is compared."""
    return result[0], _renamed_ids(result[1])


def _renamed_ids(value: Any) -> Any:
    if isinstance(value, str):
        return re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<id>", value)
    if isinstance(value, list):
        return [_renamed_ids(v) for v in value]
    if isinstance(value, dict):
        return {k: _renamed_ids(v) for k, v in value.items()}
    return value


def test_every_sqs_operation_answers_and_fails_as_botocores() -> None:
    plain, lean = plain_and_lean("sqs")
    urls = [plain.create_queue(QueueName=f"lean-{uuid.uuid4().hex[:8]}-{side}")["QueueUrl"] for side in "ab"]
    handles: dict[str, list[str]] = {}

    def received(c: Any, q: str) -> list[str]:
        """The four messages sent, received by the plain client (ReceiveMessage is not lean)."""
        handles[q] = []
        while len(handles[q]) < 4:
            answer = plain.receive_message(QueueUrl=q, MaxNumberOfMessages=10, WaitTimeSeconds=1)
            handles[q] += [m["ReceiptHandle"] for m in answer.get("Messages", [])]
        return handles[q]

    calls: dict[str, Call] = {
        "SendMessage": lambda c, q: c.send_message(QueueUrl=q, MessageBody='{"run_id":"j@1","attempt":1}'),
        "SendMessageBatch": lambda c, q: c.send_message_batch(
            QueueUrl=q,
            Entries=[{"Id": str(i), "MessageBody": f"m{i}", "DelaySeconds": 0} for i in range(3)],
        ),
        "SendMessageBatch refused": lambda c, q: c.send_message_batch(  # a delay over 900 s: the whole batch
            QueueUrl=q, Entries=[{"Id": "late", "MessageBody": "x", "DelaySeconds": 901}]
        ),
        "ChangeMessageVisibility": lambda c, q: c.change_message_visibility(
            QueueUrl=q, ReceiptHandle=received(c, q)[0], VisibilityTimeout=0
        ),
        "ChangeMessageVisibilityBatch": lambda c, q: c.change_message_visibility_batch(
            QueueUrl=q, Entries=[{"Id": "0", "ReceiptHandle": handles[q][1], "VisibilityTimeout": 30}]
        ),
        "DeleteMessage": lambda c, q: c.delete_message(QueueUrl=q, ReceiptHandle=handles[q][2]),
        "DeleteMessageBatch": lambda c, q: c.delete_message_batch(
            QueueUrl=q,
            Entries=[{"Id": "0", "ReceiptHandle": handles[q][3]}, {"Id": "1", "ReceiptHandle": "bad"}],
        ),
        "SendMessage to no queue": lambda c, q: c.send_message(QueueUrl=f"{q}-missing", MessageBody="m"),
    }
    try:
        operations = set()
        for name, call in calls.items():
            operations.add(name.split()[0])
            expected = outcome(call, plain, urls[0])
            got = outcome(call, lean, urls[1])
            assert _masked(got) == _masked(expected), name
        # ReceiveMessage: its own test below (receipt handles and timestamps are each queue's own)
        assert operations == LEAN_OPERATIONS["sqs"] - {"ReceiveMessage"}
        assert outcome(calls["SendMessage to no queue"], lean, urls[1])[0] == "raised QueueDoesNotExist"
    finally:
        for url in urls:
            plain.delete_queue(QueueUrl=url)


def _received_shape(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """A ReceiveMessage answer's messages by body, without what differs from queue to queue (ids, receipt
    handles, timestamps): each message's keys, body, MD5 and receive count."""
    return sorted(
        (
            {
                "keys": sorted(message),
                "Body": message["Body"],
                "MD5OfBody": message["MD5OfBody"],
                "ApproximateReceiveCount": message.get("Attributes", {}).get("ApproximateReceiveCount"),
                "attributes": sorted(message.get("Attributes", {})),
            }
            for message in answer.get("Messages", [])
        ),
        key=lambda message: message["Body"],
    )


def test_receive_message_answers_and_fails_as_botocores() -> None:
    plain, lean = plain_and_lean("sqs")
    urls = [plain.create_queue(QueueName=f"lean-{uuid.uuid4().hex[:8]}-{side}")["QueueUrl"] for side in "ab"]
    bodies = ['{"run_id":"j@1","attempt":1}', "caf\u00e9 \u2603", "x" * 300]
    try:
        answers = []
        for client, url in ((plain, urls[0]), (lean, urls[1])):
            plain.send_message_batch(
                QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": body} for i, body in enumerate(bodies)]
            )
            got: list[dict[str, Any]] = []
            while len(got) < len(bodies):
                answer = client.receive_message(
                    QueueUrl=url,
                    MaxNumberOfMessages=10,
                    WaitTimeSeconds=1,
                    MessageSystemAttributeNames=["ApproximateReceiveCount"],
                )
                got += answer.get("Messages", [])
            answers.append(_received_shape({"Messages": got}))
            empty = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
            assert "Messages" not in empty  # nothing left: no messages, as botocore reads it
        assert answers[0] == answers[1]
        assert [m["Body"] for m in answers[1]] == sorted(bodies)
        missing = outcome(lambda c, q: c.receive_message(QueueUrl=f"{q}-missing"), lean, urls[1])
        assert missing == outcome(lambda c, q: c.receive_message(QueueUrl=f"{q}-missing"), plain, urls[1])
        assert missing[0] == "raised QueueDoesNotExist"
    finally:
        for url in urls:
            plain.delete_queue(QueueUrl=url)


def test_a_receive_asking_for_message_attributes_goes_through_botocore() -> None:
    """Their binary values are blobs, which only botocore's parser decodes."""
    plain, lean = plain_and_lean("sqs")
    url = plain.create_queue(QueueName=f"lean-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    try:
        plain.send_message(
            QueueUrl=url,
            MessageBody="m",
            MessageAttributes={"raw": {"DataType": "Binary", "BinaryValue": b"\x00\xff"}},
        )
        answer = lean.receive_message(QueueUrl=url, MessageAttributeNames=["All"], WaitTimeSeconds=1)
        (message,) = answer["Messages"]
        assert message["MessageAttributes"]["raw"]["BinaryValue"] == b"\x00\xff"
    finally:
        plain.delete_queue(QueueUrl=url)
