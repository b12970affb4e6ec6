"""Lambda's invocation patterns, in this process: how ``duetime local`` runs the same handlers AWS runs, the
way AWS runs them.

* ``LocalFunction``: a function's execution environments. Each is a fresh copy of the handler module (its
  module-level state, such as the worker's batch processor, belongs to one environment, as in a Lambda
  sandbox); an environment serves one invocation at a time and warm ones are reused.
* ``LocalScheduleRule``: an EventBridge ``rate(1 minute)`` rule. It invokes its function asynchronously
  once a minute, at a second of the minute of its own (AWS picks an arbitrary one), with the rule's input.
  Invocations overlap when they run longer than a minute, as the pollers' do.
* ``LocalSqsEventSource``: Lambda's SQS event source mapping: batches of up to ten messages go to the
  function as an SQS event; every message but the ones it reports in ``batchItemFailures`` is deleted, and
  those come back after the visibility timeout. A batch whose invocation raises comes back whole.
"""

from __future__ import annotations

import importlib.util
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from duetime.adapters.aws.sqs import SqsConsumer
from duetime.ports.queue import ReceivedMessage

log = logging.getLogger(__name__)
FUNCTIONS = Path(__file__).resolve().parents[3] / "functions"


@dataclass
class LocalContext:
    """What a handler reads of Lambda's context object."""

    function_name: str
    timeout_seconds: float
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    memory_limit_in_mb: int = 512
    started: float = field(default_factory=time.monotonic)

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:000000000000:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.timeout_seconds - (time.monotonic() - self.started)) * 1000))


