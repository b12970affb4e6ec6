"""The AWS target caller on moto (SQS, SNS, EventBridge, Step Functions, STS), and with botocore's Stubber
for what moto cannot answer (a Lambda invoke without Docker, throttles, failed entries). Timeouts and
server errors come from real sockets on loopback, so botocore's own retry and timeout handling is what is
tested. The emulators show the same calls in tests/integration/test_aws_targets_localstack.py.
"""

from __future__ import annotations

import functools
import io
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import boto3
import botocore.session
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber
from moto import mock_aws

from duetime.adapters.aws.aws_target_caller import (
    NO_ROLE,
    ROLE_SESSION_SECONDS,
    Boto3AwsTargetCaller,
    execution_arn,
)
from duetime.domain.aws_targets import (
    AwsTarget,
    EventBridgeTarget,
    LambdaTarget,
    RunEnvelope,
    SnsTarget,
    SqsTarget,
    StepFunctionsTarget,
    execution_name,
)
from duetime.execution.outcomes import Verdict, judge
from duetime.ports import AwsRole, AwsTargetCall, TargetResponse

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's default account: a role of it sees the resources made here
ROLE = AwsRole(
    f"arn:aws:iam::{ACCOUNT}:role/duetime-target-jobs", "ext-team-a-0123", "duetime-team-a", "team-a"
)
FUNCTION_ARN = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:nightly"
PASS_MACHINE = json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})
# Targets for the calls whose answers are stubbed: nothing of them is looked up
SQS_TARGET = SqsTarget(type="sqs", queue_url=f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/q", message="m")
SNS_TARGET = SnsTarget(type="sns", topic_arn=f"arn:aws:sns:{REGION}:{ACCOUNT}:t", message="m")
SFN_TARGET = StepFunctionsTarget(
    type="stepfunctions", state_machine_arn=f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:m"
)
EVENTS_TARGET = EventBridgeTarget(type="eventbridge", detail_type="t")
LAMBDA_TARGET = LambdaTarget(type="lambda", function_arn=FUNCTION_ARN, payload={"report": "daily"})


def envelope(attempt: int = 1, run_id: str = "01JBX0RUN0000000000000000A") -> RunEnvelope:
    return RunEnvelope(
        run_id=run_id,
        job_id="01JBX0JOB0000000000000000A",
        attempt=attempt,
        scheduled_at=datetime(2026, 12, 1, 9, 0, tzinfo=UTC),
        fire_at=datetime(2026, 12, 1, 9, 0, 1, tzinfo=UTC),
    )


def aws_call(
    target: AwsTarget, role: AwsRole | None = ROLE, attempt: int = 1, timeout: float = 5
) -> AwsTargetCall:
    return AwsTargetCall(target, envelope(attempt), role, timeout)


@functools.cache
def _loader() -> Any:
    return botocore.session.get_session().get_component("data_loader")


def new_session(**kwargs: Any) -> boto3.session.Session:
    """A session of its own (its own event hooks) sharing the service models read once (a client of a new
    session reads them again: a third of a second)."""
    core = botocore.session.get_session()
    core.register_component("data_loader", _loader())
    return boto3.session.Session(botocore_session=core, region_name=REGION, **kwargs)


@pytest.fixture
def session() -> Iterator[boto3.session.Session]:
    """A moto-backed session: every client made from it talks to moto."""
    with mock_aws():
        yield new_session()


@pytest.fixture
def caller(session: boto3.session.Session) -> Boto3AwsTargetCaller:
    return Boto3AwsTargetCaller(session, default_region=REGION)


def recorded(session: boto3.session.Session, event: str) -> list[dict[str, Any]]:
    """The parameters of every call matching ``event`` (e.g. ``sqs.SendMessage``) made by clients that
    ``session`` makes from now on."""
    seen: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        seen.append(dict(params))

    session.events.register(f"before-parameter-build.{event}", record)
    return seen


def signing_keys(session: boto3.session.Session, service: str) -> list[str]:
    """The access key id that signed each request to ``service`` (from its Authorization header)."""
    keys: list[str] = []

    def record(request: Any, **_: Any) -> None:
        authorization = request.headers["Authorization"].decode()
        keys.append(authorization.split("Credential=")[1].split("/")[0])

    session.events.register(f"before-send.{service}", record)
    return keys


def worker_key(session: boto3.session.Session) -> str:
    credentials = session.get_credentials()
    assert credentials is not None
    return credentials.access_key


def sqs_queue(session: boto3.session.Session, name: str, **attributes: str) -> str:
    url: str = session.client("sqs").create_queue(QueueName=name, Attributes=cast(Any, attributes))[
        "QueueUrl"
    ]
    return url


def received(session: boto3.session.Session, queue_url: str) -> list[dict[str, Any]]:
    answer = session.client("sqs").receive_message(
        QueueUrl=queue_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    )
    return cast(list[dict[str, Any]], answer.get("Messages", []))


# --- SQS ------------------------------------------------------------------------------------------------


def test_sqs_message_is_sent_as_given_with_the_envelope_in_its_attributes(
    session: boto3.session.Session, caller: Boto3AwsTargetCaller
) -> None:
    queue = sqs_queue(session, "jobs")
    sent = recorded(session, "sqs.SendMessage")

    response = caller.call(aws_call(SqsTarget(type="sqs", queue_url=queue, message='{"go": 1}'), attempt=2))

    assert (response.status_code, response.error, response.permanent) == (200, None, False)
    [message] = received(session, queue)
    assert json.loads(response.body) == {"MessageId": message["MessageId"]}
    assert message["Body"] == '{"go": 1}'
    attributes = {name: value["StringValue"] for name, value in message["MessageAttributes"].items()}
    assert attributes == {
        "duetime-run-id": "01JBX0RUN0000000000000000A",
        "duetime-job-id": "01JBX0JOB0000000000000000A",
        "duetime-attempt": "2",
        "duetime-scheduled-at": "2026-12-01T09:00:00Z",
    }
    assert all(v["DataType"] == "String" for v in message["MessageAttributes"].values())
    assert "MessageGroupId" not in sent[0] and "MessageDeduplicationId" not in sent[0]


def test_sqs_fifo_message_uses_the_run_id_as_deduplication_id(
    session: boto3.session.Session, caller: Boto3AwsTargetCaller
) -> None:
    queue = sqs_queue(session, "jobs.fifo", FifoQueue="true")
    sent = recorded(session, "sqs.SendMessage")
    target = SqsTarget(type="sqs", queue_url=queue, message="m", message_group_id="tenant-7")

    first = caller.call(aws_call(target, attempt=1))
    repeat = caller.call(aws_call(target, attempt=2))  # a retry of the same run, within 5 minutes

    assert first.status_code == repeat.status_code == 200
    assert [(p["MessageGroupId"], p["MessageDeduplicationId"]) for p in sent] == [
        ("tenant-7", "01JBX0RUN0000000000000000A")
    ] * 2
    [message] = received(session, queue)  # the repeat was dropped by SQS's deduplication
    assert message["MessageAttributes"]["duetime-attempt"]["StringValue"] == "1"


def test_sqs_standard_queue_with_a_group_sends_it_for_fair_queues(
    session: boto3.session.Session, caller: Boto3AwsTargetCaller
) -> None:
    queue = sqs_queue(session, "fair")
    sent = recorded(session, "sqs.SendMessage")

    response = caller.call(
        aws_call(SqsTarget(type="sqs", queue_url=queue, message="m", message_group_id="t1"))
    )

    assert response.status_code == 200
    assert sent[0]["MessageGroupId"] == "t1"
    assert "MessageDeduplicationId" not in sent[0]  # only FIFO queues take one


def test_a_missing_queue_is_the_services_4xx(caller: Boto3AwsTargetCaller) -> None:
    missing = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/nowhere"
    response = caller.call(aws_call(SqsTarget(type="sqs", queue_url=missing, message="m")))
    assert response.status_code == 400
    assert response.error is not None and "NonExistentQueue" in response.error
    assert judge(response) is Verdict.PERMANENT


# --- SNS ------------------------------------------------------------------------------------------------


def test_sns_message_reaches_a_raw_subscriber_with_the_envelope_attributes(
    session: boto3.session.Session, caller: Boto3AwsTargetCaller
) -> None:
    sns = session.client("sns")
    topic = sns.create_topic(Name="runs")["TopicArn"]
    queue = sqs_queue(session, "runs-subscriber")
    queue_arn = session.client("sqs").get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])
    sns.subscribe(
        TopicArn=topic,
        Protocol="sqs",
        Endpoint=queue_arn["Attributes"]["QueueArn"],
        Attributes={"RawMessageDelivery": "true"},
    )

    response = caller.call(aws_call(SnsTarget(type="sns", topic_arn=topic, message="hello")))

    assert response.status_code == 200
    [message] = received(session, queue)
    assert message["Body"] == "hello"
    assert message["MessageAttributes"]["duetime-run-id"]["StringValue"] == "01JBX0RUN0000000000000000A"
    assert set(json.loads(response.body)) == {"MessageId"}


