"""``duetime local`` invokes the handlers as Lambda does: per-environment module state, rules that fire at
their own second every minute, SQS batches whose reported failures stay on the queue."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from duetime.local.lambda_sandbox import LocalFunction, LocalScheduleRule, LocalSqsEventSource, sqs_event
from duetime.ports.queue import ReceivedMessage

HANDLER = """
import threading
calls = []
gate = threading.Event()

def handler(event, context):
    calls.append(event)
    if event.get("wait"):
        gate.wait(5)
    if event.get("Records"):
        return {"batchItemFailures": [
            {"itemIdentifier": r["messageId"]} for r in event["Records"] if r["body"] == "fail"
        ]}
    return {"environment": id(calls), "remaining_ms": context.get_remaining_time_in_millis()}
"""


def function(tmp_path: Path) -> LocalFunction:
    path = tmp_path / "handler.py"
    path.write_text(HANDLER)
    return LocalFunction("probe", timeout_seconds=30, handler_file=path)


def test_a_warm_environment_is_reused_and_a_busy_one_is_not_shared(tmp_path: Path) -> None:
    probe = function(tmp_path)
    first, second = probe.invoke({}), probe.invoke({})
    assert first["environment"] == second["environment"] and probe.environments == 1  # warm
    assert 0 < first["remaining_ms"] <= 30_000
    (warm,) = probe._idle
    busy = threading.Thread(target=probe.invoke, args=({"wait": True},))
    busy.start()
    while probe._idle:  # until the busy invocation has taken the warm environment
        pass
    other = probe.invoke({})  # the busy environment is not handed out: a second one is made
    assert probe.environments == 2 and other["environment"] != first["environment"]
    warm.gate.set()
    busy.join(5)
    assert len(warm.calls) == 3 and not busy.is_alive()


def test_a_rule_fires_at_its_own_second_of_every_minute() -> None:
    rule = LocalScheduleRule(LocalFunction("unused", 1), {}, second_of_minute=17.5)
    assert rule.next_fire(960.0 + 10.0) == 960.0 + 17.5  # later this minute
    assert rule.next_fire(960.0 + 17.5) == 960.0 + 60 + 17.5  # exactly at it: the next minute's
    assert rule.next_fire(960.0 + 59.0) == 1020.0 + 17.5


class Consumer:
    def __init__(self, bodies: list[str]) -> None:
        self.messages = [ReceivedMessage(f"m{i}", f"r{i}", body, 1) for i, body in enumerate(bodies)]
        self.deleted: list[str] = []

    def receive(self, count: int, wait_seconds: int) -> list[ReceivedMessage]:
        batch, self.messages = self.messages[:count], self.messages[count:]
        return batch

    def delete(self, handles: list[str]) -> None:
        self.deleted.extend(handles)


def test_only_the_messages_a_batch_reports_as_failed_stay_on_the_queue(tmp_path: Path) -> None:
    consumer = Consumer(["ok", "fail", "ok", *["ok"] * 9])
    batches: list[tuple[int, int]] = []
    source = LocalSqsEventSource(consumer, function(tmp_path), on_batch=lambda n, f: batches.append((n, f)))  # type: ignore[arg-type]
    assert source.poll_once() == 10 and source.poll_once() == 2 and source.poll_once() == 0
    assert batches == [(10, 1), (2, 0)]
    assert "r1" not in consumer.deleted and len(consumer.deleted) == 11


def test_a_batch_whose_invocation_raises_comes_back_whole(tmp_path: Path) -> None:
    path = tmp_path / "handler.py"
    path.write_text("def handler(event, context):\n    raise RuntimeError('boom')\n")
    consumer = Consumer(["a", "b"])
    source = LocalSqsEventSource(consumer, LocalFunction("boom", 5, handler_file=path))  # type: ignore[arg-type]
    assert source.poll_once() == 2 and consumer.deleted == []


def test_the_sqs_event_has_what_powertools_reads() -> None:
    record: dict[str, Any] = sqs_event([ReceivedMessage("id", "handle", "body", 3)], "arn")["Records"][0]
    assert record["messageId"] == "id" and record["receiptHandle"] == "handle" and record["body"] == "body"
    assert record["attributes"]["ApproximateReceiveCount"] == "3" and record["eventSource"] == "aws:sqs"


def test_a_stopped_function_throttles_every_asynchronous_invocation_and_its_event_source_receives_nothing(
    tmp_path: Path,
) -> None:
    probe = function(tmp_path)
    probe.reserved_concurrency = 0  # Lambda's switch: ``duetime system pollers stop``
    assert probe.invoke_async({}) is None and probe.throttled == 1 and probe.environments == 0
    consumer = Consumer(["a", "b"])
    source = LocalSqsEventSource(consumer, probe)  # type: ignore[arg-type]
    assert source.poll_once(wait_seconds=0) == 0 and len(consumer.messages) == 2  # left in the queue
    probe.reserved_concurrency = None
    thread = probe.invoke_async({})
    assert thread is not None
    thread.join(5)
    assert probe.environments == 1 and source.poll_once() == 2
