"""AWS targets called on LocalStack: what each service does with duetime's calls.

SQS, SNS, EventBridge, Step Functions and STS run on the tests' LocalStack (port 4566), reached through the
variables boto3 reads (``AWS_ENDPOINT_URL_SQS``, ``_SNS``, ``_EVENTBRIDGE``, ``_SFN``, ``_STS``); a Lambda
function runs on the deployed-stack LocalStack (port 4610, real handlers as processes: see
test_lambda_executor.py), reached through ``endpoint_urls``. Every resource has a name of its own, so these
tests can run beside others.

What LocalStack cannot show: it does not enforce IAM. An AssumeRole succeeds whatever the role's trust
policy says (a wrong external id, a worker not named in it), and the assumed credentials may do anything,
in any account (a role of another account sends to this account's queue with no queue policy). What AWS
refuses is told by the unit tests (botocore's Stubber) and, for real, by AWS. (An event for a bus that
does not exist is taken, with an event id, by LocalStack and by AWS alike: aws/aws-cli#9186.)
"""

from __future__ import annotations

import io
import json
import textwrap
import time
import uuid
import zipfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest

from duetime.adapters.aws.aws_target_caller import Boto3AwsTargetCaller
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

from .conftest import SQS_URL
from .test_lambda_executor import ON_THE_DEPLOYED_PORT, DeployedLocalStack, deployed  # noqa: F401  (a module fixture)
from .test_lambda_executor import ROLE as LAMBDA_ROLE

pytestmark = pytest.mark.integration

REGION = "us-east-1"
ACCOUNT = "000000000000"  # LocalStack's, for the access key "test" and for roles assumed in it
PASS_MACHINE = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}})


@pytest.fixture
def endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    """The services' endpoints as ``duetime local`` names them: boto3's own variables, by service id."""
    for service in ("SQS", "SNS", "EVENTBRIDGE", "SFN", "STS"):
        monkeypatch.setenv(f"AWS_ENDPOINT_URL_{service}", SQS_URL)


@pytest.fixture
def caller(endpoints: None) -> Boto3AwsTargetCaller:
    """As on a local stack: a call without a role uses the worker's own credentials."""
    return Boto3AwsTargetCaller(default_region=REGION, require_role=False)


class LocalStack:
    """Clients of the tests' LocalStack, names of this test's own, and the deletions to run after it."""

    def __init__(self) -> None:
        self.prefix = f"dt{uuid.uuid4().hex[:10]}"
        self.cleanups: list[Callable[[], Any]] = []

    def client(self, service: str) -> Any:
        session = boto3.session.Session()
        return session.client(service, endpoint_url=SQS_URL, region_name=REGION)  # type: ignore[call-overload]

    def queue(self, suffix: str = "", **attributes: str) -> tuple[str, str]:
        """A new queue's URL and ARN."""
        sqs = self.client("sqs")
        url = sqs.create_queue(QueueName=f"{self.prefix}{suffix}", Attributes=attributes)["QueueUrl"]
        self.cleanups.append(lambda: sqs.delete_queue(QueueUrl=url))
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        return url, arn

    def messages(self, queue_url: str, expected: int, wait: float = 10.0) -> list[dict[str, Any]]:
        """The messages on the queue once ``expected`` have arrived (or ``wait`` has passed), and any
        more that arrive within 1.5 s after."""
        sqs, taken = self.client("sqs"), []
        deadline = time.monotonic() + wait
        quiet_until = None
        while True:
            batch = sqs.receive_message(
                QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1, MessageAttributeNames=["All"]
            ).get("Messages", [])
            for message in batch:
                taken.append(message)
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
            now = time.monotonic()
            if len(taken) >= expected and quiet_until is None:
                quiet_until = now + 1.5
            if (quiet_until is not None and now >= quiet_until) or (quiet_until is None and now >= deadline):
                return taken