def test_sns_fifo_topic_gets_the_group_and_the_run_id_as_deduplication_id(
    session: boto3.session.Session, caller: Boto3AwsTargetCaller
) -> None:
    topic = session.client("sns").create_topic(
        Name="runs.fifo", Attributes={"FifoTopic": "true", "ContentBasedDeduplication": "false"}
    )["TopicArn"]
    sent = recorded(session, "sns.Publish")

    response = caller.call(
        aws_call(SnsTarget(type="sns", topic_arn=topic, message="m", message_group_id="g"))
    )

    assert response.status_code == 200, response
    assert (sent[0]["MessageGroupId"], sent[0]["MessageDeduplicationId"]) == (
        "g",
        "01JBX0RUN0000000000000000A",
    )


# --- EventBridge ----------------------------------------------------------------------------------------


def test_eventbridge_detail_gets_the_envelope(
    session: boto3.session.Session, caller: Boto3AwsTargetCaller
) -> None:
    """What is put; delivery through a rule is shown on LocalStack (moto's rules need jsonpath_ng, which
    is not installed here)."""
    session.client("events").create_event_bus(Name="jobs")
    put = recorded(session, "events.PutEvents")
    target = EventBridgeTarget(
        type="eventbridge",
        event_bus_name="jobs",
        source="billing",
        detail_type="Invoice due",
        detail={"n": 3},
    )

    response = caller.call(aws_call(target))

    assert response.status_code == 200, response
    assert set(json.loads(response.body)) == {"EventId"}
    [entry] = put[0]["Entries"]
    assert (entry["EventBusName"], entry["Source"], entry["DetailType"]) == ("jobs", "billing", "Invoice due")
    assert json.loads(entry["Detail"]) == {"n": 3, "duetime": envelope().as_json()}


