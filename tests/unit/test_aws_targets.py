"""AWS targets: what a job may name (validated once, every error naming its field), what each call carries
(the run envelope, the Step Functions execution name, the FIFO deduplication id), and how the worker calls
them (under the target's or the team's role, with duetime's external id for the team), on the in-memory twin.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import ValidationError

from duetime.adapters.memory import MemoryAlerts, MemoryQueue, MemoryStore
from duetime.domain.aws_targets import (
    RunEnvelope,
    SqsTarget,
    StepFunctionsTarget,
    execution_name,
    fifo_deduplication_id,
)
from duetime.domain.clock import ManualClock
from duetime.domain.errors import from_validation_error
from duetime.domain.ids import PARTITIONS
from duetime.domain.models import HttpTarget, JobSpec, RunStatus, Team, parse_target
from duetime.execution.worker import Worker, WorkOutcome, session_name
from duetime.ports import AwsRole, AwsTargetCall, RunMessage, TargetRequest, TargetResponse
from duetime.scheduling.poller import Poller, PollerConfig

from ..twin_support import T0, a_job, at

ACCOUNT = "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/duetime-target-jobs"
QUEUE = f"https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/orders"
TARGETS: dict[str, dict[str, Any]] = {
    "lambda": {"type": "lambda", "function_arn": f"arn:aws:lambda:eu-west-1:{ACCOUNT}:function:nightly"},
    "sqs": {"type": "sqs", "queue_url": QUEUE, "message": "go"},
    "sns": {"type": "sns", "topic_arn": f"arn:aws:sns:us-east-2:{ACCOUNT}:alerts", "message": "go"},
    "eventbridge": {"type": "eventbridge", "detail_type": "nightly", "detail": {"k": 1}},
    "stepfunctions": {
        "type": "stepfunctions",
        "state_machine_arn": f"arn:aws:states:ap-south-1:{ACCOUNT}:stateMachine:etl",
    },
}


def spec_error(target: dict[str, Any]) -> str:
    """The API's message for a job with ``target``: ``<field>: <why>``."""
    with pytest.raises(ValidationError) as refused:
        JobSpec.model_validate({"name": "j", "schedule": {"rate": "1 hour"}, "target": target})
    return str(from_validation_error(refused.value))


# --- what a job may name --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_each_aws_target_type_is_accepted_and_stored_as_it_was_sent(kind: str) -> None:
    spec = JobSpec.model_validate({"name": "j", "schedule": {"rate": "1 hour"}, "target": TARGETS[kind]})

    assert spec.target.type == kind
    assert parse_target(spec.target.model_dump(mode="json")) == spec.target  # the run's stored copy