@pytest.fixture
def aws() -> Iterator[LocalStack]:
    stack = LocalStack()
    yield stack
    for cleanup in reversed(stack.cleanups):
        cleanup()


def envelope(attempt: int = 1, job_id: str | None = None) -> RunEnvelope:
    job_id = job_id or f"job-{uuid.uuid4().hex[:12]}"
    return RunEnvelope(
        run_id=f"{job_id}@2026-12-01T09:00:00Z",
        job_id=job_id,
        attempt=attempt,
        scheduled_at=datetime(2026, 12, 1, 9, 0, tzinfo=UTC),
        fire_at=datetime(2026, 12, 1, 9, 0, 2, tzinfo=UTC),
    )


def call(
    caller: Boto3AwsTargetCaller, target: AwsTarget, run: RunEnvelope, role: AwsRole | None = None
) -> TargetResponse:
    return caller.call(AwsTargetCall(target, run, role, timeout_seconds=10))


def attributes_of(message: dict[str, Any]) -> dict[str, str]:
    return {name: value["StringValue"] for name, value in message.get("MessageAttributes", {}).items()}


def test_an_sqs_message_arrives_with_the_envelope_attributes(
    caller: Boto3AwsTargetCaller, aws: LocalStack
) -> None:
    queue_url, _ = aws.queue()
    run = envelope(attempt=2)

    response = call(caller, SqsTarget(type="sqs", queue_url=queue_url, message="nightly report"), run)

    assert (response.status_code, response.error) == (200, None)
    [message] = aws.messages(queue_url, 1)
    assert json.loads(response.body) == {"MessageId": message["MessageId"]}
    assert message["Body"] == "nightly report"
    assert attributes_of(message) == {
        "duetime-run-id": run.run_id,
        "duetime-job-id": run.job_id,
        "duetime-attempt": "2",
        "duetime-scheduled-at": "2026-12-01T09:00:00Z",
    }


def test_a_standard_queue_takes_a_message_group_id(caller: Boto3AwsTargetCaller, aws: LocalStack) -> None:
    """SQS fair queues: a standard queue takes a message group id (the tenant), with no deduplication."""
    queue_url, _ = aws.queue()
    target = SqsTarget(type="sqs", queue_url=queue_url, message="fair", message_group_id="team-a")
    job = f"job-{uuid.uuid4().hex[:12]}"

    responses = [call(caller, target, envelope(attempt, job)) for attempt in (1, 2)]

    assert [r.status_code for r in responses] == [200, 200], responses
    assert len(aws.messages(queue_url, 2)) == 2


def test_a_fifo_queue_takes_one_message_for_two_attempts_of_a_run(
    caller: Boto3AwsTargetCaller, aws: LocalStack
) -> None:
    queue_url, _ = aws.queue(".fifo", FifoQueue="true")
    target = SqsTarget(type="sqs", queue_url=queue_url, message="once", message_group_id="team-a")
    job = f"job-{uuid.uuid4().hex[:12]}"

    first = call(caller, target, envelope(1, job))
    second = call(caller, target, envelope(2, job))  # the retry of a call whose answer was lost

    assert first.status_code == second.status_code == 200
    messages = aws.messages(queue_url, 1)
    assert [attributes_of(m)["duetime-attempt"] for m in messages] == ["1"]
    other_run = call(caller, target, envelope(1))  # another run of the group is not a duplicate
    assert other_run.status_code == 200
    assert len(aws.messages(queue_url, 1)) == 1


def test_an_sns_message_reaches_a_raw_sqs_subscriber_with_the_envelope_attributes(
    caller: Boto3AwsTargetCaller, aws: LocalStack
) -> None:
    sns = aws.client("sns")
    topic = sns.create_topic(Name=aws.prefix)["TopicArn"]
    aws.cleanups.append(lambda: sns.delete_topic(TopicArn=topic))
    queue_url, queue_arn = aws.queue("-inbox")
    sns.subscribe(
        TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"}
    )
    run = envelope()

    response = call(caller, SnsTarget(type="sns", topic_arn=topic, message='{"kind": "digest"}'), run)

    assert response.status_code == 200, response
    assert set(json.loads(response.body)) == {"MessageId"}
    [message] = aws.messages(queue_url, 1)
    assert message["Body"] == '{"kind": "digest"}'
    assert attributes_of(message) == run.message_attributes()


