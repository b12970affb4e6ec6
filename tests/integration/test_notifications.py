"""Job notifications end to end on DynamoDB Local and LocalStack: a job created through the API with a
webhook (the demo target) and an SNS topic of the team's; its run dies; the worker queues the notices in the
outbox; a poller's delivery pass sends a signed POST and an SNS message; a repeat waits its window."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import boto3
import pytest
from standardwebhooks import Webhook

from duetime.adapters.aws.notify_channels import SnsTopics
from duetime.adapters.http_target import HttpTargetCaller
from duetime.domain.clock import ManualClock
from duetime.domain.models import NotifyEvent
from duetime.domain.signing import LEGACY_SIGNATURE_UNTIL, verify_signature
from duetime.execution.notification_senders import ChannelSender, WebhookSender
from duetime.execution.notifications import GROUP_WINDOW, JobNotifier, deliver_due
from duetime.execution.worker import Worker, WorkerConfig, WorkOutcome

from .api_support import JOB, Call
from .conftest import Stack


@pytest.fixture
def topic(stack: Stack) -> Iterator[tuple[Any, str, str]]:
    """A LocalStack SNS topic with an SQS inbox subscribed: (sns client, topic ARN, inbox URL)."""
    sns = boto3.client("sns", endpoint_url=stack.sqs.meta.endpoint_url)
    arn = sns.create_topic(Name=stack.names.jobs + "-team")["TopicArn"]
    inbox = stack.sqs.create_queue(QueueName=stack.names.jobs + "-team-inbox")["QueueUrl"]
    attributes = stack.sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"]
    sns.subscribe(
        TopicArn=arn,
        Protocol="sqs",
        Endpoint=attributes["QueueArn"],
        Attributes={"RawMessageDelivery": "true"},
    )
    yield sns, arn, inbox
    sns.delete_topic(TopicArn=arn)
    stack.sqs.delete_queue(QueueUrl=inbox)


def test_a_dead_run_tells_the_jobs_webhook_and_topic_once_and_repeats_are_grouped(
    local_team: Call, stack: Stack, target: Any, topic: tuple[Any, str, str]
) -> None:
    sns, arn, inbox = topic
    hook = target.url + "?group=notify"
    channels = [
        {"type": "webhook", "url": hook, "events": ["dead"]},
        {"type": "sns", "topic_arn": arn, "events": ["dead", "failed"]},
    ]
    body = {**JOB, "schedule": {"rate": "1 minute"}, "exact": True, "notify": channels}
    created = local_team("POST", "/v1/jobs", {**body, "target": {"url": target.url + "?status=503"}})
    assert created.status == 201, created.body
    job = created.body
    assert [c["type"] for c in job["notify"]] == ["webhook", "sns"]
    clock = ManualClock(datetime.fromisoformat(job["next_run_at"]))
    notifier = JobNotifier(stack.alerts, stack.store, stack.store)
    worker = Worker(
        stack.store,
        stack.store,
        stack.queue,
        notifier,
        HttpTargetCaller(allow_private=True),
        clock,
        WorkerConfig(),
    )
    sender = ChannelSender(WebhookSender(HttpTargetCaller(allow_private=True), stack.store), SnsTopics(sns))

    def die_once() -> None:
        """Claim the job's due run and let it die (503, one attempt)."""
        stack.poller(clock=clock).claim()
        (message,) = stack.messages()
        assert worker.process(message).outcome is WorkOutcome.DEAD

    local_team("PATCH", f"/v1/jobs/{job['id']}", {"retry": {"max_attempts": 1}})
    clock.set(datetime.fromisoformat(local_team("GET", f"/v1/jobs/{job['id']}").body["next_run_at"]))
    die_once()
    team = stack.store.get_team(stack.store.get_job(job["id"]).team)  # type: ignore[union-attr]
    assert team is not None

    sns.tag_resource(ResourceArn=arn, Tags=[{"Key": "duetime:team", "Value": team.team_id}])
    clock.advance(1)
    report = deliver_due(stack.store, sender, clock.now())
    assert (report.delivered, report.retried, report.given_up) == (2, 0, 0)

    (call,) = [c for c in target.recorder.calls if c.query.get("group") == "notify"]
    sent = json.loads(call.body)
    assert (sent["event"], sent["job_id"], sent["count"], call.headers["x-duetime-event"]) == (
        NotifyEvent.DEAD.value,
        job["id"],
        1,
        "dead",
    )
    assert call.headers["x-duetime-notification-id"] == sent["notification_id"]
    assert team.signing_secret is not None
    stamp = int(clock.now().timestamp())
    if clock.now() < LEGACY_SIGNATURE_UNTIL:  # the old header, during its migration window
        assert verify_signature(
            team.signing_secret, call.headers["x-duetime-signature"], call.body.encode(), stamp
        )
    assert call.headers["webhook-id"] == sent["notification_id"]
    (key,) = local_team("GET", f"/v1/jobs/{job['id']}/signing-key").body["keys"]
    Webhook(key["secret"]).verify(call.body, call.headers)  # as the run's calls: the job's key
    (message,) = stack.sqs.receive_message(QueueUrl=inbox, WaitTimeSeconds=5)["Messages"]
    assert json.loads(message["Body"])["notification_id"].startswith(f"{job['id']}:dead:")

    clock.set(datetime.fromisoformat(local_team("GET", f"/v1/jobs/{job['id']}").body["next_run_at"]))
    die_once()  # a repeat inside the quiet window: held
    clock.advance(1)
    assert deliver_due(stack.store, sender, clock.now()).delivered == 0
    clock.advance(GROUP_WINDOW.total_seconds())
    assert deliver_due(stack.store, sender, clock.now()).delivered == 2
    calls = [c for c in target.recorder.calls if c.query.get("group") == "notify"]
    assert [json.loads(c.body)["count"] for c in calls] == [1, 1]
    assert json.loads(calls[1].body)["notification_id"].endswith(":2")


SNS_ARN = "notify.0.topic_arn"


def test_bad_notify_channels_are_refused_naming_the_field(local_team: Call) -> None:
    hook = {"type": "webhook", "url": "https://hooks.example.com/x", "events": ["dead"]}
    cases = [
        ([{**hook, "url": "http://169.254.169.254/latest"}], "notify.0.url"),
        ([hook, {**hook, "url": "ftp://example.com"}], "notify.1.url"),
        ([{**hook, "events": ["dead", "dead"]}], "notify.0.events"),
        ([{**hook, "events": ["exploded"]}], "notify.0.events.0"),
        (
            [{"type": "sns", "topic_arn": "arn:aws:sqs:us-east-1:123456789012:q", "events": ["dead"]}],
            "notify.0.topic_arn",
        ),
        ([{"type": "pager", "events": ["dead"]}], "notify.0"),
        ([hook] * 6, "notify"),
    ]
    for notify, field in cases:
        answer = local_team("POST", "/v1/jobs", {**JOB, "notify": notify})
        assert (answer.status, answer.body["error"]["field"]) == (422, field), (notify, answer.body)
    assert local_team("GET", "/v1/jobs").body["jobs"] == []
