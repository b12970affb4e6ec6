"""The local stack a benchmark runs on: its own tables and queue in DynamoDB Local + LocalStack (started
when none answers), the real poller and worker code, a sink target, and a ledger of every request."""

from __future__ import annotations

import subprocess
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from duetime.adapters.aws.alerts import StoredAlerts
from duetime.adapters.aws.clients import new_client
from duetime.adapters.aws.sqs import ConcurrentRunQueue, SqsRunQueue, ensure_queue
from duetime.adapters.aws.store_clock import StoreClock
from duetime.adapters.dynamodb.codec import job_to_item
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.dynamodb.tables import TableNames, create_tables
from duetime.adapters.retrying import UNPROCESSED, resend
from duetime.domain.ids import PARTITIONS, partition_of
from duetime.domain.models import Job, Team
from duetime.domain.timeutil import minute_bucket
from duetime.local.demo_target import DemoTargetServer
from duetime.local.system import EMULATORS_SCRIPT, ensure_emulators, local_environment
from duetime.scheduling.poller import Poller, PollerConfig, RecoveryReport, recover_runs
from duetime_bench.accounting import Ledger
from duetime_bench.fleet import FleetSpec, WorkerFleet

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_sqs.client import SQSClient

BENCH_TEAM = Team(team_id="bench", max_concurrency=10_000, exact_quota=1_000_000, signing_secret="bench")


@dataclass
class BenchStack:
    names: TableNames
    dynamodb: DynamoDBClient
    sqs: SQSClient
    queue_url: str
    store: DynamoStore
    clock: StoreClock
    ledger: Ledger
    sink: DemoTargetServer
    started_emulators: bool

    @classmethod
    def create(cls, lease_seconds: float = 60.0) -> BenchStack:
        """``lease_seconds``: the workers' lease, which also sets when the reaper first checks a run (as a
        deployment sets both from ``Settings.lease_seconds``)."""
        local_environment()
        started = ensure_emulators()
        prefix = f"bench{uuid.uuid4().hex[:8]}"
        names = TableNames(f"{prefix}-jobs", f"{prefix}-runs", f"{prefix}-control")
        dynamodb, sqs = new_client("dynamodb"), new_client("sqs")
        create_tables(dynamodb, names)
        queue_url = ensure_queue(sqs, prefix, visibility_timeout=120)
        ledger = Ledger(names)
        ledger.attach(dynamodb, "dynamodb")
        ledger.attach(sqs, "sqs")
        store = DynamoStore(dynamodb, names, lease_check=timedelta(seconds=lease_seconds))
        clock = StoreClock(dynamodb, sync=lambda: store.low_water_marks([0]))
        clock.start_refining()
        store.put_team(BENCH_TEAM)
        sink = DemoTargetServer().start()
        return cls(names, dynamodb, sqs, queue_url, store, clock, ledger, sink, started)

    def write_jobs(self, jobs: list[Job], now: datetime) -> None:
        """Bulk-load jobs (BatchWriteItem, 25 at a time) and give every partition its low-water mark."""
        for partition in range(PARTITIONS):
            self.store.ensure_low_water_mark(partition, minute_bucket(now))
        items = [job_to_item(job, now) for job in jobs]

        def send(request: dict[str, Any]) -> dict[str, Any]:  # what DynamoDB left unprocessed, if any
            return self.dynamodb.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}

        for start in range(0, len(items), 25):
            chunk = items[start : start + 25]
            resend(send, {self.names.jobs: [{"PutRequest": {"Item": item}} for item in chunk]}, UNPROCESSED)
        assert all(partition_of(j.id) < PARTITIONS for j in jobs)

    def poller(self) -> Poller:
        queue = ConcurrentRunQueue(SqsRunQueue(self.sqs, self.queue_url))
        config = PollerConfig(partitions=list(range(PARTITIONS)))
        return Poller(self.store, self.store, queue, StoredAlerts(self.store), self.clock, config)

    def settle_reap_checks(self, poller: Poller) -> RecoveryReport:
        """One pass of the reaper over every partition at the instant the first checks of all runs claimed so
        far have come (a lease from now; call it once the workers stopped). A run's check comes a lease after
        its claim, and a bench ends sooner: without this pass the reap index's reads and the reap tickets'
        deletes (``reap_tickets``) would be left off the bill the ledger counts."""
        at = self.clock.now() + self.store.lease_check + timedelta(seconds=1)
        return recover_runs(self.store, poller.queue, poller.alerts, poller.config, at)

    def fleet(self, processes: int, threads: int) -> WorkerFleet:
        return WorkerFleet(FleetSpec(self.names, self.queue_url, threads), processes)

    def close(self) -> None:
        self.clock.stop_refining()  # its probe reads the control table, deleted next
        self.sink.shutdown()
        for table in (self.names.jobs, self.names.runs, self.names.control):
            self.dynamodb.delete_table(TableName=table)
        self.sqs.delete_queue(QueueUrl=self.queue_url)
        self.sqs.delete_queue(QueueUrl=self.queue_url + "-dlq")
        if self.started_emulators:
            subprocess.run([str(EMULATORS_SCRIPT), "stop"], check=False)


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))]


def wait_until(predicate: Any, timeout: float, every: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every)
    return bool(predicate())