def test_an_event_on_a_custom_bus_reaches_a_rules_sqs_target_with_the_envelope_in_its_detail(
    caller: Boto3AwsTargetCaller, aws: LocalStack
) -> None:
    events = aws.client("events")
    bus = aws.prefix
    events.create_event_bus(Name=bus)
    aws.cleanups.append(lambda: events.delete_event_bus(Name=bus))
    queue_url, queue_arn = aws.queue("-events")
    pattern = {"source": ["billing"], "detail-type": ["Invoice due"]}
    events.put_rule(Name="to-queue", EventBusName=bus, EventPattern=json.dumps(pattern))
    events.put_targets(Rule="to-queue", EventBusName=bus, Targets=[{"Id": "queue", "Arn": queue_arn}])
    aws.cleanups.append(lambda: events.delete_rule(Name="to-queue", EventBusName=bus))
    aws.cleanups.append(lambda: events.remove_targets(Rule="to-queue", EventBusName=bus, Ids=["queue"]))
    target = EventBridgeTarget(
        type="eventbridge",
        event_bus_name=bus,
        source="billing",
        detail_type="Invoice due",
        detail={"invoice": 42},
    )
    run = envelope()

    response = call(caller, target, run)

    assert response.status_code == 200, response
    [message] = aws.messages(queue_url, 1)
    event = json.loads(message["Body"])
    assert json.loads(response.body) == {"EventId": event["id"]}
    assert (event["source"], event["detail-type"]) == ("billing", "Invoice due")
    assert event["detail"] == {"invoice": 42, "duetime": run.as_json()}


@pytest.fixture
def state_machine(aws: LocalStack) -> str:
    sfn = aws.client("stepfunctions")
    try:
        arn: str = sfn.create_state_machine(
            name=aws.prefix, definition=PASS_MACHINE, roleArn=f"arn:aws:iam::{ACCOUNT}:role/any"
        )["stateMachineArn"]
    except sfn.exceptions.ClientError as exc:  # a LocalStack started without stepfunctions
        pytest.fail(f"Step Functions on LocalStack: {exc} (scripts/emulators.sh lists it)", pytrace=False)
    aws.cleanups.append(lambda: sfn.delete_state_machine(stateMachineArn=arn))
    return arn


def test_a_step_functions_attempt_starts_one_execution_and_the_next_attempt_another(
    caller: Boto3AwsTargetCaller, aws: LocalStack, state_machine: str
) -> None:
    sfn = aws.client("stepfunctions")
    target = StepFunctionsTarget(type="stepfunctions", state_machine_arn=state_machine, input=[1, "two"])
    job = f"job-{uuid.uuid4().hex[:12]}"

    first = call(caller, target, envelope(1, job))
    assert first.status_code == 200, first
    started = json.loads(first.body)
    assert started["executionArn"].endswith(":" + execution_name(f"{job}@2026-12-01T09:00:00Z", 1))

    def finished() -> bool:
        return bool(sfn.describe_execution(executionArn=started["executionArn"])["status"] != "RUNNING")

    deadline = time.monotonic() + 10
    while not finished():
        assert time.monotonic() < deadline, "the Pass execution did not finish"
        time.sleep(0.1)
    repeat = call(caller, target, envelope(1, job))  # the same attempt again: its execution is there
    assert repeat.status_code == 200, repeat
    assert json.loads(repeat.body) == {"executionArn": started["executionArn"], "already_started": True}
    assert len(sfn.list_executions(stateMachineArn=state_machine)["executions"]) == 1

    second = call(caller, target, envelope(2, job))
    assert second.status_code == 200, second
    executions = sfn.list_executions(stateMachineArn=state_machine)["executions"]
    assert len(executions) == 2
    execution = sfn.describe_execution(executionArn=json.loads(second.body)["executionArn"])
    assert json.loads(execution["input"]) == {"duetime": envelope(2, job).as_json(), "input": [1, "two"]}