class FakeSession:
    """Stands in for a boto3 session: every client it makes is the one given for the service, with a
    botocore Stubber on it, and what each was made with is kept (``made``)."""

    def __init__(self) -> None:
        self.clients: dict[str, Any] = {}
        self.made: list[tuple[str, dict[str, Any]]] = []

    def stub(self, service: str) -> Stubber:
        client = worker_session().client(service)  # type: ignore[call-overload]
        self.clients[service] = client
        stubber = Stubber(client)
        stubber.activate()
        return stubber

    def client(self, service: str, **kwargs: Any) -> Any:
        self.made.append((service, kwargs))
        return self.clients[service]

    def caller(self, **kwargs: Any) -> Boto3AwsTargetCaller:
        return Boto3AwsTargetCaller(cast(boto3.session.Session, self), default_region=REGION, **kwargs)


def stubbed_assume_role(
    fake: FakeSession, expiration: datetime | None = None, key: str = "ASIAROLEKEY00001"
) -> None:
    fake.stub("sts").add_response(
        "assume_role",
        {
            "Credentials": {
                "AccessKeyId": key,
                "SecretAccessKey": "role-secret",
                "SessionToken": "role-token",
                "Expiration": expiration or datetime.now(UTC) + timedelta(hours=1),
            }
        },
    )


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("ThrottlingException", 429),
        ("InternalFailure", 500),
        ("InternalException", 500),
        ("AccessDeniedException", 400),
    ],
)
def test_eventbridge_failed_entry_is_told_by_its_code(code: str, status: int) -> None:
    fake = FakeSession()
    stubbed_assume_role(fake)
    fake.stub("events").add_response(
        "put_events", {"FailedEntryCount": 1, "Entries": [{"ErrorCode": code, "ErrorMessage": "no luck"}]}
    )

    response = fake.caller().call(aws_call(EventBridgeTarget(type="eventbridge", detail_type="t")))

    assert (response.status_code, response.error, response.body) == (status, f"{code}: no luck", "")


