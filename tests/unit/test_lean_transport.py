"""The lean transport against a stub HTTP server: what it sends, how it reads answers and errors, how it
retries (the client's own retry handler decides), and that every hook of the wrapped client still sees
its requests. Its answers beside botocore's on the real emulators: tests/integration/test_lean_transport."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import ClientError, EndpointConnectionError

from duetime.adapters.aws import lean_transport
from duetime.adapters.aws.lean_transport import LeanClient, lean_wanted, with_lean_transport

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


@dataclass
class Answer:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    close: bool = False  # close the connection after answering


@dataclass
class Stub:
    """Answers requests in turn from ``answers`` (the last one again when they run out)."""

    answers: list[Answer]
    received: list[tuple[dict[str, str], dict[str, Any]]] = field(default_factory=list)
    connections: set[int] = field(default_factory=set)  # the numbers of the connections requests came on
    numbers: Iterator[int] = field(default_factory=lambda: itertools.count(1))  # one a connection accepted

    def next_answer(self) -> Answer:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


@pytest.fixture
def stub() -> Iterator[tuple[Stub, str]]:
    state = Stub([Answer(200, {})])

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:  # once a connection (its requests are then handled in turn)
            super().setup()
            self.number = next(state.numbers)

        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            state.received.append((dict(self.headers.items()), json.loads(self.rfile.read(length))))
            # By number, not id(self.connection): a closed socket's id can be reused by the next one.
            state.connections.add(self.number)
            answer = state.next_answer()
            data = json.dumps(answer.body).encode()
            self.send_response(answer.status)
            for name, value in {"Content-Type": "application/x-amz-json-1.0", **answer.headers}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            if answer.close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield state, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits between attempts the retry handler asks for, recorded instead of slept (the test stays as
    fast as the retries it counts: standard mode waits up to 1 s, then 2 s...)."""
    asked: list[float] = []
    monkeypatch.setattr(lean_transport, "time", SimpleNamespace(sleep=asked.append))
    return asked


def lean_client(service: str, url: str, **config: Any) -> LeanClient:
    session = boto3.session.Session(aws_access_key_id="AKID", aws_secret_access_key="secret")
    made = session.client(
        service,
        endpoint_url=url,
        region_name="eu-west-1",
        config=Config(retries={"mode": "standard", "total_max_attempts": 3}, **config),
    )
    wrapped = with_lean_transport(made, session.get_credentials())
    assert isinstance(wrapped, LeanClient)
    return wrapped


def test_a_request_is_the_operations_json_signed_and_its_answer_is_read_as_json(
    stub: tuple[Stub, str],
) -> None:
    state, url = stub
    item = {"job_id": {"S": "j-1"}, "version": {"N": "3"}}
    state.answers = [Answer(200, {"Item": item}, {"x-amzn-RequestId": "r-1"})]
    client = lean_client("dynamodb", url)

    answer = client.get_item(TableName="jobs", Key={"job_id": {"S": "j-1"}}, ConsistentRead=True)

    headers, body = state.received[0]
    assert body == {"TableName": "jobs", "Key": {"job_id": {"S": "j-1"}}, "ConsistentRead": True}
    assert headers["X-Amz-Target"] == "DynamoDB_20120810.GetItem"
    assert headers["Content-Type"] == "application/x-amz-json-1.0"
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKID/")
    assert "/eu-west-1/dynamodb/aws4_request" in headers["Authorization"]
    assert answer["Item"] == item
    assert answer["ResponseMetadata"]["RequestId"] == "r-1"
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert answer["ResponseMetadata"]["RetryAttempts"] == 0


def test_sqs_requests_carry_the_query_compatible_header(stub: tuple[Stub, str]) -> None:
    state, url = stub
    state.answers = [Answer(200, {"Successful": [{"Id": "0", "MessageId": "m", "MD5OfMessageBody": "x"}]})]
    client = lean_client("sqs", url)
    client.send_message_batch(QueueUrl=f"{url}/000/q", Entries=[{"Id": "0", "MessageBody": "hi"}])
    headers, _ = state.received[0]
    assert headers["X-Amz-Target"] == "AmazonSQS.SendMessageBatch"
    assert headers["x-amzn-query-mode"] == "true"


