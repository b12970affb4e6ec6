"""Faults injected through botocore hooks and a queue wrapper, reproducibly from a seed."""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from botocore.awsrequest import AWSResponse, HTTPHeaders

from duetime.ports import RunMessage, RunQueue

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient


class _Body:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Any:
        yield self.data


def _headers() -> HTTPHeaders:
    headers = HTTPHeaders()
    headers["x-amzn-RequestId"] = "chaos"
    headers["Content-Type"] = "application/x-amz-json-1.0"
    return headers


class Faults:
    """Counts what it injects. Thread-safe; one per process."""

    def __init__(self, seed: int, dynamodb_rate: float = 0.0) -> None:
        self.rng = random.Random(seed)
        self.dynamodb_rate = dynamodb_rate
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.enabled = True

    def chance(self, rate: float) -> bool:
        with self.lock:
            return self.enabled and self.rng.random() < rate

    def count(self, kind: str) -> None:
        with self.lock:
            self.counts[kind] += 1

    def attach_dynamodb(self, client: DynamoDBClient) -> None:
        """A fraction of DynamoDB calls answer with throttling or a 500 before reaching the emulator; the
        SDK's retries must carry the code through."""
        # A before-send handler answers in place of the emulator by returning a response (botocore uses the
        # first one given); botocore-stubs types every handler as returning None.
        client.meta.events.register("before-send.dynamodb", self._dynamodb_fault)  # type: ignore[arg-type]

    def _dynamodb_fault(self, request: Any, **_: Any) -> AWSResponse | None:
        if not self.chance(self.dynamodb_rate):
            return None
        if self.chance(0.5) or not self.enabled:
            self.count("dynamodb_throttle")
            body = b'{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"injected"}'
            return AWSResponse(request.url, 400, _headers(), _Body(body))
        self.count("dynamodb_5xx")
        body = b'{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"injected"}'
        return AWSResponse(request.url, 500, _headers(), _Body(body))


def attach_claim_cut(faults: Faults, client: DynamoDBClient, jobs_table: str, rate: float) -> None:
    """Now and then the poller 'dies' between the two steps of a claim: its run rows are written, its
    schedule moves are not (the request that would move them raises ``PollerCrash``). The next claim of
    those jobs must find the rows in its way, move the schedules and send the runs."""

    def cut(params: dict[str, Any], **_: Any) -> None:
        statements = params.get("Statements") or []
        moves = statements and statements[0].get("Statement", "").startswith(f'UPDATE "{jobs_table}"')
        if moves and faults.chance(rate):
            faults.count("poller_killed_between_claim_steps")
            raise PollerCrash("injected: the poller died between its run rows and its schedule moves")

    client.meta.events.register("provide-client-params.dynamodb.BatchExecuteStatement", cut)


class PollerCrash(BaseException):
    """The poller process 'dies' right after a claim committed, before its messages were sent. A
    ``BaseException``, like ``SystemExit``: the poller loop survives errors (``except Exception``), but
    not its own death, which is what this fault stands for."""


class FaultyQueue:
    """Wraps the run queue: some messages are sent twice, some never, and now and then the poller dies
    between its claim and the send."""

    def __init__(
        self, inner: RunQueue, faults: Faults, duplicate_rate: float, drop_rate: float, crash_rate: float
    ) -> None:
        self.inner = inner
        self.faults = faults
        self.duplicate_rate = duplicate_rate
        self.drop_rate = drop_rate
        self.crash_rate = crash_rate

    def send(self, messages: Sequence[RunMessage], delay_seconds: int = 0) -> None:
        if messages and self.faults.chance(self.crash_rate):
            self.faults.count("poller_killed_mid_claim")
            raise PollerCrash("injected: the poller died after claiming")
        out: list[RunMessage] = []
        for message in messages:
            if self.faults.chance(self.drop_rate):
                self.faults.count("sqs_dropped")
                continue
            out.append(message)
            if self.faults.chance(self.duplicate_rate):
                self.faults.count("sqs_duplicated")
                out.append(message)
        if out:
            self.inner.send(out, delay_seconds)