# --- Step Functions -------------------------------------------------------------------------------------


@pytest.fixture
def machine(session: boto3.session.Session) -> str:
    arn: str = session.client("stepfunctions").create_state_machine(
        name="nightly", definition=PASS_MACHINE, roleArn=f"arn:aws:iam::{ACCOUNT}:role/sfn"
    )["stateMachineArn"]
    return arn


def test_stepfunctions_execution_is_named_for_the_attempt_and_gets_the_envelope(
    session: boto3.session.Session, caller: Boto3AwsTargetCaller, machine: str
) -> None:
    target = StepFunctionsTarget(type="stepfunctions", state_machine_arn=machine, input={"day": "mon"})

    response = caller.call(aws_call(target, attempt=3))

    assert response.status_code == 200, response
    started = json.loads(response.body)
    name = execution_name("01JBX0RUN0000000000000000A", 3)
    assert started["executionArn"] == execution_arn(machine, name)
    assert datetime.fromisoformat(started["startDate"]).tzinfo is not None
    execution = session.client("stepfunctions").describe_execution(executionArn=started["executionArn"])
    assert json.loads(execution["input"]) == {"duetime": envelope(3).as_json(), "input": {"day": "mon"}}


def test_stepfunctions_execution_already_exists_is_a_start(
    session: boto3.session.Session, caller: Boto3AwsTargetCaller, machine: str
) -> None:
    sfn = session.client("stepfunctions")
    target = StepFunctionsTarget(type="stepfunctions", state_machine_arn=machine)
    first = json.loads(caller.call(aws_call(target)).body)
    sfn.stop_execution(executionArn=first["executionArn"])  # closed: a second start of its name is refused

    repeat = caller.call(aws_call(target))
    second_attempt = caller.call(aws_call(target, attempt=2))

    assert repeat.status_code == 200, repeat
    assert json.loads(repeat.body) == {"executionArn": first["executionArn"], "already_started": True}
    assert judge(repeat) is Verdict.SUCCESS
    assert second_attempt.status_code == 200
    names = sorted(e["name"] for e in sfn.list_executions(stateMachineArn=machine)["executions"])
    assert names == sorted(execution_name("01JBX0RUN0000000000000000A", a) for a in (1, 2))


def test_an_executions_arn_names_the_machine_not_its_version_or_alias() -> None:
    machine = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:nightly"
    expected = f"arn:aws:states:{REGION}:{ACCOUNT}:execution:nightly:dt-x-a1"
    assert execution_arn(machine, "dt-x-a1") == expected
    assert execution_arn(machine + ":prod", "dt-x-a1") == expected


# --- Lambda (Stubber: moto runs functions in Docker) ----------------------------------------------------


def streamed(data: bytes) -> StreamingBody:
    return StreamingBody(io.BytesIO(data), len(data))


