"""Running duetime on one machine against DynamoDB Local and LocalStack: the handlers in ``functions/``,
invoked as API Gateway, EventBridge and the SQS event source mapping invoke them on AWS (``local_lambda``),
by threads of this process."""

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
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from duetime.adapters.aws.sqs import SqsConsumer, ensure_queue
from duetime.adapters.dynamodb.tables import TableNames, create_tables
from duetime.execution.run_batch import work_batch
from duetime.execution.worker import Worker, WorkReport
from duetime.local.lambda_sandbox import (
    LocalFunction,
    LocalScheduleRule,
    LocalSqsEventSource,
    RegisteredPollerStarter,
    poll_until,
    register,
)
from duetime.settings import Settings

if TYPE_CHECKING:
    from duetime.api.service import JobService

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
    """SQS -> a ``Worker`` object, batch by batch as Lambda's event source mapping feeds the worker function:
    successes deleted, failures left to reappear after the visibility timeout. Tests and benchmarks use it to
    drive a worker they built (their clock, config, owner); ``duetime local`` goes through the worker
    function itself (``local_lambda.LocalSqsEventSource``)."""

    consumer: SqsConsumer
    worker: Worker
    on_report: Callable[[WorkReport], None] | None = None
    errors: list[BaseException] = field(default_factory=list)

    def poll_once(self, wait_seconds: int = 1) -> int:
        messages = self.consumer.receive(10, wait_seconds)
        if not messages:
            return 0
        outcome = work_batch(self.worker, [(message.message_id, message.body) for message in messages])
        self.errors.extend(outcome.errors)  # a failed record stays on the queue (partial batch failure)
        failed = set(outcome.failed)
        done = [message.receipt_handle for message in messages if message.message_id not in failed]
        if self.on_report:
            for report in outcome.reports:
                self.on_report(report)
        if done:
            self.consumer.delete(done)
        return len(messages)

    def run(self, stop: threading.Event) -> None:
        poll_until(self.poll_once, stop)


LOCAL_ENDPOINTS = {
    "AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:8000",
    "AWS_ENDPOINT_URL_SQS": "http://127.0.0.1:4566",
    "AWS_ENDPOINT_URL_SNS": "http://127.0.0.1:4566",
    # AWS targets (boto3 names each variable by the service's id: EVENTBRIDGE, SFN), and their roles
    "AWS_ENDPOINT_URL_EVENTBRIDGE": "http://127.0.0.1:4566",
    "AWS_ENDPOINT_URL_SFN": "http://127.0.0.1:4566",
    "AWS_ENDPOINT_URL_STS": "http://127.0.0.1:4566",
}
EMULATORS_SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "emulators.sh"


def local_environment() -> None:
    """Point boto3 at the local emulators (unless told otherwise) and allow loopback targets."""
    for name, value in {
        **LOCAL_ENDPOINTS,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "DUETIME_ALLOW_PRIVATE_TARGETS": "true",
        "DUETIME_AWS_TARGETS_WITHOUT_ROLE": "true",
        "DUETIME_AWS_ROLE_TRUST_UNCHECKED": "true",  # LocalStack's STS lets any external id in
        # The handlers run as on Lambda, minus what needs AWS: no X-Ray daemon here, and metrics (EMF
        # lines on stdout, which CloudWatch reads on AWS) would drown the console.
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_DISABLED": "true",
    }.items():
        os.environ.setdefault(name, value)


def _answers(url: str) -> bool:
    parts = urlsplit(url)
    try:
        socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=1).close()
        return True
    except OSError:
        return False


def ensure_emulators(keep_tables: bool = False) -> bool:
    """Start DynamoDB Local and LocalStack with the project's script when they do not answer; with
    ``keep_tables`` (``duetime local``), DynamoDB Local's tables on disk (``local_data``), else in memory (the
    benchmarks and drills, whose figures are measured so). True when this call started them (and the caller
    should stop them)."""
    urls = [os.environ["AWS_ENDPOINT_URL_DYNAMODB"], os.environ["AWS_ENDPOINT_URL_SQS"]]
    if all(_answers(u) for u in urls):
        return False
    if not EMULATORS_SCRIPT.exists():
        raise RuntimeError(f"DynamoDB Local / LocalStack do not answer on {urls}; start them first")
    kept = local_data() if keep_tables else {"DUETIME_DDB_DATA": ""}
    subprocess.run([str(EMULATORS_SCRIPT), "start"], check=True, env={**os.environ, **kept})
    return True


def local_data() -> dict[str, str]:
    """Where the DynamoDB Local that ``duetime local`` starts keeps its tables: ``DUETIME_DDB_DATA``, else
    ``auto`` (``<cache>/local-data/<its name>``, ``scripts/emulators.sh``), so jobs and runs survive a
    restart."""
    return {"DUETIME_DDB_DATA": os.environ.get("DUETIME_DDB_DATA") or "auto"}


# The stack's defaults (infra/cdk): four partition groups, one poller rule each, invocations of 135 s under
# a 150 s timeout; the worker's timeout is 15 minutes.
LOCAL_PARTITION_GROUPS = ("0-15", "16-31", "32-47", "48-63")
POLLER_RUN_SECONDS = 135
POLLER_TIMEOUT_SECONDS = 150
WORKER_TIMEOUT_SECONDS = 900
RECONCILER_TIMEOUT_SECONDS = 60


