"""Running duetime on one machine against DynamoDB Local and LocalStack: what Lambda, EventBridge and the
SQS event source mapping do on AWS, done by threads (the same poller and worker code)."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from duetime.adapters.dynamodb.tables import TableNames, create_tables
from duetime.adapters.sqs import SqsConsumer, decode, ensure_queue
from duetime.poller import Poller
from duetime.poller_lease import PollerShift, invocation_id
from duetime.settings import Settings
from duetime.worker import Worker, WorkReport

log = logging.getLogger(__name__)


def ensure_resources(
    settings: Settings, dynamodb: Any, sqs: Any, queue_name: str = "duetime-runs"
) -> Settings:
    """Create the tables and the run queue if missing; return the settings with the queue URL."""
    create_tables(dynamodb, TableNames(settings.jobs_table, settings.runs_table, settings.control_table))
    visibility = settings.lease_seconds + 30
    url = settings.run_queue_url or ensure_queue(sqs, settings.run_queue_name, visibility_timeout=visibility)
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
    shift: PollerShift, mappings: list[EventSourceMapping], stop: threading.Event
) -> list[threading.Thread]:
    """Start the poller (one invocation that serves until ``stop``, holding the group's lease as a deployed
    poller does) and one thread per event source mapping; they end when ``stop`` is set."""
    threads = [
        threading.Thread(
            target=shift.serve,
            kwargs={
                "invocation": invocation_id(),
                "partitions": None,
                "run_seconds": None,
                "sleep": stop.wait,
                "stop": stop.is_set,
            },
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


LOCAL_ENDPOINTS = {
    "AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:8000",
    "AWS_ENDPOINT_URL_SQS": "http://127.0.0.1:4566",
    "AWS_ENDPOINT_URL_SNS": "http://127.0.0.1:4566",
    "AWS_ENDPOINT_URL_EVENTS": "http://127.0.0.1:4566",
}
EMULATORS_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "emulators.sh"


def local_environment() -> None:
    """Point boto3 at the local emulators (unless told otherwise) and allow loopback targets."""
    for name, value in {
        **LOCAL_ENDPOINTS,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "DUETIME_ALLOW_PRIVATE_TARGETS": "true",
    }.items():
        os.environ.setdefault(name, value)


def _answers(url: str) -> bool:
    parts = urlsplit(url)
    try:
        socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=1).close()
        return True
    except OSError:
        return False


def ensure_emulators() -> bool:
    """Start DynamoDB Local and LocalStack with the project's script when they do not answer.
    True when this call started them (and the caller should stop them)."""
    urls = [os.environ["AWS_ENDPOINT_URL_DYNAMODB"], os.environ["AWS_ENDPOINT_URL_SQS"]]
    if all(_answers(u) for u in urls):
        return False
    if not EMULATORS_SCRIPT.exists():
        raise RuntimeError(f"DynamoDB Local / LocalStack do not answer on {urls}; start them first")
    subprocess.run([str(EMULATORS_SCRIPT), "start"], check=True)
    return True


def run_local(port: int, workers: int) -> int:
    """``duetime local``: emulators, tables and queue, the API on ``port``, a poller and worker loops."""
    from duetime import api
    from duetime.adapters.alerts import StoredAlerts
    from duetime.adapters.clients import client
    from duetime.adapters.http_target import HttpTargetCaller
    from duetime.adapters.sqs import SqsRunQueue
    from duetime.errors import Conflict
    from duetime.local_gateway import LocalGateway
    from duetime.wiring import (
        lease_timings,
        make_job_service,
        make_store,
        make_store_clock,
        poller_config,
        worker_config,
    )

    local_environment()
    started = ensure_emulators()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        dynamodb, sqs = client("dynamodb"), client("sqs")  # after local_environment(): the emulators
        settings = ensure_resources(Settings.from_env(dict(os.environ)), dynamodb, sqs)
        store = make_store(settings, dynamodb)
        clock = make_store_clock(store)
        queue = SqsRunQueue(sqs, settings.run_queue_url)
        alerts = StoredAlerts(store)
        service = make_job_service(settings, store, sqs)
        try:
            team, token = service.create_team("dev", max_concurrency=50, exact_quota=1000)
            secret = team.signing_secret
        except Conflict:  # the emulators kept an earlier run's data: same team, a fresh token
            token = service.issue_token("dev")
            existing = service.catalog.get_team("dev")
            secret = existing.signing_secret if existing else None
        api.use_service(lambda: service)
        gateway = LocalGateway(api.handle, port).start()
        poller = Poller(store, store, queue, alerts, clock, poller_config(settings))
        shift = PollerShift(poller, store, lease_timings(settings), settings.poll_interval_seconds)
        mappings = [
            EventSourceMapping(
                SqsConsumer(sqs, settings.run_queue_url),
                Worker(
                    store,
                    store,
                    queue,
                    alerts,
                    HttpTargetCaller(allow_private=True),
                    clock,
                    worker_config(settings),
                ),
                on_report=_print_run,
            )
            for _ in range(workers)
        ]
        threads = start_threads(shift, mappings, stop)
        print(f"dev team signing secret: {secret}", flush=True)
        print(f"demo target: {gateway.url}/demo/target (calls: {gateway.url}/demo/calls)", flush=True)
        print(f"duetime local ready: api={gateway.url} token={token}", flush=True)
        try:
            while not stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            stop.set()
        print("duetime local: stopping", flush=True)
        gateway.shutdown()
        for thread in threads:
            thread.join(timeout=30)
        return 0
    finally:
        if started:
            subprocess.run([str(EMULATORS_SCRIPT), "stop"], check=False)


def _print_run(report: WorkReport) -> None:
    late = f", {report.start_lateness_seconds:.1f}s late" if report.start_lateness_seconds is not None else ""
    code = f" HTTP {report.status_code}" if report.status_code is not None else ""
    print(f"run {report.run_id} attempt {report.attempt}: {report.outcome.value}{code}{late}", flush=True)