def test_lambda_is_invoked_synchronously_with_the_envelope_and_payload() -> None:
    fake = FakeSession()
    stubbed_assume_role(fake)
    stubber = fake.stub("lambda")
    result = json.dumps({"ok": True, "pad": "x" * 5000}).encode()
    stubber.add_response("invoke", {"StatusCode": 200, "Payload": streamed(result)})
    sent: list[dict[str, Any]] = []
    fake.clients["lambda"].meta.events.register(
        "before-parameter-build.lambda.Invoke", lambda params, **_: sent.append(params)
    )

    response = fake.caller().call(aws_call(LAMBDA_TARGET))

    assert (response.status_code, response.error) == (200, None)
    assert response.body == result.decode()[:1024]
    assert (sent[0]["FunctionName"], sent[0]["InvocationType"]) == (FUNCTION_ARN, "RequestResponse")
    assert json.loads(sent[0]["Payload"]) == {"duetime": envelope().as_json(), "payload": {"report": "daily"}}


def test_lambda_function_error_is_a_502() -> None:
    fake = FakeSession()
    stubbed_assume_role(fake)
    error = b'{"errorType": "ValueError", "errorMessage": "bad day"}'
    fake.stub("lambda").add_response(
        "invoke", {"StatusCode": 200, "FunctionError": "Unhandled", "Payload": streamed(error)}
    )

    response = fake.caller().call(aws_call(LAMBDA_TARGET))

    assert (response.status_code, response.error) == (502, "function error: Unhandled")
    assert json.loads(response.body)["errorMessage"] == "bad day"
    assert judge(response) is Verdict.RETRYABLE


@pytest.mark.parametrize(
    ("code", "http_status", "status", "verdict"),
    [
        ("ResourceNotFoundException", 404, 404, Verdict.PERMANENT),
        ("InvalidRequestContentException", 400, 400, Verdict.PERMANENT),
        ("AccessDeniedException", 403, 403, Verdict.PERMANENT),
        ("ServiceException", 500, 500, Verdict.RETRYABLE),
        ("TooManyRequestsException", 429, 429, Verdict.RETRYABLE),
    ],
)
def test_lambda_refusals_are_their_http_status(
    code: str, http_status: int, status: int, verdict: Verdict
) -> None:
    fake = FakeSession()
    stubbed_assume_role(fake)
    fake.stub("lambda").add_client_error("invoke", code, "told so", http_status_code=http_status)

    response = fake.caller().call(aws_call(LAMBDA_TARGET))

    assert (response.status_code, response.error, response.body) == (status, f"{code}: told so", "")
    assert judge(response) is verdict


@pytest.mark.parametrize(
    ("service", "operation", "target", "code", "http_status"),
    [
        ("sqs", "send_message", SQS_TARGET, "RequestThrottled", 403),
        ("sqs", "send_message", SQS_TARGET, "KmsThrottled", 400),
        ("sns", "publish", SNS_TARGET, "Throttled", 400),
        ("stepfunctions", "start_execution", SFN_TARGET, "ExecutionLimitExceeded", 400),
        ("events", "put_events", EVENTS_TARGET, "ThrottlingException", 400),
        ("lambda", "invoke", LAMBDA_TARGET, "TooManyRequestsException", 429),
    ],
)
def test_throttle_is_429_whatever_the_http_status(
    service: str, operation: str, target: AwsTarget, code: str, http_status: int
) -> None:
    fake = FakeSession()
    stubbed_assume_role(fake)
    fake.stub(service).add_client_error(operation, code, "slow down", http_status_code=http_status)

    response = fake.caller().call(aws_call(target))

    assert (response.status_code, response.error) == (429, f"{code}: slow down")
    assert judge(response) is Verdict.RETRYABLE


def test_a_long_error_message_is_cut() -> None:
    fake = FakeSession()
    stubbed_assume_role(fake)
    fake.stub("lambda").add_client_error(
        "invoke", "ResourceNotFoundException", "y" * 5000, http_status_code=404
    )

    response = fake.caller().call(aws_call(LAMBDA_TARGET))

    assert response.error == "ResourceNotFoundException: " + "y" * 300


# --- roles and credentials ------------------------------------------------------------------------------