def run_local(port: int, workers: int) -> int:
    """``duetime local``: emulators, tables and queue, and the three handlers run as AWS runs them: the api
    function behind a local gateway; a ``rate(1 minute)`` rule per partition group invoking the poller
    function (135 s invocations that overlap and hand the group's lease over); ``workers`` SQS event source
    pollers invoking the worker function with batches of ten (``duetime.local.lambda_sandbox``)."""
    from duetime.adapters.aws.clients import client
    from duetime.local.gateway import LocalGateway
    from duetime.wiring import make_job_service, make_store

    local_environment()
    started = ensure_emulators(keep_tables=True)
    stop = _stop_on_signals()
    try:
        dynamodb, sqs = client("dynamodb"), client("sqs")  # after local_environment(): the emulators
        settings = _handlers_settings(dynamodb, sqs)
        token, secret = _dev_team(make_job_service(settings, make_store(settings, dynamodb), sqs))
        api_function = LocalFunction("api", timeout_seconds=29)
        gateway = LocalGateway(api_function.as_api_handler, port).start()
        rules, threads = _start_triggers(settings, sqs, workers, stop)
        _print_ready(gateway.url, rules, token, secret)
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


def _stop_on_signals() -> threading.Event:
    """An event that TERM and Ctrl-C (INT) set, also when INT came ignored from the parent (a shell without
    job control starts background commands so, and Python then leaves Ctrl-C ignored rather than
    KeyboardInterrupt)."""
    stop = threading.Event()
    for stopping in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stopping, lambda *_: stop.set())
    return stop


def _handlers_settings(dynamodb: Any, sqs: Any) -> Settings:
    """Create the tables and the run queue if missing, and give the handlers their settings in the
    environment, as on AWS."""
    settings = ensure_resources(Settings.from_env(dict(os.environ)), dynamodb, sqs)
    os.environ["DUETIME_RUN_QUEUE_URL"] = settings.run_queue_url
    os.environ["DUETIME_POLLER_FUNCTION_NAME"] = "local:poller"  # the API wakes quiet groups through it
    from duetime import wiring

    wiring.use_in_process_starter(RegisteredPollerStarter)
    os.environ["DUETIME_POLLER_GROUPS"] = ";".join(LOCAL_PARTITION_GROUPS)
    os.environ["DUETIME_POLLER_RUN_SECONDS"] = str(POLLER_RUN_SECONDS)
    return settings


def _dev_team(service: JobService) -> tuple[str, str | None]:
    """The ``dev`` team's API token and signing secret: a new team, or the one the emulators kept from an
    earlier run (same team, a fresh token)."""
    from duetime.domain.errors import Conflict

    try:
        team, token = service.create_team("dev", max_concurrency=50, exact_quota=1000)
        return token, team.signing_secret
    except Conflict:
        token = service.issue_token("dev")
        existing = service.catalog.get_team("dev")
        return token, existing.signing_secret if existing else None


def _start_triggers(
    settings: Settings, sqs: Any, workers: int, stop: threading.Event
) -> tuple[list[LocalScheduleRule], list[threading.Thread]]:
    """Start what invokes the poller and worker functions until ``stop``: a ``rate(1 minute)`` rule per
    partition group, and ``workers`` SQS event sources; the rules, and the threads that run them all."""
    poller = register(LocalFunction("poller", timeout_seconds=POLLER_TIMEOUT_SECONDS))
    rules = [
        LocalScheduleRule(poller, {"partitions": group, "run_seconds": POLLER_RUN_SECONDS})
        for group in LOCAL_PARTITION_GROUPS
    ]
    # The reconciler, every minute as on AWS: its reports, kept in the control table, are what
    # `duetime system alarms --local` evaluates the alarms over.
    reconciler = LocalScheduleRule(
        register(LocalFunction("reconciler", timeout_seconds=RECONCILER_TIMEOUT_SECONDS)), {}
    )
    worker = register(LocalFunction("worker", timeout_seconds=WORKER_TIMEOUT_SECONDS))
    sources = [
        LocalSqsEventSource(SqsConsumer(sqs, settings.run_queue_url), worker, on_batch=_print_batch)
        for _ in range(workers)
    ]
    threads = [
        *(threading.Thread(target=r.run, args=(stop,), name="eventbridge", daemon=True) for r in rules),
        threading.Thread(target=reconciler.run, args=(stop,), name="eventbridge-reconciler", daemon=True),
        *(threading.Thread(target=s.run, args=(stop,), name="sqs-esm", daemon=True) for s in sources),
    ]
    for thread in threads:
        thread.start()
    return rules, threads


def _print_ready(url: str, rules: list[LocalScheduleRule], token: str, secret: str | None) -> None:
    seconds = ", ".join(
        f"{g} at :{r.second_of_minute:04.1f}" for g, r in zip(LOCAL_PARTITION_GROUPS, rules, strict=True)
    )
    print(f"poller rules (rate 1 minute, {POLLER_RUN_SECONDS} s invocations): {seconds}", flush=True)
    print(f"dev team signing secret: {secret}", flush=True)
    print(f"demo target: {url}/demo/target (calls: {url}/demo/calls)", flush=True)
    print(f"duetime console: {url}/console/", flush=True)
    print(f"duetime local ready: api={url} token={token}", flush=True)


def _print_batch(messages: int, failures: int) -> None:
    failed = f", {failures} back to the queue" if failures else ""
    print(f"worker: a batch of {messages} run message(s){failed}", flush=True)
