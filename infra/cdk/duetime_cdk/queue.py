"""The run queue and its dead-letter queue."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from cdk_nag import NagSuppressions
from constructs import Construct

WORKER_TIMEOUT = cdk.Duration.minutes(15)


class RunQueue(Construct):
    """Messages are tiny (run id + attempt); the run row holds the rest. Visibility is six times the
    worker's timeout (AWS's advice for Lambda event sources): a message is never handed out twice while a
    batch is still being worked. A lost worker is not waited for: its lease (60 s) expires and the
    poller re-queues the run."""

    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        self.dead_letters = sqs.Queue(
            self,
            "DeadLetters",
            retention_period=cdk.Duration.days(14),
            enforce_ssl=True,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
        )
        self.queue = sqs.Queue(
            self,
            "Runs",
            visibility_timeout=cdk.Duration.seconds(WORKER_TIMEOUT.to_seconds() * 6),
            retention_period=cdk.Duration.days(4),
            enforce_ssl=True,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            dead_letter_queue=sqs.DeadLetterQueue(max_receive_count=10, queue=self.dead_letters),
        )
        NagSuppressions.add_resource_suppressions(
            self.dead_letters,
            [
                {
                    "id": "AwsSolutions-SQS3",
                    "reason": "This is the dead-letter queue: the end of the line. Any message "
                    "in it raises the DeadLetterDepth alarm.",
                }
            ],
        )

    def allow_send(self) -> iam.PolicyStatement:
        """Queue runs: the poller (claims, re-queues), the worker (retries) and the API (triggers)."""
        return iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[self.queue.queue_arn])