class LocalFunction:
    def __init__(self, name: str, timeout_seconds: float, handler_file: Path | None = None) -> None:
        self.name = name
        self.timeout_seconds = timeout_seconds
        self.handler_file = handler_file or FUNCTIONS / name / "handler.py"
        self._idle: list[ModuleType] = []
        self._lock = threading.Lock()
        self.environments = 0  # created so far: cold starts
        # Lambda's reserved concurrency (``duetime.local.lambda_control``): 0 throttles every invocation.
        self.reserved_concurrency: int | None = None
        self.throttled = 0  # invocations refused so far

    @property
    def stopped(self) -> bool:
        return self.reserved_concurrency == 0

    def _environment(self) -> ModuleType:
        with self._lock:
            if self._idle:
                return self._idle.pop()
            self.environments += 1
            number = self.environments
        spec = importlib.util.spec_from_file_location(
            f"duetime_local_{self.name}_{number}", self.handler_file
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    def invoke(self, event: dict[str, Any]) -> Any:
        """Run one invocation in a free (or a new) environment and return what the handler returned."""
        environment = self._environment()
        try:
            return environment.handler(event, LocalContext(self.name, self.timeout_seconds))
        finally:
            with self._lock:
                self._idle.append(environment)

    def as_api_handler(self, event: dict[str, Any], _context: Any = None) -> Any:
        """API Gateway's proxy integration: a synchronous invocation per request."""
        return self.invoke(event)

    def invoke_async(self, event: dict[str, Any]) -> threading.Thread | None:
        """``InvocationType=Event``: the caller does not wait; an error is logged (no retries). A stopped
        function (reserved concurrency 0) throttles it: dropped, as Lambda drops a throttled poller tick
        once its maximum event age (60 s) has passed; None."""
        if self.stopped:
            self.throttled += 1
            log.info("%s is stopped (reserved concurrency 0): an invocation throttled", self.name)
            return None

        def run() -> None:
            try:
                self.invoke(event)
            except Exception:
                log.exception("async invocation of %s failed", self.name)

        thread = threading.Thread(target=run, name=f"lambda-{self.name}", daemon=True)
        thread.start()
        return thread


_REGISTERED: dict[str, LocalFunction] = {}


def register(function: LocalFunction) -> LocalFunction:
    """Make ``function`` invocable by name in this process (what Lambda's Invoke reaches on AWS)."""
    _REGISTERED[function.name] = function
    return function


def registered(name: str) -> LocalFunction | None:
    return _REGISTERED.get(name)


class RegisteredPollerStarter:
    """``duetime.scheduling.wake.PollerStarter`` for ``duetime local``: an asynchronous invocation of the
    registered poller function, with the event ``LambdaPollerStarter`` sends on AWS."""

    def __init__(self, name: str, run_seconds: float) -> None:
        self.name = name
        self.run_seconds = run_seconds

    def start(self, group: str) -> None:
        from duetime.adapters.aws.lambda_starter import wake_event

        function = _REGISTERED.get(self.name)
        if function is None:
            raise LookupError(f"no local function {self.name} is registered")
        function.invoke_async(wake_event(group, self.run_seconds))


@dataclass
class LocalScheduleRule:
    function: LocalFunction
    payload: dict[str, Any]
    second_of_minute: float = field(default_factory=lambda: random.uniform(0, 60))
    wall_clock: Callable[[], float] = time.time
    fired: int = 0

    def next_fire(self, now: float) -> float:
        """The next instant at ``second_of_minute`` past a whole minute, strictly after ``now``."""
        minute = now - now % 60
        at = minute + self.second_of_minute
        return at if at > now else at + 60

    def run(self, stop: threading.Event, first_now: bool = True) -> None:
        """Invoke every minute until ``stop``; with ``first_now``, once at the start too (a rule that was
        just created with a running stack has an invocation on its way)."""
        if first_now and not stop.is_set():
            self.function.invoke_async(self.payload)
            self.fired += 1
        while not stop.wait(max(0.0, self.next_fire(self.wall_clock()) - self.wall_clock())):
            self.function.invoke_async(self.payload)
            self.fired += 1


def sqs_event(messages: list[ReceivedMessage], queue_arn: str) -> dict[str, Any]:
    """The event Lambda's SQS event source mapping sends, for these messages."""
    return {
        "Records": [
            {
                "messageId": m.message_id,
                "receiptHandle": m.receipt_handle,
                "body": m.body,
                "attributes": {"ApproximateReceiveCount": str(m.receive_count)},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": "us-east-1",
            }
            for m in messages
        ]
    }


@dataclass
class LocalSqsEventSource:
    consumer: SqsConsumer
    function: LocalFunction
    queue_arn: str = "arn:aws:sqs:us-east-1:000000000000:duetime-runs"
    batch_size: int = 10
    on_batch: Callable[[int, int], None] | None = None  # (messages, failures) per invocation

    def poll_once(self, wait_seconds: int = 1) -> int:
        if self.function.stopped:  # the mapping backs off while its function throttles: messages stay queued
            time.sleep(wait_seconds)
            return 0
        messages = self.consumer.receive(self.batch_size, wait_seconds)
        if not messages:
            return 0
        try:
            response = self.function.invoke(sqs_event(messages, self.queue_arn)) or {}
            failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
        except Exception:  # the invocation failed: the whole batch comes back after its visibility
            log.exception("worker invocation failed; its %d messages will be received again", len(messages))
            failed = {m.message_id for m in messages}
        done = [m.receipt_handle for m in messages if m.message_id not in failed]
        if done:
            self.consumer.delete(done)
        if self.on_batch:
            self.on_batch(len(messages), len(failed))
        return len(messages)

    def run(self, stop: threading.Event) -> None:
        poll_until(self.poll_once, stop)


def poll_until(poll_once: Callable[[], object], stop: threading.Event) -> None:
    """Receive and hand on batches until ``stop``; an error receiving (the queue endpoint went away, e.g.
    while shutting down) pauses a second, as the event source mapping backs off, and polling goes on."""
    while not stop.is_set():
        try:
            poll_once()
        except Exception:
            log.exception("receiving run messages failed")
            stop.wait(1)
