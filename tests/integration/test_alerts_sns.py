"""Alerts go to SNS on AWS: published to a LocalStack topic and read back through an SQS subscription."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import boto3

from duetime.adapters.aws.alerts import SnsAlerts
from duetime.ports import Alert

from .conftest import Stack


def test_dead_run_alert_is_published_to_the_sns_topic(stack: Stack) -> None:
    sns = boto3.session.Session().client("sns", endpoint_url=stack.sqs.meta.endpoint_url)
    topic = sns.create_topic(Name=stack.names.jobs + "-alerts")["TopicArn"]
    inbox = stack.sqs.create_queue(QueueName=stack.names.jobs + "-inbox")["QueueUrl"]
    inbox_arn = stack.sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(
        TopicArn=topic, Protocol="sqs", Endpoint=inbox_arn, Attributes={"RawMessageDelivery": "true"}
    )
    try:
        alert = Alert(
            "run_dead",
            "team-a",
            "job-1",
            "job-1@2026-12-01T00:00:00Z",
            4,
            "HTTP 503",
            datetime(2026, 12, 1, 0, 3, tzinfo=UTC),
        )
        SnsAlerts(sns, topic).publish(alert)
        received = stack.sqs.receive_message(QueueUrl=inbox, WaitTimeSeconds=5).get("Messages", [])
        assert len(received) == 1
        body = json.loads(received[0]["Body"])
        assert body == {
            "kind": "run_dead",
            "team": "team-a",
            "job_id": "job-1",
            "run_id": "job-1@2026-12-01T00:00:00Z",
            "attempt": 4,
            "detail": "HTTP 503",
            "at": "2026-12-01T00:03:00Z",
        }
    finally:
        stack.sqs.delete_queue(QueueUrl=inbox)
        sns.delete_topic(TopicArn=topic)