def test_a_teams_role_is_assumed_with_its_external_id_and_its_session_name(
    caller: Boto3AwsTargetCaller, aws: LocalStack
) -> None:
    iam = aws.client("iam")
    role_name = f"duetime-target-{aws.prefix}"
    trust = {  # what a team's role trusts on AWS; LocalStack does not check it (the module's docstring)
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:role/duetime-worker"},
                "Action": "sts:AssumeRole",
                "Condition": {"StringEquals": {"sts:ExternalId": "ext-team-a-0123"}},
            }
        ],
    }
    role_arn = iam.create_role(RoleName=role_name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    aws.cleanups.append(lambda: iam.delete_role(RoleName=role_name))
    role = AwsRole(role_arn, "ext-team-a-0123", "duetime-team-a", "team-a")
    queue_url, _ = aws.queue()

    response = call(
        caller, SqsTarget(type="sqs", queue_url=queue_url, message="as the team"), envelope(), role
    )

    assert response.status_code == 200, response
    assert len(aws.messages(queue_url, 1)) == 1
    assumed = caller._credentials[role]
    identity = boto3.session.Session(
        aws_access_key_id=assumed.access_key_id,
        aws_secret_access_key=assumed.secret_access_key,
        aws_session_token=assumed.session_token,
    ).client("sts", endpoint_url=SQS_URL, region_name=REGION)
    assert identity.get_caller_identity()["Arn"] == (
        f"arn:aws:sts::{ACCOUNT}:assumed-role/{role_name}/duetime-team-a"
    )


HANDLER = textwrap.dedent(
    """
    def handler(event, context):
        if event["payload"] == "fail":
            raise ValueError("asked to fail")
        return {"got": event, "function": context.function_name}
    """
)


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("app.py", HANDLER)
    return buffer.getvalue()


@ON_THE_DEPLOYED_PORT
def test_a_lambda_function_gets_the_envelope_and_payload_and_its_error_is_a_502(
    deployed: DeployedLocalStack,  # noqa: F811  (the fixture imported above)
) -> None:
    lam = deployed.client("lambda")
    name = f"aws-target-{uuid.uuid4().hex[:8]}"
    arn = lam.create_function(
        FunctionName=name,
        Runtime="python3.13",
        Role=LAMBDA_ROLE,
        Handler="app.handler",
        Code={"ZipFile": _zip()},
        Timeout=10,
        MemorySize=128,
    )["FunctionArn"]
    try:
        lam.get_waiter("function_active_v2").wait(FunctionName=name, WaiterConfig={"Delay": 0.2})
        caller = Boto3AwsTargetCaller(
            default_region=REGION, require_role=False, endpoint_urls={"lambda": deployed.url}
        )
        run = envelope()

        done = call(caller, LambdaTarget(type="lambda", function_arn=arn, payload={"day": "mon"}), run)
        failed = call(caller, LambdaTarget(type="lambda", function_arn=arn, payload="fail"), run)
    finally:
        lam.delete_function(FunctionName=name)

    assert (done.status_code, done.error) == (200, None), done
    assert json.loads(done.body) == {
        "got": {"duetime": run.as_json(), "payload": {"day": "mon"}},
        "function": name,
    }
    assert (failed.status_code, failed.error) == (502, "function error: Unhandled"), failed
    assert json.loads(failed.body)["errorMessage"] == "asked to fail"
    assert judge(failed) is Verdict.RETRYABLE