def test_a_target_without_a_type_is_still_http() -> None:
    target = parse_target({"url": "https://example.com/hook"})
    assert isinstance(target, HttpTarget)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ({"type": "ftp"}, "target: target.type must be one of 'http', 'lambda'"),
        (
            {**TARGETS["lambda"], "function_arn": "arn:aws:s3:::bucket"},
            "target.function_arn: must look like arn:aws:lambda:<region>:<account>:function:<name>",
        ),
        (
            {**TARGETS["sqs"], "queue_url": f"https://evil.example.com/{ACCOUNT}/orders"},
            "target.queue_url: must look like https://sqs.<region>.amazonaws.com/<account>/<queue name>",
        ),
        (
            {**TARGETS["sqs"], "queue_url": f"https://sqs.eu-west-1.amazonaws.com.evil.io/{ACCOUNT}/orders"},
            "target.queue_url: must look like",
        ),
        (
            {**TARGETS["sqs"], "queue_url": QUEUE + ".fifo"},
            "target.message_group_id: message_group_id is required",
        ),
        ({**TARGETS["sqs"], "message": ""}, "target.message:"),
        ({**TARGETS["sqs"], "message": "bell\x07"}, "target.message:"),
        (
            {**TARGETS["sns"], "message_group_id": "g"},
            "target.message_group_id: message_group_id is for FIFO",
        ),
        (
            {**TARGETS["sns"], "topic_arn": "arn:aws:sns:us-east-2:12345:alerts"},
            "target.topic_arn: must look",
        ),
        ({**TARGETS["eventbridge"], "source": "aws.ec2"}, "target.source: source must not start with 'aws.'"),
        ({**TARGETS["eventbridge"], "detail": {"duetime": 1}}, "target.detail: detail.duetime is set by"),
        ({**TARGETS["eventbridge"], "detail": [1]}, "target.detail:"),
        ({**TARGETS["eventbridge"], "event_bus_name": "bad bus"}, "target.event_bus_name: must look like"),
        (
            {**TARGETS["stepfunctions"], "state_machine_arn": "etl"},
            "target.state_machine_arn: must look like",
        ),
        ({**TARGETS["lambda"], "payload": "x" * 70_000}, "target.payload: payload is longer than 64 KiB"),
        (
            {**TARGETS["lambda"], "role_arn": f"arn:aws:iam::{ACCOUNT}:role/admin"},
            "target.role_arn: must look like arn:aws:iam::<account>:role/duetime-target-<name>",
        ),
        (
            {**TARGETS["lambda"], "role_arn": f"arn:aws:iam::{ACCOUNT}:role/team/duetime-target-x"},
            "target.role_arn: must look like",  # a path would escape the worker's duetime-target-* grant
        ),
        ({**TARGETS["lambda"], "url": "https://example.com"}, "target.url: Extra inputs are not permitted"),
    ],
)
def test_a_bad_aws_target_is_refused_naming_its_field(target: dict[str, Any], message: str) -> None:
    assert spec_error(target).startswith(message)


def test_a_fifo_queue_with_a_group_and_a_role_is_accepted() -> None:
    target = parse_target(
        {**TARGETS["sqs"], "queue_url": QUEUE + ".fifo", "message_group_id": "g1", "role_arn": ROLE}
    )
    assert isinstance(target, SqsTarget) and target.fifo and target.region == "eu-west-1"


def test_a_localstack_queue_url_is_a_local_one() -> None:
    target = parse_target(
        {**TARGETS["sqs"], "queue_url": "http://localhost.localstack.cloud:4566/000000000000/q"}
    )
    assert isinstance(target, SqsTarget) and target.local and target.region is None


# --- what every call carries ----------------------------------------------------------------------------


def test_the_execution_name_is_one_per_attempt_and_fits_step_functions_rules() -> None:
    run_id = "01JDUETIME0000000000000000@2026-12-01T00:00:00Z~manual-ab12"
    names = {execution_name(run_id, attempt) for attempt in (1, 1, 2)}

    assert len(names) == 2
    assert all(len(n) <= 80 and n.replace("-", "").replace("_", "").isalnum() for n in names)
    assert execution_name(run_id, 1) != execution_name(run_id + "x", 1)


def test_the_fifo_deduplication_id_is_the_run_id_itself_when_it_fits() -> None:
    assert fifo_deduplication_id("01J@2026-12-01T00:00:00Z") == "01J@2026-12-01T00:00:00Z"
    assert len(fifo_deduplication_id("é" * 10)) == 64  # not printable ASCII: its SHA-256
    assert len(fifo_deduplication_id("x" * 200)) == 64  # longer than 128


def test_the_envelope_names_the_run_attempt_and_times() -> None:
    envelope = RunEnvelope("job@2026-12-01T00:00:00Z", "job", 3, at(0), at(7))

    assert envelope.as_json() == {
        "run_id": "job@2026-12-01T00:00:00Z",
        "job_id": "job",
        "attempt": 3,
        "scheduled_at": "2026-12-01T10:00:00Z",
        "fire_at": "2026-12-01T10:00:07Z",
    }
    assert envelope.message_attributes() == {
        "duetime-run-id": "job@2026-12-01T00:00:00Z",
        "duetime-job-id": "job",
        "duetime-attempt": "3",
        "duetime-scheduled-at": "2026-12-01T10:00:00Z",
    }


