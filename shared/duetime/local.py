"""Running duetime on one machine against DynamoDB Local and LocalStack: what Lambda, EventBridge and the
SQS event source mapping do on AWS, done by threads (the same poller and worker code)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from duetime.adapters.dynamodb.tables import TableNames, create_tables
from duetime.adapters.sqs import SqsConsumer, decode, ensure_queue
from duetime.poller import ClaimReport, Poller, RecoveryReport
from duetime.settings import Settings
from duetime.worker import Worker, WorkReport

log = logging.getLogger(__name__)


def ensure_resources(
    settings: Settings, dynamodb: Any, sqs: Any, queue_name: str = "duetime-runs"
) -> Settings:
    """Create the tables and the run queue if missing; return the settings with the queue URL."""
    create_tables(dynamodb, TableNames(settings.jobs_table, settings.runs_table, settings.control_table))
    visibility = settings.lease_seconds + 30
    url = settings.run_queue_url or ensure_queue(sqs, queue_name, visibility_timeout=visibility)
    return settings.model_copy(update={"run_queue_url": url})


@dataclass
class EventSourceMapping:
    """SQS -> worker as Lambda's event source mapping does it: batches of up to 10, each record processed,
    successes deleted, failures left to reappear after the visibility timeout."""

    consumer: SqsConsumer
    worker: Worker
    on_report: Callable[[WorkReport], None] | None = None
    errors: list[BaseException] = field(default_factory=list)

    def poll_once(self, wait_seconds: int = 1) -> int:
        messages = self.consumer.receive(10, wait_seconds)
        done: list[str] = []
        for message in messages:
            try:
                report = self.worker.process(decode(message.body))
            except Exception as exc:  # a failed record stays on the queue (partial batch failure)
                log.exception("run message failed", extra={"message_id": message.message_id})
                self.errors.append(exc)
                continue
            done.append(message.receipt_handle)
            if self.on_report:
                self.on_report(report)
        if done:
            self.consumer.delete(done)
        return len(messages)

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.poll_once()
            except Exception:  # the queue endpoint went away (e.g. shutting down): pause and retry
                log.exception("receiving run messages failed")
                stop.wait(1)


def start_threads(
    poller: Poller,
    mappings: list[EventSourceMapping],
    stop: threading.Event,
    interval: float = 1.0,
    on_poll: Callable[[ClaimReport, RecoveryReport | None], None] | None = None,
) -> list[threading.Thread]:
    """Start one poller loop and one thread per event source mapping; they end when ``stop`` is set."""
    threads = [
        threading.Thread(
            target=poller.run_until,
            kwargs={"stop": stop.is_set, "sleep": stop.wait, "interval": interval, "on_report": on_poll},
            name="duetime-poller",
            daemon=True,
        )
    ]
    threads += [
        threading.Thread(target=m.run, args=(stop,), name=f"duetime-worker-{i}", daemon=True)
        for i, m in enumerate(mappings)
    ]
    for thread in threads:
        thread.start()
    return threads