def test_assumes_the_teams_role_with_its_external_id_and_the_session_carries_the_team_tag(
    session: boto3.session.Session, caller: Boto3AwsTargetCaller
) -> None:
    queue = sqs_queue(session, "jobs")
    assumed = recorded(session, "sts.AssumeRole")
    keys = signing_keys(session, "sqs")

    response = caller.call(aws_call(SqsTarget(type="sqs", queue_url=queue, message="m")))

    assert response.status_code == 200
    assert assumed == [
        {
            "RoleArn": ROLE.role_arn,
            "ExternalId": "ext-team-a-0123",
            "RoleSessionName": "duetime-team-a",
            "DurationSeconds": ROLE_SESSION_SECONDS,
            "Tags": [{"Key": "duetime:team", "Value": "team-a"}],
            "TransitiveTagKeys": ["duetime:team"],
        }
    ]
    assert keys and keys[0] != worker_key(session)  # signed with the role's credentials, not the worker's
    assert keys[0] == caller._credentials[ROLE].access_key_id


def test_no_role_is_refused_without_calling_when_a_role_is_required() -> None:
    fake = FakeSession()  # no clients: making one would fail the test

    response = fake.caller().call(aws_call(LAMBDA_TARGET, role=None))

    assert response == TargetResponse(None, "", NO_ROLE, response.duration_ms, permanent=True)
    assert judge(response) is Verdict.PERMANENT
    assert fake.made == []


def test_without_a_required_role_the_workers_own_credentials_are_used(session: boto3.session.Session) -> None:
    queue = sqs_queue(session, "local")
    assumed = recorded(session, "sts.AssumeRole")
    keys = signing_keys(session, "sqs")
    caller = Boto3AwsTargetCaller(session, default_region=REGION, require_role=False)

    response = caller.call(aws_call(SqsTarget(type="sqs", queue_url=queue, message="m"), role=None))

    assert response.status_code == 200
    assert assumed == []
    assert keys == [worker_key(session)]


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


def test_credentials_are_cached_until_five_minutes_before_expiry(session: boto3.session.Session) -> None:
    queue = sqs_queue(session, "jobs")
    assumed = recorded(session, "sts.AssumeRole")
    keys = signing_keys(session, "sqs")
    clock = Clock()
    caller = Boto3AwsTargetCaller(session, default_region=REGION, now=clock)
    target = SqsTarget(type="sqs", queue_url=queue, message="m")
    expiration = clock.now + timedelta(seconds=ROLE_SESSION_SECONDS)  # moto's: an hour from the real now

    caller.call(aws_call(target))
    clock.now = expiration - timedelta(minutes=5, seconds=5)
    caller.call(aws_call(target))
    assert len(assumed) == 1
    assert keys[0] == keys[1]

    clock.now = expiration - timedelta(minutes=4, seconds=55)
    caller.call(aws_call(target))
    assert len(assumed) == 2
    assert keys[2] != keys[1]  # the new credentials sign (a new client)
    assert len([k for k in caller._clients if k[0] == "sqs"]) == 1  # the old client is not kept


def test_other_roles_and_external_ids_are_assumed_separately(
    session: boto3.session.Session, caller: Boto3AwsTargetCaller
) -> None:
    queue = sqs_queue(session, "jobs")
    assumed = recorded(session, "sts.AssumeRole")
    target = SqsTarget(type="sqs", queue_url=queue, message="m")
    other_team = AwsRole(ROLE.role_arn, "ext-team-b-4567", "duetime-team-b", "team-b")

    for role in (ROLE, other_team, ROLE, other_team):
        assert caller.call(aws_call(target, role=role)).status_code == 200

    assert [(a["ExternalId"], a["RoleSessionName"]) for a in assumed] == [
        ("ext-team-a-0123", "duetime-team-a"),
        ("ext-team-b-4567", "duetime-team-b"),
    ]


