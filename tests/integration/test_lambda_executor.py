"""LocalStack runs real Lambda handlers without Docker (localstack/lambda_executor, ``duetime-process``).

The tests use the deployed-stack LocalStack (``scripts/emulators.sh start-deployed``, port
``DUETIME_DEPLOYED_PORT``, default 4610): one that already answers there is reused, otherwise the module
starts it and stops it at the end (and checks that no runtime process outlives it). The SIGKILL test starts a
LocalStack of its own on a free port.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import textwrap
import time
import urllib.request
import uuid
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from ..emulators import reachable

# The tests on the LocalStack on PORT (this module's, test_event_pollers', one of test_aws_targets_localstack)
# run in turn on one xdist worker: a module that finds it answering reuses it, and the module that started it
# stops it at its end, which would pull it from under a test beside it.
ON_THE_DEPLOYED_PORT = pytest.mark.xdist_group("localstack-deployed-port")
pytestmark = [pytest.mark.integration, ON_THE_DEPLOYED_PORT]

ROOT = Path(__file__).resolve().parents[2]
EMULATORS = ROOT / "scripts" / "emulators.sh"
CACHE = Path(os.environ.get("DUETIME_CACHE", ROOT / ".cache"))
PORT = int(os.environ.get("DUETIME_DEPLOYED_PORT", "4610"))
ROLE = "arn:aws:iam::000000000000:role/duetime-test"

HANDLER = textwrap.dedent(
    """
    import json
    import os
    import sys
    import time

    print("init: module loaded")


    def handler(event, context):
        if "Records" in event:  # SQS: bodies starting with "fail" are reported as failures
            print("BATCH " + json.dumps([r["body"] for r in event["Records"]]))
            for r in event["Records"]:
                if r["body"].startswith("hold"):  # a batch that takes a while: when it ran, in host time
                    began = time.time()
                    time.sleep(1.5)
                    print("SPAN " + json.dumps([began, time.time()]))
            failed = [r["messageId"] for r in event["Records"] if r["body"].startswith("fail")]
            return {"batchItemFailures": [{"itemIdentifier": i} for i in failed]}
        if "httpMethod" in event:  # API Gateway proxy integration
            body = json.dumps({"path": event["path"], "method": event["httpMethod"]})
            return {"statusCode": 201, "headers": {"x-function": context.function_name}, "body": body}
        if "detail-type" in event:  # EventBridge
            print("EVENT " + json.dumps(event["detail"]))
            return None
        do = event.get("do")
        print("handling " + json.dumps(event))
        if do == "raise":
            raise ValueError("asked to fail")
        if do == "sleep":
            time.sleep(event["seconds"])
        if do == "exit":
            os._exit(3)
        remaining_ms = context.get_remaining_time_in_millis()
        return {"echo": event, "python": sys.version_info[:2], "remaining_ms": remaining_ms}
    """
)


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("app.py", HANDLER)
    return buffer.getvalue()


def _script(command: str, port: int) -> None:
    env = {**os.environ, "DUETIME_DEPLOYED_PORT": str(port)}
    done = subprocess.run([str(EMULATORS), command], env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        pytest.fail(
            f"emulators.sh {command} failed ({done.returncode}):\n{done.stderr[-4000:]}", pytrace=False
        )


def _runtime_pids(port: int, function: str | None = None) -> set[int]:
    """Live ``python -m awslambdaric`` processes serving the LocalStack on ``port``, read from /proc.

    Not from ``ps``: with ``COLUMNS`` set (CI sets 80) it cuts command lines short, and a longer checkout
    path pushed ``awslambdaric`` past the cut.
    """
    wanted = [f"AWS_ENDPOINT_URL=http://127.0.0.1:{port}".encode()]
    if function:
        wanted.append(f"AWS_LAMBDA_FUNCTION_NAME={function}".encode())
    pids = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or not ours
            continue
        if b"awslambdaric" not in argv or state == "Z":
            continue
        if all(w in environ for w in wanted):
            pids.add(int(proc.name))
    return pids


def _wait_for(condition: Callable[[], Any], seconds: float, what: str) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {seconds} s", pytrace=False)
        time.sleep(0.2)


@dataclass
class DeployedLocalStack:
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, service: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )

    def create_function(self, timeout: int = 10, name: str | None = None) -> str:
        name = name or f"executor-test-{uuid.uuid4().hex[:8]}"
        lam = self.client("lambda")
        lam.create_function(
            FunctionName=name,
            Runtime="python3.13",
            Role=ROLE,
            Handler="app.handler",
            Code={"ZipFile": _zip()},
            Timeout=timeout,
            MemorySize=256,
        )
        lam.get_waiter("function_active_v2").wait(FunctionName=name, WaiterConfig={"Delay": 0.2})
        return name

    def invoke(self, name: str, event: dict[str, Any]) -> tuple[dict[str, Any], Any, str, float]:
        """(response, decoded payload, tail of the logs, seconds)"""
        began = time.perf_counter()
        response = self.client("lambda").invoke(FunctionName=name, Payload=json.dumps(event), LogType="Tail")
        seconds = time.perf_counter() - began
        payload = json.loads(response["Payload"].read() or b"null")
        return response, payload, base64.b64decode(response.get("LogResult", "")).decode(), seconds


@pytest.fixture(scope="module")
def deployed() -> Iterator[DeployedLocalStack]:
    started = not reachable(f"http://127.0.0.1:{PORT}")
    if started:
        _script("start-deployed", PORT)
    yield DeployedLocalStack(PORT)
    if started:
        _script("stop-deployed", PORT)
        left = _runtime_pids(PORT)
        assert not left, f"runtime processes outlived the LocalStack on {PORT}: {left}"


@pytest.fixture
def function(deployed: DeployedLocalStack) -> Iterator[Callable[..., str]]:
    created: list[str] = []

    def create(timeout: int = 10) -> str:
        created.append(deployed.create_function(timeout))
        return created[-1]

    yield create
    for name in created:
        deployed.client("lambda").delete_function(FunctionName=name)


def test_invoke_returns_the_handlers_payload_with_lambdas_log_lines(
    deployed: DeployedLocalStack, function: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    began = time.perf_counter()
    name = function()
    active = time.perf_counter() - began

    response, payload, logs, cold = deployed.invoke(name, {"n": 1})
    assert "FunctionError" not in response
    assert payload["echo"] == {"n": 1}
    assert 0 < payload["remaining_ms"] <= 10_000
    lines = logs.splitlines()
    start = next(line for line in lines if line.startswith("START RequestId: "))
    assert start.endswith(" Version: $LATEST")
    assert "init: module loaded" in lines  # init output, before START
    assert 'handling {"n": 1}' in lines
    assert any(line.startswith("END RequestId: ") for line in lines)
    report = next(line for line in lines if line.startswith("REPORT RequestId: "))
    for field in (
        "Duration: ",
        "Billed Duration: ",
        "Memory Size: 256 MB",
        "Max Memory Used: ",
        "Init Duration: ",
    ):
        assert field in report, (field, report)

    warm = []
    for i in range(20):
        response, payload, logs, seconds = deployed.invoke(name, {"n": i})
        assert payload["echo"] == {"n": i}
        assert "Init Duration" not in logs
        warm.append(seconds)
    init_ms = report.split("Init Duration: ")[1].split(" ms")[0]
    with capsys.disabled():
        print(
            f"\n[duetime-process] CreateFunction->Active {active * 1000:.0f} ms; "
            f"cold invoke {cold * 1000:.1f} ms "
            f"(Init Duration {init_ms} ms); warm invoke median {statistics.median(warm) * 1000:.1f} ms, "
            f"min {min(warm) * 1000:.1f} ms, max {max(warm) * 1000:.1f} ms (boto3 round trips, 20 invokes)"
        )


def test_an_exception_is_a_function_error(deployed: DeployedLocalStack, function: Callable[..., str]) -> None:
    name = function()
    response, payload, logs, _ = deployed.invoke(name, {"do": "raise"})
    assert response["FunctionError"] == "Unhandled"
    assert payload["errorType"] == "ValueError"
    assert payload["errorMessage"] == "asked to fail"
    assert "[ERROR] ValueError: asked to fail" in logs
    # The environment survives a handled error: the next invoke is warm.
    _, payload, logs, _ = deployed.invoke(name, {"n": 2})
    assert payload["echo"] == {"n": 2}
    assert "Init Duration" not in logs


def test_a_handler_past_its_timeout_gets_sandbox_timedout(
    deployed: DeployedLocalStack, function: Callable[..., str]
) -> None:
    name = function(timeout=1)
    deployed.invoke(name, {"n": 0})  # warm it up: the timeout is the invoke's, not the init's
    response, payload, logs, seconds = deployed.invoke(name, {"do": "sleep", "seconds": 30})
    assert response["FunctionError"] == "Unhandled"
    assert payload["errorType"] == "Sandbox.Timedout"
    assert payload["errorMessage"].endswith("Error: Task timed out after 1.00 seconds")
    assert 0.95 <= seconds < 5, seconds
    assert "Task timed out after 1.00 seconds" in logs
    assert "\tStatus: timeout" in logs
    assert not _runtime_pids(deployed.port, name), "the timed-out runtime was not killed"
    # The next invoke gets a new sandbox (an init, as Lambda's after a timeout).
    response, payload, logs, _ = deployed.invoke(name, {"n": 1})
    assert "FunctionError" not in response
    assert payload["echo"] == {"n": 1}
    assert "Init Duration" in logs


def test_a_handler_that_exits_fails_fast(deployed: DeployedLocalStack, function: Callable[..., str]) -> None:
    name = function(timeout=30)
    response, payload, logs, seconds = deployed.invoke(name, {"do": "exit"})
    assert response["FunctionError"] == "Unhandled"
    assert payload["errorType"] == "Runtime.ExitError"
    assert payload["errorMessage"].endswith("Error: Runtime exited with error: exit status 3")
    assert seconds < 5, f"took {seconds:.1f} s: waited for the 30 s timeout?"
    assert "Error Type: Runtime.ExitError" in logs
    response, payload, _, _ = deployed.invoke(name, {"n": 1})
    assert payload["echo"] == {"n": 1}


def _log_messages(deployed: DeployedLocalStack, name: str) -> list[str]:
    logs = deployed.client("logs")
    try:
        events = logs.filter_log_events(logGroupName=f"/aws/lambda/{name}")["events"]
    except logs.exceptions.ResourceNotFoundException:
        return []
    return [e["message"].rstrip("\n") for e in events]


def test_sqs_event_source_mapping_redelivers_only_the_reported_failures(
    deployed: DeployedLocalStack, function: Callable[..., str]
) -> None:
    name = function()
    sqs, lam = deployed.client("sqs"), deployed.client("lambda")
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    # A failed message comes back after 1 s and, received a second time, goes to the DLQ.
    redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "1"})
    queue = sqs.create_queue(
        QueueName=f"{name}-queue", Attributes={"VisibilityTimeout": "1", "RedrivePolicy": redrive}
    )["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    bodies = ["ok-1", "fail-2", "ok-3", "fail-4", "ok-5"]
    sqs.send_message_batch(
        QueueUrl=queue, Entries=[{"Id": str(i), "MessageBody": b} for i, b in enumerate(bodies)]
    )
    mapping = lam.create_event_source_mapping(
        EventSourceArn=queue_arn,
        FunctionName=name,
        BatchSize=3,
        FunctionResponseTypes=["ReportBatchItemFailures"],
    )["UUID"]
    try:
        dead: list[str] = []

        def failures_in_dlq() -> bool:
            for m in sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
                "Messages", []
            ):
                dead.append(m["Body"])
                sqs.delete_message(QueueUrl=dlq, ReceiptHandle=m["ReceiptHandle"])
            return len(dead) >= 2

        _wait_for(failures_in_dlq, 60, "the two reported failures reaching the DLQ")
        assert sorted(dead) == ["fail-2", "fail-4"]

        def batches() -> list[list[str]]:
            found = [
                json.loads(m[len("BATCH ") :])
                for m in _log_messages(deployed, name)
                if m.startswith("BATCH ")
            ]
            return found if sorted(b for batch in found for b in batch) == sorted(bodies) else []

        delivered = _wait_for(batches, 30, "the function's batches in CloudWatch Logs")
        assert all(1 <= len(batch) <= 3 for batch in delivered), delivered
        attributes = sqs.get_queue_attributes(
            QueueUrl=queue,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        assert attributes == {
            "ApproximateNumberOfMessages": "0",
            "ApproximateNumberOfMessagesNotVisible": "0",
        }
        messages = _log_messages(deployed, name)
        assert any(m.startswith("START RequestId: ") for m in messages)
        assert any(m.startswith("END RequestId: ") for m in messages)
        assert any(m.startswith("REPORT RequestId: ") for m in messages)
    finally:
        lam.delete_event_source_mapping(UUID=mapping)
        sqs.delete_queue(QueueUrl=queue)
        sqs.delete_queue(QueueUrl=dlq)


def test_sqs_event_source_mapping_runs_up_to_five_batches_at_once_as_aws_starts(
    deployed: DeployedLocalStack, function: Callable[..., str]
) -> None:
    """AWS starts a mapping at five concurrent batches; stock LocalStack runs one at a time.

    The deployed LocalStack long-polls with five (``sqs_event_source.py``): eight one-message batches that
    each take 1.5 s overlap, but never more than five at once.
    """
    name = function(timeout=30)
    sqs, lam = deployed.client("sqs"), deployed.client("lambda")
    queue = sqs.create_queue(QueueName=f"{name}-queue", Attributes={"VisibilityTimeout": "60"})["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sqs.send_message_batch(
        QueueUrl=queue, Entries=[{"Id": str(i), "MessageBody": f"hold-{i}"} for i in range(8)]
    )
    mapping = lam.create_event_source_mapping(EventSourceArn=queue_arn, FunctionName=name, BatchSize=1)[
        "UUID"
    ]
    try:

        def spans() -> list[tuple[float, float]]:
            found = [
                json.loads(m[len("SPAN ") :]) for m in _log_messages(deployed, name) if m.startswith("SPAN ")
            ]
            return [(b, e) for b, e in found] if len(found) >= 8 else []

        ran = _wait_for(spans, 90, "eight batches run by the event source mapping")
        assert len(ran) == 8, ran  # one call per message: none ran twice
        edges = sorted([(b, 1) for b, _ in ran] + [(e, -1) for _, e in ran], key=lambda x: (x[0], x[1]))
        at_once = most = 0
        for _, step in edges:
            at_once += step
            most = max(most, at_once)
        assert 2 <= most <= 5, f"{most} batches at once: {sorted(ran)}"
    finally:
        lam.delete_event_source_mapping(UUID=mapping)
        sqs.delete_queue(QueueUrl=queue)


def test_api_gateway_proxy_integration_runs_the_handler(
    deployed: DeployedLocalStack, function: Callable[..., str]
) -> None:
    name = function()
    arn = deployed.client("lambda").get_function(FunctionName=name)["Configuration"]["FunctionArn"]
    apigw = deployed.client("apigateway")
    api = apigw.create_rest_api(name=name)["id"]
    try:
        root = next(r["id"] for r in apigw.get_resources(restApiId=api)["items"] if r["path"] == "/")
        resource = apigw.create_resource(restApiId=api, parentId=root, pathPart="{proxy+}")["id"]
        apigw.put_method(restApiId=api, resourceId=resource, httpMethod="ANY", authorizationType="NONE")
        apigw.put_integration(
            restApiId=api,
            resourceId=resource,
            httpMethod="ANY",
            type="AWS_PROXY",
            integrationHttpMethod="POST",
            uri=f"arn:aws:apigateway:us-east-1:lambda:path/2015-03-31/functions/{arn}/invocations",
        )
        apigw.create_deployment(restApiId=api, stageName="v1")
        request = urllib.request.Request(
            f"{deployed.url}/restapis/{api}/v1/_user_request_/jobs/7", method="POST"
        )
        with urllib.request.urlopen(request, data=b"{}", timeout=30) as answer:
            assert answer.status == 201
            assert answer.headers["x-function"] == name
            assert json.loads(answer.read()) == {"path": "/jobs/7", "method": "POST"}
    finally:
        apigw.delete_rest_api(restApiId=api)


def test_an_eventbridge_rule_invokes_the_handler(
    deployed: DeployedLocalStack, function: Callable[..., str]
) -> None:
    name = function()
    lam, events = deployed.client("lambda"), deployed.client("events")
    arn = lam.get_function(FunctionName=name)["Configuration"]["FunctionArn"]
    lam.add_permission(
        FunctionName=name,
        StatementId="events",
        Action="lambda:InvokeFunction",
        Principal="events.amazonaws.com",
    )
    events.put_rule(Name=name, EventPattern=json.dumps({"source": [name]}))
    events.put_targets(Rule=name, Targets=[{"Id": "function", "Arn": arn}])
    try:
        events.put_events(Entries=[{"Source": name, "DetailType": "tick", "Detail": json.dumps({"n": 7})}])
        _wait_for(
            lambda: 'EVENT {"n": 7}' in _log_messages(deployed, name),
            30,
            "the rule's invoke in CloudWatch Logs",
        )
    finally:
        events.remove_targets(Rule=name, Ids=["function"])
        events.delete_rule(Name=name)


def test_localstacks_dynamodb_runs_offline(deployed: DeployedLocalStack) -> None:
    """start-deployed puts DynamoDB Local where LocalStack looks for it: nothing is downloaded."""
    ddb = deployed.client("dynamodb")
    table = f"executor-test-{uuid.uuid4().hex[:8]}"
    ddb.create_table(
        TableName=table,
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    try:
        ddb.put_item(TableName=table, Item={"pk": {"S": "a"}})
        taken = {
            "TableName": table,
            "Item": {"pk": {"S": "a"}},
            "ConditionExpression": "attribute_not_exists(pk)",
        }
        with pytest.raises(ddb.exceptions.TransactionCanceledException) as cancelled:
            ddb.transact_write_items(
                TransactItems=[{"Put": taken}, {"Put": {"TableName": table, "Item": {"pk": {"S": "b"}}}}]
            )
        reasons = [r["Code"] for r in cancelled.value.response["CancellationReasons"]]
        assert reasons == ["ConditionalCheckFailed", "None"]
    finally:
        ddb.delete_table(TableName=table)


def test_deleting_a_function_stops_its_runtime(deployed: DeployedLocalStack) -> None:
    name = deployed.create_function()
    deployed.invoke(name, {"n": 1})
    assert _runtime_pids(deployed.port, name)
    deployed.client("lambda").delete_function(FunctionName=name)
    _wait_for(lambda: not _runtime_pids(deployed.port, name), 15, "the runtime stopping with its function")


def test_runtimes_die_with_a_sigkilled_localstack() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    name = f"localstack-deployed-{port}"
    _script("start-deployed", port)
    pid = int((CACHE / "run" / f"{name}.pid").read_text())
    passed = False
    try:
        own = DeployedLocalStack(port)
        functions = [own.create_function(), own.create_function()]
        for f in functions:
            own.invoke(f, {"n": 1})
        runtimes = _runtime_pids(port)
        assert len(runtimes) == 2, runtimes
        os.kill(pid, signal.SIGKILL)
        _wait_for(lambda: not _runtime_pids(port), 10, f"runtimes {runtimes} dying with LocalStack")
        passed = True
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)  # whatever else it started (its own session)
        _script("stop-deployed", port)
        shutil.rmtree(CACHE / name, ignore_errors=True)
        if passed:  # a failure keeps its LocalStack's log
            (CACHE / "run" / f"{name}.log").unlink(missing_ok=True)
