"""Run messages on the queue (``adapters/aws/sqs.py``): a poller's message carries the run it created, except
what must not travel (header values, a run too big to keep a batch of ten small); a body that names one run
and carries another, or carries something that is not a run, is not a run message."""

from __future__ import annotations

import json
from typing import Any

import pytest

from duetime.adapters.aws.sqs import SEND_BACKOFF, SqsRunQueue
from duetime.adapters.memory import MemoryAlerts, MemoryQueue, MemoryStore
from duetime.domain.clock import ManualClock
from duetime.domain.ids import PARTITIONS
from duetime.domain.models import Run
from duetime.ports import RunMessage
from duetime.ports.queue import CARRIED_RUN_MAX_BYTES, decode, encode
from duetime.scheduling.poller import Poller, PollerConfig

from ..twin_support import T0, a_job


def a_claimed_run(**target: object) -> Run:
    """A run as a poller's claim creates it (of a job whose target has ``target``'s fields)."""
    store, clock = MemoryStore(), ManualClock(T0)
    spec = {"url": "https://example.com/hook", **target}
    store.put_job(a_job(clock.now(), target=spec), clock.now())
    clock.advance(1)
    config = PollerConfig(partitions=list(range(PARTITIONS)), preload_lead=None)
    (run,) = Poller(store, store, MemoryQueue(clock), MemoryAlerts(), clock, config).claim().runs
    return run


def test_a_carried_run_comes_out_of_the_queue_as_it_went_in() -> None:
    run = a_claimed_run(body='{"a": 1}').model_copy(update={"in_reap_index": False})
    message = decode(encode(RunMessage.carrying(run)))
    assert message == RunMessage(run.run_id, 1)
    assert message.run == run and message.run.in_reap_index is False


def test_a_run_whose_target_has_headers_travels_by_name_only() -> None:
    run = a_claimed_run(headers={"Authorization": "Bearer s3cr3t"})
    body = encode(RunMessage.carrying(run))
    assert "s3cr3t" not in body and json.loads(body) == {"run_id": run.run_id, "attempt": 1}
    assert decode(body).run is None


def test_a_run_too_big_to_carry_travels_by_name_only() -> None:
    run = a_claimed_run(body="x" * CARRIED_RUN_MAX_BYTES)
    assert decode(encode(RunMessage.carrying(run))).run is None
    assert decode(encode(RunMessage.carrying(a_claimed_run(body="x" * 1000)))).run is not None


@pytest.mark.parametrize(
    "change",
    [
        {"attempt": 2},  # the message names attempt 1
        {"run_id": "01JD0000000000000000000000@2026-12-01T10:00:00Z"},
        {"target": "https://example.com"},  # not a target
        {"owner": "worker-x"},  # a waiting run has no owner, lease or result
        {"result": {"status_code": 200, "duration_ms": 1}},
    ],
)
def test_a_body_carrying_another_or_no_valid_run_is_not_a_run_message(change: dict[str, object]) -> None:
    body = json.loads(encode(RunMessage.carrying(a_claimed_run())))
    body["run"].update(change)
    with pytest.raises(ValueError):
        decode(json.dumps(body))


def test_a_field_a_later_release_adds_to_a_carried_run_is_ignored() -> None:
    """A newer poller's message read by this worker (docs/stored-formats.md): the run is read without it; the
    lease still takes only the run the table holds (``RUN_AS_CARRIED``)."""
    run = a_claimed_run()
    body = json.loads(encode(RunMessage.carrying(run)))
    body["run"].update({"surprise": 1})
    body["run"]["target"].update({"surprise": {"nested": True}})
    assert decode(json.dumps(body)).run == decode(encode(RunMessage.carrying(run))).run


def test_a_carried_run_without_its_reap_entry_flag_is_not_a_run_message() -> None:
    body = json.loads(encode(RunMessage.carrying(a_claimed_run())))
    del body["run_in_reap_index"]
    with pytest.raises(ValueError, match="run_in_reap_index"):
        decode(json.dumps(body))


# --- sending ---------------------------------------------------------------------------------------------


class FailingEntries:
    """An SQS client whose SendMessageBatch answers fail the entries named, one list per request in turn (the
    last list again when they run out)."""

    def __init__(self, *failing: list[str]) -> None:
        self.failing = list(failing)
        self.sent: list[list[str]] = []

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.sent.append([entry["Id"] for entry in Entries])
        failing = self.failing.pop(0) if len(self.failing) > 1 else self.failing[0]
        failed = [i for i in failing if i in self.sent[-1]]
        return {"Failed": [{"Id": i, "SenderFault": False, "Code": "InternalError"} for i in failed]}


def messages(count: int) -> list[RunMessage]:
    return [RunMessage(run_id=f"01JD{i:022d}@2026-12-01T10:00:00Z", attempt=1) for i in range(count)]


def test_the_entries_sqs_fails_are_sent_again_alone_after_a_backoff() -> None:
    client, pauses = FailingEntries(["1", "3"], []), list[float]()
    SqsRunQueue(client, "q", sleep=pauses.append).send(messages(4))
    assert client.sent == [["0", "1", "2", "3"], ["1", "3"]]
    assert len(pauses) == 1 and 0 <= pauses[0] <= SEND_BACKOFF.ceiling(1)


def test_entries_still_failing_after_five_requests_raise_as_before() -> None:
    client, pauses = FailingEntries(["2"]), list[float]()
    with pytest.raises(RuntimeError, match="SQS refused 1 run messages after retries"):
        SqsRunQueue(client, "q", sleep=pauses.append).send(messages(3))
    assert client.sent == [["0", "1", "2"]] + [["2"]] * 4  # five requests, as ever
    assert SEND_BACKOFF.attempts == 5
    assert all(0 <= pause <= SEND_BACKOFF.ceiling(n) for n, pause in enumerate(pauses, start=1))
    assert len(pauses) == 4
