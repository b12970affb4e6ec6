"""Integration fixtures: real DynamoDB Local and LocalStack SQS (``make test`` starts both).

Each test gets its own tables and queue, so tests never see each other's rows or messages.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest

from duetime.adapters.aws.alerts import StoredAlerts
from duetime.adapters.aws.clients import new_client
from duetime.adapters.aws.sqs import SqsConsumer, SqsRunQueue, ensure_queue
from duetime.adapters.aws.store_clock import StoreClock
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.dynamodb.tables import TableNames, create_tables
from duetime.adapters.http_target import HttpTargetCaller
from duetime.domain.clock import Clock
from duetime.domain.ids import PARTITIONS
from duetime.domain.models import Job, Team
from duetime.execution.worker import Worker, WorkerConfig, WorkReport
from duetime.local.demo_target import DemoTargetServer
from duetime.local.system import LOCAL_ENDPOINTS, EventSourceMapping
from duetime.ports import TeamStore
from duetime.ports.queue import decode
from duetime.scheduling.poller import Poller, PollerConfig

from .. import emulators as emulators_at
from ..job_support import create_job

# Every integration module's clients talk to the emulators: set before any of them is built. LocalStack
# serves every service but DynamoDB (SNS, EventBridge, Step Functions, STS too), so that no test depends on
# one run before it on its xdist worker having pointed boto3 there (``local_environment`` does, when called).
DDB_URL = os.environ.setdefault("AWS_ENDPOINT_URL_DYNAMODB", emulators_at.DDB_URL)
SQS_URL = os.environ.setdefault("AWS_ENDPOINT_URL_SQS", emulators_at.SQS_URL)
for _endpoint in LOCAL_ENDPOINTS.keys() - {"AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS"}:
    os.environ.setdefault(_endpoint, emulators_at.SQS_URL)


@pytest.fixture(scope="session", autouse=True)
def emulators() -> None:
    emulators_at.require_emulators()


@dataclass
class Stack:
    dynamodb: Any
    sqs: Any
    names: TableNames
    queue_url: str
    store: DynamoStore
    clock: StoreClock
    queue: SqsRunQueue
    consumer: SqsConsumer
    alerts: StoredAlerts
    workers: list[Worker] = field(default_factory=list)

    def worker(
        self,
        config: WorkerConfig | None = None,
        clock: Clock | None = None,
        owner: str | None = None,
        store: DynamoStore | None = None,
    ) -> Worker:
        store = store or self.store
        return Worker(
            store,
            store,
            self.queue,
            self.alerts,
            HttpTargetCaller(allow_private=True),
            clock or self.clock,
            config or WorkerConfig(),
            owner=owner,
            deadlines=store,
        )

    def poller(self, clock: Clock | None = None, teams: TeamStore | None = None, **config: Any) -> Poller:
        """A poller on every partition; with ``teams``, jobs of disabled teams get no runs."""
        config.setdefault("partitions", list(range(PARTITIONS)))
        return Poller(
            self.store,
            self.store,
            self.queue,
            self.alerts,
            clock or self.clock,
            PollerConfig(**config),
            teams,
            deadlines=self.store,
        )

    def job_due_now(self, team: str, target_url: str, **spec: Any) -> Job:
        """A job whose first run is due about now: a 1-minute rate created a minute ago, exact."""
        body = {
            "name": "test job",
            "schedule": {"rate": "1 minute"},
            "target": {"url": target_url},
            "exact": True,
            **spec,
        }
        return create_job(self.store, team, body, self.clock.now() - timedelta(seconds=61))

    def drain(
        self, worker: Worker, until: Callable[[], bool], timeout: float = 30.0, poller: Poller | None = None
    ) -> list[WorkReport]:
        """Deliver queued messages to ``worker`` (and tick ``poller``) until ``until()`` or timeout."""
        reports: list[WorkReport] = []
        mapping = EventSourceMapping(self.consumer, worker, on_report=reports.append)
        deadline = time.monotonic() + timeout
        while not until():
            assert time.monotonic() < deadline, f"timed out; reports so far: {reports}"
            if poller is not None:
                poller.claim()
                poller.recover()
            mapping.poll_once(wait_seconds=1)
        assert not mapping.errors, mapping.errors
        return reports

    def messages(self) -> list[Any]:
        """Take every visible message off the queue (they are deleted)."""
        taken: list[Any] = []
        while True:
            batch = self.consumer.receive(10, wait_seconds=1)
            if not batch:
                return taken
            taken.extend(decode(m.body) for m in batch)
            self.consumer.delete([m.receipt_handle for m in batch])


@contextmanager
def hooked(client: Any, event: str, handler: Callable[..., None]) -> Iterator[None]:
    """``handler`` registered on ``client``'s botocore ``event`` for the block."""
    client.meta.events.register(event, handler)
    try:
        yield
    finally:
        client.meta.events.unregister(event, handler)


def new_clients() -> tuple[Any, Any]:
    """The clients duetime runs with (``adapters.clients``: the lean transport, AWS's limits enforced)."""
    return new_client("dynamodb"), new_client("sqs")


@pytest.fixture
def stack() -> Iterator[Stack]:
    prefix = f"t{uuid.uuid4().hex[:10]}"
    dynamodb, sqs = new_clients()
    names = TableNames(f"{prefix}-jobs", f"{prefix}-runs", f"{prefix}-control")
    create_tables(dynamodb, names)
    queue_url = ensure_queue(sqs, prefix, visibility_timeout=30)
    # Runs get their reap check a lease after their message (reap_checks); the workers here hold leases of
    # 2-3 s, so the check is the shortest of them, as a deployment sets both from ``Settings.lease_seconds``.
    store = DynamoStore(dynamodb, names, lease_check=timedelta(seconds=2))
    clock = StoreClock(dynamodb, sync=lambda: store.low_water_marks([0]))
    queue = SqsRunQueue(sqs, queue_url)
    s = Stack(
        dynamodb, sqs, names, queue_url, store, clock, queue, SqsConsumer(sqs, queue_url), StoredAlerts(store)
    )
    s.store.put_team(
        Team(team_id="team-a", max_concurrency=50, exact_quota=1_000_000, signing_secret="secret-a")
    )
    yield s
    for table in (names.jobs, names.runs, names.control):
        dynamodb.delete_table(TableName=table)
    sqs.delete_queue(QueueUrl=queue_url)
    sqs.delete_queue(QueueUrl=queue_url + "-dlq")


@pytest.fixture
def target() -> Iterator[DemoTargetServer]:
    server = DemoTargetServer().start()
    yield server
    server.shutdown()
    server.server_close()


def wait_until(predicate: Callable[[], bool], timeout: float = 15.0, every: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(every)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


from .api_support import alpha, beta, local_team, service  # noqa: E402, F401  (fixtures for the API test modules)