def test_a_trigger_body_becomes_the_json_it_holds_or_the_text() -> None:
    target = parse_target(TARGETS["stepfunctions"])
    assert isinstance(target, StepFunctionsTarget)

    assert target.with_trigger_body('{"day": 1}').input == {"day": 1}
    assert target.with_trigger_body("not json").input == "not json"
    events = parse_target(TARGETS["eventbridge"])
    with pytest.raises(ValidationError):
        events.with_trigger_body("[1, 2]")  # type: ignore[union-attr]  # the detail must be an object


def test_the_session_name_fits_sts_rules() -> None:
    assert session_name("payments") == "duetime-payments"
    assert session_name("a b/c" + "x" * 80) == ("duetime-a-b-c" + "x" * 80)[:64]


# --- how the worker calls them --------------------------------------------------------------------------


@dataclass
class FakeAws:
    """An AWS caller that answers ``status`` and keeps the calls it was given."""

    status: int | None = 200
    calls: list[AwsTargetCall] = field(default_factory=list)

    def call(self, call: AwsTargetCall) -> TargetResponse:
        self.calls.append(call)
        return TargetResponse(self.status, '{"MessageId": "m1"}', None, duration_ms=3)


class NoHttp:
    def call(self, request: TargetRequest) -> TargetResponse:
        raise AssertionError(f"an AWS target went to the HTTP caller: {request.url}")


def run_once(team: Team, target: dict[str, Any], aws: FakeAws | None) -> tuple[str, MemoryStore, WorkOutcome]:
    clock = ManualClock(T0)
    store = MemoryStore()
    store.put_team(team)
    queue = MemoryQueue(clock, visibility_timeout=90)
    alerts = MemoryAlerts()
    poller = Poller(
        store,
        store,
        queue,
        alerts,
        clock,
        PollerConfig(partitions=list(range(PARTITIONS)), preload_lead=None),
        store,
    )
    store.put_job(a_job(clock.now(), team=team.team_id, target=target), clock.now())
    clock.advance(1)
    (run,) = poller.claim().runs
    worker = Worker(store, store, queue, alerts, NoHttp(), clock, owner="w", aws_caller=aws)
    report = worker.process(RunMessage(run.run_id, run.attempt))
    return run.run_id, store, report.outcome


def test_the_worker_calls_an_aws_target_under_the_teams_role_with_its_external_id() -> None:
    team = Team(team_id="payments", aws_role_arn=ROLE, aws_external_id="dt-ext-1")
    aws = FakeAws()

    run_id, store, outcome = run_once(team, TARGETS["sqs"], aws)

    assert outcome is WorkOutcome.SUCCEEDED
    (call,) = aws.calls
    assert call.role is not None
    assert call.role == AwsRole(ROLE, "dt-ext-1", "duetime-payments", "payments")  # tagged duetime:team
    assert (call.envelope.run_id, call.envelope.attempt) == (run_id, 1)
    run = store.get_run(run_id)
    assert run is not None and run.result is not None and run.result.body == '{"MessageId": "m1"}'


def test_a_targets_own_role_wins_over_the_teams() -> None:
    own = f"arn:aws:iam::{ACCOUNT}:role/duetime-target-other-account"
    aws = FakeAws()

    run_once(
        Team(team_id="t", aws_role_arn=ROLE, aws_external_id="x"), {**TARGETS["sns"], "role_arn": own}, aws
    )

    assert aws.calls[0].role is not None and aws.calls[0].role.role_arn == own


def test_without_a_role_the_call_goes_with_the_workers_own_credentials_for_the_caller_to_allow() -> None:
    aws = FakeAws()
    run_once(Team(team_id="t"), TARGETS["eventbridge"], aws)
    assert aws.calls[0].role is None  # the deployed caller refuses it (require_role); a local stack's allows