def test_concurrent_calls_assume_a_role_once_and_share_a_client(session: boto3.session.Session) -> None:
    queue = sqs_queue(session, "jobs")
    assumed = recorded(session, "sts.AssumeRole")
    made: list[str] = []
    session.events.register("creating-client-class.sqs", lambda **_: made.append("sqs"))
    caller = Boto3AwsTargetCaller(session, default_region=REGION)
    target = SqsTarget(type="sqs", queue_url=queue, message="m")

    with ThreadPoolExecutor(16) as pool:
        responses = list(pool.map(lambda _: caller.call(aws_call(target)), range(48)))

    assert {r.status_code for r in responses} == {200}
    assert len(assumed) == 1
    assert made == ["sqs"]
    attributes = session.client("sqs").get_queue_attributes(
        QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages"]
    )
    assert attributes["Attributes"]["ApproximateNumberOfMessages"] == "48"


def test_assume_role_refusal_is_told_as_the_call_answer() -> None:
    fake = FakeSession()
    fake.stub("sts").add_client_error("assume_role", "AccessDenied", "not trusted", http_status_code=403)
    fake.stub("lambda")  # no response queued: invoking would fail the test

    response = fake.caller().call(aws_call(LAMBDA_TARGET))

    assert (response.status_code, response.error) == (403, "assume role: AccessDenied: not trusted")
    assert judge(response) is Verdict.PERMANENT


def test_assume_role_throttle_is_429() -> None:
    fake = FakeSession()
    fake.stub("sts").add_client_error("assume_role", "Throttling", "rate exceeded", http_status_code=400)

    response = fake.caller().call(aws_call(LAMBDA_TARGET))

    assert (response.status_code, response.error) == (429, "assume role: Throttling: rate exceeded")


def test_the_client_is_in_the_resources_region() -> None:
    fake = FakeSession()
    stubbed_assume_role(fake)
    fake.stub("sns").add_response("publish", {"MessageId": "m-1"})
    topic = f"arn:aws:sns:eu-west-1:{ACCOUNT}:alerts"

    response = fake.caller().call(aws_call(SnsTarget(type="sns", topic_arn=topic, message="m")))

    assert response.status_code == 200
    regions = {service: kwargs["region_name"] for service, kwargs in fake.made}
    assert regions == {"sts": REGION, "sns": "eu-west-1"}  # STS: the worker's own region
    sns_kwargs = fake.made[1][1]
    assert (sns_kwargs["aws_access_key_id"], sns_kwargs["aws_session_token"]) == (
        "ASIAROLEKEY00001",
        "role-token",
    )


@pytest.mark.parametrize(("timeout", "connect", "sts"), [(2.5, 2.5, 2.5), (60, 5, 5)])
def test_clients_make_one_attempt_within_the_timeout(timeout: float, connect: float, sts: float) -> None:
    fake = FakeSession()
    stubbed_assume_role(fake)
    fake.stub("sns").add_response("publish", {"MessageId": "m-1"})

    fake.caller().call(aws_call(SNS_TARGET, timeout=timeout))

    [(_, sts_kwargs), (_, sns_kwargs)] = fake.made
    config = sns_kwargs["config"]
    assert config.retries == {"total_max_attempts": 1, "mode": "standard"}
    assert (config.connect_timeout, config.read_timeout) == (connect, timeout)
    assert (sts_kwargs["config"].connect_timeout, sts_kwargs["config"].read_timeout) == (sts, sts)
    assert sts_kwargs["config"].retries == {"total_max_attempts": 1, "mode": "standard"}


def test_a_client_is_kept_per_timeout(session: boto3.session.Session, caller: Boto3AwsTargetCaller) -> None:
    queue = sqs_queue(session, "jobs")
    made: list[str] = []
    session.events.register("creating-client-class.sqs", lambda **_: made.append("sqs"))
    target = SqsTarget(type="sqs", queue_url=queue, message="m")

    for timeout in (5, 5, 30, 5, 30):
        assert caller.call(aws_call(target, timeout=timeout)).status_code == 200

    assert made == ["sqs", "sqs"]


# --- the network: timeouts, connection errors, no retries -----------------------------------------------


