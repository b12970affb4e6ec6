"""One contract for the run queue: ``MemoryQueue`` on a manual clock and LocalStack SQS (``SqsRunQueue`` and
``SqsConsumer``) on the real one. Time passes by moving the manual clock for the twin and by sleeping for
SQS. Not held to it: duplicates, long polling and redrive, which the twin does not model."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from duetime.adapters.aws.clients import new_client
from duetime.adapters.aws.sqs import SqsConsumer, SqsRunQueue, ensure_queue
from duetime.adapters.memory import MemoryQueue
from duetime.domain.clock import ManualClock
from duetime.ports import RunMessage
from duetime.ports.queue import decode

from ..twin_support import T0
from .conftest import TWIN, against

VISIBILITY = 2


@dataclass
class Subject:
    queue: Any  # RunQueue
    consumer: Any  # SqsConsumer or MemoryQueue
    wait: Callable[[float], None]

    def receive(self, wait_seconds: int = 1) -> list[Any]:
        """What one receive hands out (a short poll with ``wait_seconds=0``: to see that nothing is there)."""
        return list(self.consumer.receive(10, wait_seconds))


@pytest.fixture(params=against("sqs"))
def subject(request: pytest.FixtureRequest) -> Iterator[Subject]:
    if request.param == TWIN:
        clock = ManualClock(T0)
        queue = MemoryQueue(clock, visibility_timeout=VISIBILITY)
        yield Subject(queue, queue, clock.advance)
        return
    request.getfixturevalue("emulators")
    sqs = new_client("sqs")  # as duetime runs: the lean transport
    url = ensure_queue(sqs, f"c{uuid.uuid4().hex[:10]}", visibility_timeout=VISIBILITY)
    yield Subject(SqsRunQueue(sqs, url), SqsConsumer(sqs, url), time.sleep)
    sqs.delete_queue(QueueUrl=url)
    sqs.delete_queue(QueueUrl=url + "-dlq")


def test_a_received_message_is_hidden_until_its_visibility_timeout_passes(subject: Subject) -> None:
    subject.queue.send([RunMessage("job@2026-12-01T10:00:00Z", 1)])

    (first,) = subject.receive()
    assert decode(first.body) == RunMessage("job@2026-12-01T10:00:00Z", 1) and first.receive_count == 1
    assert subject.receive(0) == []
    subject.wait(VISIBILITY + 1)
    (again,) = subject.receive()
    assert again.message_id == first.message_id and again.receive_count == 2


def test_a_deleted_message_never_comes_back(subject: Subject) -> None:
    subject.queue.send([RunMessage(f"job@2026-12-01T10:00:0{i}Z", 1) for i in range(3)])
    received = subject.receive()
    assert len(received) == 3

    subject.consumer.delete([m.receipt_handle for m in received[:2]])
    subject.wait(VISIBILITY + 1)

    (left,) = subject.receive()
    assert left.message_id == received[2].message_id


def test_a_delayed_message_is_invisible_until_its_delay_passes(subject: Subject) -> None:
    subject.queue.send([RunMessage("job@2026-12-01T10:00:00Z", 2)], delay_seconds=2)

    assert subject.receive(0) == []
    subject.wait(3)
    (message,) = subject.receive()
    assert decode(message.body).attempt == 2