def test_a_throttled_request_is_retried_as_the_clients_retry_mode_says(
    stub: tuple[Stub, str], waits: list[float]
) -> None:
    state, url = stub
    throttled = Answer(
        400, {"__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException", "message": "slow"}
    )
    state.answers = [throttled, throttled, Answer(200, {"Items": [], "Count": 0})]
    client = lean_client("dynamodb", url)
    answer = client.query(TableName="jobs", KeyConditionExpression="a = :a")
    assert len(state.received) == 3
    assert answer["ResponseMetadata"]["RetryAttempts"] == 2
    assert len(waits) == 2 and all(0 <= wait <= 20 for wait in waits)  # standard mode's capped backoff


def test_an_error_is_the_clients_exception_class_with_its_modeled_fields(stub: tuple[Stub, str]) -> None:
    state, url = stub
    reasons = [
        {"Code": "None"},
        {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"},
    ]
    state.answers = [
        Answer(
            400,
            {
                "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
                "message": "Transaction cancelled",
                "CancellationReasons": reasons,
            },
        )
    ]
    client = lean_client("dynamodb", url)
    with pytest.raises(client.exceptions.TransactionCanceledException) as raised:
        client.transact_write_items(TransactItems=[])
    assert raised.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert raised.value.response["CancellationReasons"] == reasons
    assert len(state.received) == 1  # a cancelled transaction is not retried


def test_throttling_past_the_attempts_raises_the_clients_error(
    stub: tuple[Stub, str], waits: list[float]
) -> None:
    state, url = stub
    state.answers = [Answer(400, {"__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException"})]
    client = lean_client("dynamodb", url)
    with pytest.raises(ClientError) as raised:
        client.update_item(TableName="jobs", Key={"job_id": {"S": "j"}})
    assert raised.value.response["Error"]["Code"] == "ThrottlingException"
    assert len(state.received) == 3  # total_max_attempts
    assert len(waits) == 2  # between the attempts, none after the last


def test_an_idle_connection_the_server_closed_is_opened_again(stub: tuple[Stub, str]) -> None:
    state, url = stub
    state.answers = [Answer(200, {}, close=True), Answer(200, {})]
    client = lean_client("dynamodb", url)
    client.put_item(TableName="jobs", Item={"job_id": {"S": "a"}})
    client.put_item(TableName="jobs", Item={"job_id": {"S": "b"}})
    client.put_item(TableName="jobs", Item={"job_id": {"S": "c"}})
    assert len(state.received) == 3
    assert len(state.connections) == 2  # the closed one, then one kept alive for the next two


def test_no_server_is_botocores_connection_error_after_the_retries(waits: list[float]) -> None:
    client = lean_client("dynamodb", "http://127.0.0.1:9", connect_timeout=0.5)
    with pytest.raises(EndpointConnectionError):
        client.get_item(TableName="jobs", Key={"job_id": {"S": "j"}})
    assert len(waits) == 2  # retried, as botocore retries a connection error


def test_every_hook_of_the_wrapped_client_sees_the_request(stub: tuple[Stub, str]) -> None:
    state, url = stub
    state.answers = [Answer(200, {"Responses": [{}]}, {"x-amzn-RequestId": "r-9"})]
    client = lean_client("dynamodb", url)
    seen: list[str] = []
    events = client.meta.events

    def asked(params: dict[str, Any], **_: Any) -> None:
        seen.append("provide-client-params")
        params["ReturnConsumedCapacity"] = "TOTAL"  # a hook may change what is sent (a bench's ledger)

    events.register("provide-client-params.dynamodb.BatchExecuteStatement", asked)
    events.register(
        "before-call.dynamodb", lambda params, **_: seen.append(f"before-call:{bool(params['body'])}")
    )
    events.register("before-send.dynamodb", lambda request, **_: seen.append(f"before-send:{request.url}"))
    events.register(
        "after-call.dynamodb",
        # the answer's headers, case-insensitive as botocore's (the store clock reads "Date" so)
        lambda http_response, parsed, **_: seen.append(
            f"after-call:{http_response.headers.get('X-AMZN-REQUESTID')}"
        ),
    )
    client.batch_execute_statement(Statements=[{"Statement": "SELECT * FROM jobs"}])

    assert seen == [
        "provide-client-params",
        "before-call:True",
        f"before-send:{url}/",
        "after-call:r-9",
    ]
    assert state.received[0][1]["ReturnConsumedCapacity"] == "TOTAL"


def test_an_answer_given_by_a_before_send_hook_is_used_and_nothing_is_sent(stub: tuple[Stub, str]) -> None:
    state, url = stub
    client = lean_client("dynamodb", url)

    class Body:
        def stream(self, **_: Any) -> Iterator[bytes]:
            yield b'{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"injected"}'

    calls = []

    def fault(request: Any, **_: Any) -> AWSResponse | None:
        calls.append(request)
        return AWSResponse(request.url, 500, {}, Body()) if len(calls) == 1 else None  # type: ignore[arg-type]

    client.meta.events.register("before-send.dynamodb", fault)
    client.delete_item(TableName="jobs", Key={"job_id": {"S": "j"}})
    assert len(calls) == 2  # the injected 500, then a retry that reached the server
    assert len(state.received) == 1


def test_other_operations_are_the_wrapped_clients_and_meta_is_shared(stub: tuple[Stub, str]) -> None:
    _, url = stub
    client = lean_client("dynamodb", url)
    assert client.describe_table.__self__ is client.wrapped  # not lean: its answer holds timestamps
    assert client.meta is client.wrapped.meta
    assert client.exceptions is client.wrapped.exceptions


def test_a_paginator_of_a_lean_operation_fetches_every_page_the_lean_way(stub: tuple[Stub, str]) -> None:
    state, url = stub
    last = {"job_id": {"S": "j-1"}}
    state.answers = [
        Answer(200, {"Items": [last], "Count": 1, "LastEvaluatedKey": last}),
        Answer(200, {"Items": [{"job_id": {"S": "j-2"}}], "Count": 1}),
    ]
    client = lean_client("dynamodb", url)
    lean_calls: list[str] = []
    call = client._call
    client._call = lambda operation, **params: lean_calls.append(operation) or call(operation, **params)  # type: ignore[method-assign]
    pages = list(client.get_paginator("query").paginate(TableName="jobs", KeyConditionExpression="a = :a"))
    assert [page["Items"] for page in pages] == [[last], [{"job_id": {"S": "j-2"}}]]
    bodies = [body for _, body in state.received]
    assert bodies[0] == {"TableName": "jobs", "KeyConditionExpression": "a = :a"}
    assert bodies[1] == {**bodies[0], "ExclusiveStartKey": last}
    assert all(headers["X-Amz-Target"] == "DynamoDB_20120810.Query" for headers, _ in state.received)
    assert lean_calls == ["Query", "Query"]  # each page sent by the lean client, not by botocore's
    assert client.get_paginator("scan").__class__.__name__.endswith("Paginator.Scan")  # not lean: botocore's


def test_binary_values_are_refused_with_a_clear_error(stub: tuple[Stub, str]) -> None:
    _, url = stub
    client = lean_client("dynamodb", url)
    with pytest.raises(TypeError, match="binary"):
        client.put_item(TableName="jobs", Item={"job_id": {"S": "j"}, "blob": {"B": b"\x00"}})


def test_the_lean_transport_is_off_when_asked_or_behind_a_proxy(stub: tuple[Stub, str]) -> None:
    _, url = stub
    assert lean_wanted({})
    assert not lean_wanted({"DUETIME_LEAN_TRANSPORT": "0"})
    assert not lean_wanted({"HTTPS_PROXY": "http://proxy:3128"})
    session = boto3.session.Session(aws_access_key_id="AKID", aws_secret_access_key="secret")
    proxied = session.client(
        "dynamodb",
        endpoint_url=url,
        region_name="eu-west-1",
        config=Config(proxies={"https": "http://p:3128"}),
    )
    assert with_lean_transport(proxied, session.get_credentials()) is proxied
    lambda_client = session.client("lambda", endpoint_url=url, region_name="eu-west-1")
    assert with_lean_transport(lambda_client, session.get_credentials()) is lambda_client