@contextmanager
def silent_server() -> Iterator[tuple[str, list[socket.socket]]]:
    """A loopback port that takes connections and never answers; the accepted sockets are kept."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", accepted
    finally:
        listener.close()
        for s in accepted:
            s.close()


@contextmanager
def answering_server(status: int, body: dict[str, Any]) -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP server answering every POST with ``status`` and ``body`` (AWS's JSON protocol)."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(self.headers.get("X-Amz-Target", ""))
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/x-amz-json-1.0")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def worker_session() -> boto3.session.Session:
    return new_session(aws_access_key_id="worker", aws_secret_access_key="secret")


def local_caller(endpoint: str, **kwargs: Any) -> Boto3AwsTargetCaller:
    return Boto3AwsTargetCaller(
        worker_session(), default_region=REGION, require_role=False, endpoint_urls={"sqs": endpoint}, **kwargs
    )


def test_timeout_is_reported_without_status() -> None:
    with silent_server() as (endpoint, accepted):
        response = local_caller(endpoint).call(aws_call(SQS_TARGET, role=None, timeout=0.4))

    assert (response.status_code, response.error, response.permanent) == (None, "timeout after 0.4s", False)
    assert 400 <= response.duration_ms < 3000
    assert len(accepted) == 1  # not retried inside the call
    assert judge(response) is Verdict.RETRYABLE


def test_a_refused_connection_is_a_connection_error() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{closed.getsockname()[1]}"  # bound, not listening: refused

        response = local_caller(endpoint).call(aws_call(SQS_TARGET, role=None, timeout=2))

    assert (response.status_code, response.error) == (None, "connection error: EndpointConnectionError")
    assert judge(response) is Verdict.RETRYABLE


def test_a_service_error_is_its_status_and_is_not_retried_inside_the_call() -> None:
    error = {"__type": "com.amazonaws.sqs#ServiceUnavailable", "message": "try later"}
    with answering_server(503, error) as (endpoint, seen):
        response = local_caller(endpoint).call(aws_call(SQS_TARGET, role=None))

    assert (response.status_code, response.error) == (503, "ServiceUnavailable: try later")
    assert seen == ["AmazonSQS.SendMessage"]  # botocore would retry a 503 twice by default


def test_missing_credentials_are_permanent(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    for name in [n for n in os.environ if n.startswith(("AWS_", "BOTO_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with silent_server() as (endpoint, accepted):
        caller = Boto3AwsTargetCaller(
            boto3.session.Session(region_name=REGION), require_role=False, endpoint_urls={"sqs": endpoint}
        )
        response = caller.call(aws_call(SQS_TARGET, role=None, timeout=1))

    assert (response.status_code, response.permanent) == (None, True)
    assert response.error == "cannot call AWS: NoCredentialsError: Unable to locate credentials"
    assert accepted == []


def test_a_request_botocore_refuses_is_permanent() -> None:
    no_message = SqsTarget.model_construct(
        type="sqs", queue_url=SQS_TARGET.queue_url, message=cast(str, None)
    )
    fake = FakeSession()
    stubbed_assume_role(fake)
    fake.stub("sqs").add_response("send_message", {"MessageId": "m"})  # would answer, were it sent

    response = fake.caller().call(aws_call(no_message))

    assert (response.status_code, response.permanent) == (None, True)
    assert response.error is not None
    assert response.error.startswith("invalid request: Parameter validation failed:\nInvalid type for")


def test_duration_covers_assuming_the_role() -> None:
    fake = FakeSession()
    stubbed_assume_role(fake)
    fake.stub("sns").add_response("publish", {"MessageId": "m-1"})
    fake.clients["sts"].meta.events.register(
        "before-parameter-build.sts.AssumeRole", lambda **_: time.sleep(0.3)
    )

    response = fake.caller().call(aws_call(SNS_TARGET))

    assert response.status_code == 200
    assert response.duration_ms >= 300


def test_unexpected_answers_do_not_raise() -> None:
    fake = FakeSession()
    stubbed_assume_role(fake)
    fake.stub("events").add_response("put_events", {"FailedEntryCount": 0, "Entries": []})

    response = fake.caller().call(aws_call(EventBridgeTarget(type="eventbridge", detail_type="t")))

    assert (response.status_code, response.permanent) == (None, False)
    assert response.error is not None and response.error.startswith("IndexError")
