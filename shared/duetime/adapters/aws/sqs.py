"""The run queue on SQS. A message names a run's attempt, ``{"run_id": ..., "attempt": n}``; a poller's
message also carries the run it created (``"run"``, under ``CARRIED_RUN_MAX_BYTES``), which the worker's
lease checks against the stored row (``RunStore.acquire_leases``), so the row need not be read first."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from duetime.adapters.aws.aws_limits import SQS_MAX_BATCH_BYTES, SQS_MAX_BATCH_ENTRIES
from duetime.adapters.retrying import Backoff, Sleep, resend
from duetime.domain.stored_format import first_format
from duetime.ports import RunMessage
from duetime.ports.queue import CARRIED_RUN_MAX_BYTES, ReceivedMessage, encode

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import SendMessageBatchRequestEntryTypeDef

SQS_BATCH = SQS_MAX_BATCH_ENTRIES
# A batch's failed entries (SendMessageBatch answers 200 and names them) go again, five requests in all,
# after a random wait of up to 50, 100, 200, 400 ms: entries failed together do not come back in step.
SEND_BACKOFF = Backoff(attempts=5, base_seconds=0.05, cap_seconds=1.0)
assert SQS_BATCH * (CARRIED_RUN_MAX_BYTES + 512) < SQS_MAX_BATCH_BYTES  # ten carried runs fit a batch


class SqsRunQueue:
    """Implements ``duetime.ports.RunQueue``."""

    def __init__(
        self,
        client: SQSClient,
        queue_url: str,
        sleep: Sleep = time.sleep,
        write_format: Callable[[], int] = first_format,
    ) -> None:
        self.client = client
        self.queue_url = queue_url
        self.sleep = sleep
        self.write_format = write_format  # a message's stored format, asked as a batch is sent

    def send(self, messages: Sequence[RunMessage], delay_seconds: int = 0) -> None:
        """Each batch of 10 in one SendMessageBatch; the entries SQS answers as failed are sent again after a
        backoff, up to ``SEND_BACKOFF.attempts`` requests in all, and raise if some still fail."""
        stored_format = self.write_format()
        for start in range(0, len(messages), SQS_BATCH):
            entries: list[SendMessageBatchRequestEntryTypeDef] = [
                {"Id": str(i), "MessageBody": encode(m, stored_format), "DelaySeconds": delay_seconds}
                for i, m in enumerate(messages[start : start + SQS_BATCH])
            ]
            left = resend(self._send_batch, entries, SEND_BACKOFF, sleep=self.sleep)
            if left:
                raise RuntimeError(f"SQS refused {len(left)} run messages after retries")

    def _send_batch(
        self, entries: list[SendMessageBatchRequestEntryTypeDef]
    ) -> list[SendMessageBatchRequestEntryTypeDef]:
        """One SendMessageBatch; the entries that failed."""
        failed = self.client.send_message_batch(QueueUrl=self.queue_url, Entries=entries).get("Failed", [])
        failed_ids = {f["Id"] for f in failed}
        return [e for e in entries if e["Id"] in failed_ids]


class SqsRunBacklog:
    """Implements ``duetime.ports.RunBacklog``: SQS's ApproximateNumberOfMessages (visible messages)."""

    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self.client = client
        self.queue_url = queue_url

    def waiting_runs(self) -> int:
        attributes = self.client.get_queue_attributes(
            QueueUrl=self.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"])


class ConcurrentRunQueue:
    """A ``RunQueue`` that sends batches of 10 on several threads at once (SQS scales with parallel
    senders), so a poller can claim the next batch while the last one is still being sent. ``send``
    returns once every message it was given is on the queue."""

    def __init__(self, queue: SqsRunQueue, senders: int = 8) -> None:
        self.queue = queue
        self.pool = ThreadPoolExecutor(max_workers=senders, thread_name_prefix="sqs-send")

    def send(self, messages: Sequence[RunMessage], delay_seconds: int = 0) -> None:
        batches = [messages[i : i + SQS_BATCH] for i in range(0, len(messages), SQS_BATCH)]
        for future in [self.pool.submit(self.queue.send, batch, delay_seconds) for batch in batches]:
            future.result()


class SqsConsumer:
    """What the Lambda event source mapping does, for running the worker outside Lambda (local mode)."""

    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self.client = client
        self.queue_url = queue_url

    def receive(self, max_messages: int = 10, wait_seconds: int = 1) -> list[ReceivedMessage]:
        response = self.client.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=max_messages,
            WaitTimeSeconds=wait_seconds,
            MessageSystemAttributeNames=["ApproximateReceiveCount"],
        )
        return [
            ReceivedMessage(
                m["MessageId"],
                m["ReceiptHandle"],
                m["Body"],
                int(m.get("Attributes", {}).get("ApproximateReceiveCount", "1")),
            )
            for m in response.get("Messages", [])
        ]

    def delete(self, receipt_handles: Sequence[str]) -> None:
        for start in range(0, len(receipt_handles), SQS_BATCH):
            batch = receipt_handles[start : start + SQS_BATCH]
            self.client.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(batch)],
            )

    def change_visibility(self, receipt_handle: str, seconds: int) -> None:
        self.client.change_message_visibility(
            QueueUrl=self.queue_url, ReceiptHandle=receipt_handle, VisibilityTimeout=seconds
        )


def ensure_queue(client: SQSClient, name: str, visibility_timeout: int = 90) -> str:
    """Create the run queue (idempotent) with a dead-letter queue; return its URL."""
    dlq_url = client.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    dlq_arn = client.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    url: str = client.create_queue(
        QueueName=name,
        Attributes={
            "VisibilityTimeout": str(visibility_timeout),
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "10"}),
        },
    )["QueueUrl"]
    return url