def test_a_worker_without_an_aws_caller_fails_the_run_for_good() -> None:
    run_id, store, outcome = run_once(Team(team_id="t"), TARGETS["lambda"], None)

    assert outcome is WorkOutcome.FAILED
    run = store.get_run(run_id)
    assert run is not None and run.status is RunStatus.FAILED
    assert run.result is not None and "not enabled" in (run.result.error or "")


def test_a_throttled_aws_call_is_retried_like_an_http_429() -> None:
    run_id, store, outcome = run_once(Team(team_id="t"), TARGETS["stepfunctions"], FakeAws(status=429))

    assert outcome is WorkOutcome.RETRY_SCHEDULED
    run = store.get_run(run_id)
    assert run is not None and run.status is RunStatus.RETRY_WAIT


def test_a_run_carries_its_aws_target_through_the_queue_message() -> None:
    from duetime.ports.queue import decode, encode

    team = Team(team_id="t")
    clock = ManualClock(T0)
    store = MemoryStore()
    store.put_team(team)
    job = a_job(clock.now(), team="t", target={**TARGETS["lambda"], "payload": {"a": None, "b": [1]}})
    store.put_job(job, clock.now())
    queue = MemoryQueue(clock, visibility_timeout=90)
    poller = Poller(
        store,
        store,
        queue,
        MemoryAlerts(),
        clock,
        PollerConfig(partitions=list(range(PARTITIONS)), preload_lead=None),
        store,
    )
    clock.advance(1)
    (run,) = poller.claim().runs

    carried = decode(encode(RunMessage(run.run_id, run.attempt, run=run))).run

    assert carried is not None and carried.target == job.target
    assert json.loads(encode(RunMessage(run.run_id, 1, run=run)))["run"]["target"]["payload"] == {
        "a": None,
        "b": [1],
    }


# --- the CLI --------------------------------------------------------------------------------------------


def cli_spec(*flags: str) -> dict[str, Any]:
    from duetime.cli import parser, spec_from_args

    return spec_from_args(parser().parse_args(["jobs", "create", "--name", "n", "--rate", "1 hour", *flags]))


def test_the_cli_reads_an_aws_targets_type_from_what_it_names() -> None:
    fifo = cli_spec("--target", QUEUE + ".fifo", "--body", "hello", "--group-id", "g", "--role-arn", ROLE)
    machine = cli_spec("--target", TARGETS["stepfunctions"]["state_machine_arn"], "--body", '{"day": 1}')
    bus = cli_spec("--target", "eventbridge:orders", "--detail-type", "tick", "--body", '{"n": 2}')

    assert fifo["target"] == {
        "type": "sqs",
        "queue_url": QUEUE + ".fifo",
        "message": "hello",
        "message_group_id": "g",
        "role_arn": ROLE,
    }
    assert machine["target"]["type"] == "stepfunctions" and machine["target"]["input"] == {"day": 1}
    assert bus["target"] == {
        "type": "eventbridge",
        "event_bus_name": "orders",
        "detail_type": "tick",
        "detail": {"n": 2},
    }
    assert cli_spec("--target", "https://example.com/hook")["target"]["type"] == "http"
    for spec in (fifo, machine, bus):
        JobSpec.model_validate(spec)  # what the API will accept


def test_the_region_comes_from_an_arn_or_an_sqs_host_never_from_a_bus_name() -> None:
    named = parse_target({**TARGETS["eventbridge"], "event_bus_name": "orders.eu-west-1.prod"})
    by_arn = parse_target(
        {**TARGETS["eventbridge"], "event_bus_name": f"arn:aws:events:eu-north-1:{ACCOUNT}:event-bus/b"}
    )

    assert named.region is None  # type: ignore[union-attr]  # the worker's own region
    assert by_arn.region == "eu-north-1"  # type: ignore[union-attr]
    assert parse_target(TARGETS["sqs"]).region == "eu-west-1"  # type: ignore[union-attr]
    assert parse_target(TARGETS["lambda"]).region == "eu-west-1"  # type: ignore[union-attr]
