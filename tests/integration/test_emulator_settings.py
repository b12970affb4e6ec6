"""The local LocalStack runs as BENCHMARKS.md says it does ("The machine and the method").

With its SQS CloudWatch metrics on, LocalStack sends itself two ``PutMetricData`` for every message sent and
one for every receive and delete, on the core the benchmarks give duetime's workers: a 5,000-job spike made
104-140 starts a second with them and 189-190 without. ``scripts/emulators.sh`` starts it with
``SQS_DISABLE_CLOUDWATCH_METRICS=1``; this test fails if that setting is lost, before a benchmark quietly
measures the emulator again.
"""

from __future__ import annotations

import time

import boto3

from .conftest import SQS_URL, Stack

WATCHED_SECONDS = 3.0  # LocalStack publishes from a thread pool within a fraction of a second


def test_localstack_serves_sqs_without_publishing_cloudwatch_metrics_to_itself(stack: Stack) -> None:
    cloudwatch = boto3.session.Session().client("cloudwatch", endpoint_url=SQS_URL)
    queue_name = stack.queue_url.rsplit("/", 1)[1]
    stack.sqs.send_message(QueueUrl=stack.queue_url, MessageBody="a message")
    received = stack.sqs.receive_message(QueueUrl=stack.queue_url, WaitTimeSeconds=1)["Messages"]
    stack.sqs.delete_message(QueueUrl=stack.queue_url, ReceiptHandle=received[0]["ReceiptHandle"])
    stack.sqs.receive_message(QueueUrl=stack.queue_url, WaitTimeSeconds=0)  # an empty receive

    def published() -> list[str]:
        metrics = cloudwatch.list_metrics(Namespace="AWS/SQS")["Metrics"]
        return [
            m["MetricName"]
            for m in metrics
            if {"Name": "QueueName", "Value": queue_name} in m.get("Dimensions", [])
        ]

    deadline = time.monotonic() + WATCHED_SECONDS
    while time.monotonic() < deadline:
        assert published() == [], (
            "LocalStack publishes SQS metrics: start it with SQS_DISABLE_CLOUDWATCH_METRICS=1"
        )
        time.sleep(0.25)
