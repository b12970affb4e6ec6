"""Warming a worker before a minute with runs (``duetime.scheduling.warmup``): the holder warms once per
loaded minute, never for an empty one, a failed warm-up costs the tick nothing, and the worker answers a
warm-up at once."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from duetime.adapters.aws.lambda_warmer import LambdaWorkerWarmer
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.domain.clock import ManualClock
from duetime.domain.ids import make_run_id
from duetime.ports.functions import WARMUP_EVENT
from duetime.scheduling.poller_lease import LeaseTimings, PollerShift
from duetime.scheduling.preload import FireReport
from duetime.scheduling.warmup import is_warmup, warm_before_loaded_minutes

from ..lambda_support import LambdaContext, load_handler
from .test_poller_lease_loop import NOW, Queue, exact_job_due, make_poller
from .test_poller_lease_loop import store as store  # the moto store fixture those tests use


class Warmer:
    def __init__(self, fails: bool = False) -> None:
        self.warmed = 0
        self.fails = fails

    def warm(self) -> None:
        self.warmed += 1
        if self.fails:
            raise ConnectionError("lambda endpoint down")


def test_a_worker_is_warmed_only_when_a_coming_minute_with_due_rows_was_loaded() -> None:
    warmer, errors = Warmer(), []
    observe = warm_before_loaded_minutes(warmer, errors.append)
    observe(FireReport(loaded_rows=0, fired=3))  # firing a loaded minute is not a new minute
    assert warmer.warmed == 0
    observe(FireReport(loaded_rows=12))
    assert warmer.warmed == 1 and errors == []


def test_a_minute_read_a_page_at_a_time_warms_a_worker_once() -> None:
    warmer = Warmer()
    observe = warm_before_loaded_minutes(warmer, [].append)
    for _ in range(3):  # three pages of the same minute
        observe(FireReport(loaded_rows=1000, loaded_bucket="2026-12-01T10:01"))
    assert warmer.warmed == 1
    observe(FireReport(loaded_rows=5, loaded_bucket="2026-12-01T10:02"))
    assert warmer.warmed == 2


def test_a_failed_warm_up_is_reported_and_never_raised() -> None:
    warmer, errors = Warmer(fails=True), []
    warm_before_loaded_minutes(warmer, errors.append)(FireReport(loaded_rows=1))
    assert warmer.warmed == 1 and [type(e) for e in errors] == [ConnectionError]


def test_the_holder_warms_a_worker_ahead_of_the_minute_whose_run_it_then_fires(store: DynamoStore) -> None:
    due = exact_job_due(store, NOW + timedelta(seconds=70))  # in the minute after next
    clock = ManualClock(NOW)
    queue, warmer = Queue(), Warmer()
    warmed_at: list[Any] = []
    warmer.warm = lambda: warmed_at.append(clock.now())  # type: ignore[method-assign]
    shift = PollerShift(make_poller(store, clock, queue, [due]), store, LeaseTimings(), warmer=warmer)
    shift.serve("inv-1", None, 100, sleep=clock.advance)
    assert [m.run_id for m in queue.sent] == [make_run_id(due.id, NOW + timedelta(seconds=70))]
    assert len(warmed_at) == 1  # the minute with a row; the empty minute before it warmed nothing
    assert NOW + timedelta(seconds=50) <= warmed_at[0] < NOW + timedelta(seconds=60)  # the preload's lead


def test_the_lambda_warmer_invokes_the_worker_alias_asynchronously() -> None:
    calls: list[dict[str, Any]] = []

    class Client:
        def invoke(self, **request: Any) -> None:
            calls.append(request)

    LambdaWorkerWarmer(Client(), "arn:aws:lambda:us-east-1:1:function:worker:live").warm()
    (call,) = calls
    assert call["InvocationType"] == "Event" and call["FunctionName"].endswith(":live")
    assert json.loads(call["Payload"]) == WARMUP_EVENT and is_warmup(json.loads(call["Payload"]))


def test_the_worker_answers_a_warm_up_without_touching_its_queue_or_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from duetime import wiring

    def no_worker() -> None:
        raise AssertionError("a warm-up built the worker")

    monkeypatch.setattr(wiring, "worker", no_worker)
    assert load_handler("worker").handler(dict(WARMUP_EVENT), LambdaContext()) == {"warmed": True}
    assert not is_warmup({"Records": []}) and not is_warmup({"duetime_warmup": "yes"})
