"""`duetime bench runcpu`: the client CPU of one run's path, without the fixed cost of a second.

The spike's ``client_cpu_ms_per_run`` is every process's CPU over the spike divided by its runs, so it also
holds what the installation spends each second whatever it runs (64 partitions swept every second, workers
long-polling, clocks refined), spread over however many runs the emulators let through in those seconds.
This bench measures the path alone: N jobs due in one second, claimed by the real poller's sweeps
(``Poller.claim``), then worked by the real worker a batch of 10 at a time (``work_batch``: lease, slots,
call, record, free), one after the other in one thread of this process, each stage's process CPU divided by
its runs. The batch's receive and delete (the event source's part: on AWS, Lambda's own pollers) are
measured apart. The target answers from a process of its own; the clients carry no ledger (as on Lambda);
DynamoDB Local and LocalStack are what they are (their CPU is not the client's).
"""

from __future__ import annotations

import statistics
import time
from datetime import datetime, timedelta
from typing import Any, cast

from duetime.adapters.aws.alerts import StoredAlerts
from duetime.adapters.aws.aws_target_caller import Boto3AwsTargetCaller
from duetime.adapters.aws.clients import new_client
from duetime.adapters.aws.sqs import ConcurrentRunQueue, SqsConsumer, SqsRunQueue
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.http_target import HttpTargetCaller
from duetime.domain.ids import PARTITIONS
from duetime.domain.models import Job
from duetime.execution.run_batch import work_batch
from duetime.execution.worker import Worker
from duetime.heap import settle_heap
from duetime.local.demo_target import demo_target_process
from duetime.ports import JobStore
from duetime.scheduling.poller import Poller, PollerConfig
from duetime.settings import Settings
from duetime.wiring import worker_config
from duetime_bench.harness import BenchStack, wait_until
from duetime_bench.machine_speed import reference_cpu_ms
from duetime_bench.spike import spike_jobs

BATCH = 10  # the event source mapping's batch (StackConfig.worker_batch_size)


# what the runs call: the demo target over HTTP, or a LocalStack queue (an AWS target)
TARGETS = ("http", "sqs")


def run_cpu_calibrated(jobs: int, runs: int, save_calibration: bool) -> dict[str, Any]:
    """``runs`` runs of the HTTP path, each on a fresh stack, and their median as the midnight model's
    calibration (``bench.calibration``), saved beside that module with ``save_calibration``."""
    from duetime.capacity import calibration

    commit = calibration.current_commit()
    measured = [run_cpu(jobs) for _ in range(runs)]
    cal = calibration.from_runs(measured, source="bench runcpu", commit=commit)
    if save_calibration:
        calibration.save(cal)
    keys = (
        "poller_cpu_ms_per_run",
        "worker_cpu_ms_per_run",
        "client_cpu_ms_per_run",
        "machine_reference_cpu_ms",
    )
    medians = {f"median_{k}": round(statistics.median(r[k] for r in measured), 3) for k in keys}
    return {"runs": measured, **medians, "calibration": cal.summary(), "saved": save_calibration}


def run_cpu(jobs: int = 2000, target: str = "http") -> dict[str, Any]:
    """``target``: ``http`` calls the demo target in a process of its own; ``sqs`` sends each run's message
    to a queue of LocalStack's with the AWS target caller (no role: the local stack's way), so the figures
    tell what an AWS target's call costs the worker beside an HTTP one. ``machine_reference_cpu_ms``: this
    machine's speed at the time (``bench.machine_speed``), to compare figures of other days and hosts."""
    return _measure(jobs, target) | {"machine_reference_cpu_ms": reference_cpu_ms()}


def _measure(jobs: int, target: str) -> dict[str, Any]:
    stack = BenchStack.create()
    try:
        if target == "sqs":
            sqs = new_client("sqs")
            queue_url = sqs.create_queue(QueueName=f"{stack.names.jobs}-target")["QueueUrl"]
            try:
                spec = {"type": "sqs", "queue_url": queue_url, "message": "bench"}
                figures = _run_cpu(stack, jobs, spec)
                attributes = sqs.get_queue_attributes(
                    QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"]
                )["Attributes"]
                sent = int(attributes["ApproximateNumberOfMessages"])  # what the runs' calls enqueued
                return {"target": target, **figures, "target_messages": sent}
            finally:
                sqs.delete_queue(QueueUrl=queue_url)
        with demo_target_process() as target_url:
            return {"target": target, **_run_cpu(stack, jobs, target_url)}
    finally:
        stack.close()


def _run_cpu(stack: BenchStack, jobs: int, target: str | dict[str, Any]) -> dict[str, Any]:
    now = stack.clock.now()
    due = (now + timedelta(seconds=jobs / 500 + 5)).replace(microsecond=0)
    stack.write_jobs(first_due_at(spike_jobs(jobs, due, 0, 1.0, target, now), due), now)
    # No ledger's hooks and no strict-limits check (the emulators' stand-in for AWS's refusals): what a
    # Lambda runs.
    dynamodb, sqs = new_client("dynamodb", strict_limits=False), new_client("sqs", strict_limits=False)
    store = DynamoStore(dynamodb, stack.names)
    config = PollerConfig(partitions=list(range(PARTITIONS)), preload_lead=None)  # sweeps claim it all
    queue = ConcurrentRunQueue(SqsRunQueue(sqs, stack.queue_url))
    reads = TimedDueReads(store)
    poller = Poller(cast(JobStore, reads), store, queue, StoredAlerts(store), stack.clock, config)
    warmed = poller.claim()  # warm, as a poller is by its minute: clients, connections, the first sweep
    if warmed.runs_created:
        raise RuntimeError(f"{warmed.runs_created} jobs fell due while they were written: raise their lead")
    reads.cpu_s = reads.rows = 0
    wait_until(lambda: stack.clock.now() >= due + timedelta(seconds=1), timeout=300, every=0.2)
    settle_heap()  # as the poller's handler does once wired (``duetime.heap``)

    cpu = time.process_time()
    claimed = sweeps = 0
    while claimed < jobs and sweeps < 100:
        claimed += poller.claim().runs_created
        sweeps += 1
    poller_cpu = time.process_time() - cpu

    worker = Worker(
        store,
        store,
        SqsRunQueue(sqs, stack.queue_url),
        StoredAlerts(store),
        HttpTargetCaller(allow_private=True),
        stack.clock,
        worker_config(Settings()),  # the deployed defaults: 60 s leases, 20 s heartbeats
        aws_caller=Boto3AwsTargetCaller(require_role=False),
    )
    consumer = SqsConsumer(sqs, stack.queue_url)
    settle_heap()  # as the handlers do once wired (``duetime.heap``)
    worked = empty = batches = 0
    worker_cpu = event_source_cpu = worker_wall = 0.0
    while worked < claimed and empty < 5:
        cpu = time.process_time()
        messages = consumer.receive(BATCH)
        event_source_cpu += time.process_time() - cpu
        if not messages:
            empty += 1
            continue
        cpu, wall = time.process_time(), time.perf_counter()
        outcome = work_batch(worker, [(m.message_id, m.body) for m in messages])
        worker_cpu += time.process_time() - cpu
        worker_wall += time.perf_counter() - wall
        failed = set(outcome.failed)
        cpu = time.process_time()
        consumer.delete([m.receipt_handle for m in messages if m.message_id not in failed])
        event_source_cpu += time.process_time() - cpu
        worked += len(messages)
        batches += 1
    figures = run_cpu_figures(
        jobs, claimed, sweeps, poller_cpu, worked, batches, worker_cpu, event_source_cpu
    )
    # What Lambda would bill of each batch here: its wall time (the calls, DynamoDB Local's and the demo
    # target's answers, the CPU), one thread of a process with nothing else running.
    figures["worker_wall_ms_per_batch"] = round(worker_wall * 1000 / max(1, batches), 2)
    return figures | poller_split(reads, poller_cpu, claimed)


def first_due_at(jobs: list[Job], due: datetime) -> list[Job]:
    """The jobs (daily crons) with their first run put at ``due``, a second a few seconds ahead: the bench
    waits seconds for its runs, not up to a minute for a cron's next minute, and each claim still moves its
    job on by the cron (the next day), as a claim of a cron job does."""
    state = {"next_nominal_at": due, "next_fire_at": due}
    return [job.model_copy(update={"state": job.state.model_copy(update=state)}) for job in jobs]


class TimedDueReads:
    """The poller's jobs port, timing the CPU of its due-index reads (``due_jobs``: the Query, its pages
    parsed into jobs) apart from the rest of the claim; everything else goes to the store as it is."""

    def __init__(self, store: DynamoStore) -> None:
        self._store = store
        self.cpu_s = 0.0
        self.rows = 0

    def due_jobs(self, *args: Any, **kwargs: Any) -> Any:
        cpu = time.process_time()
        jobs = self._store.due_jobs(*args, **kwargs)
        self.cpu_s += time.process_time() - cpu
        self.rows += len(jobs)
        return jobs

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def poller_split(reads: TimedDueReads, poller_cpu_s: float, claimed: int) -> dict[str, float]:
    """The poller's CPU a run in two parts, as the midnight model charges them: reading a due row, and the
    rest of its claim (planning, the writes, the SQS send)."""
    return {
        "poller_read_cpu_us_per_row": round(reads.cpu_s * 1e6 / max(1, reads.rows), 1),
        "poller_claim_cpu_us_per_run": round((poller_cpu_s - reads.cpu_s) * 1e6 / max(1, claimed), 1),
    }


def run_cpu_figures(
    jobs: int,
    claimed: int,
    sweeps: int,
    poller_cpu_s: float,
    worked: int,
    batches: int,
    worker_cpu_s: float,
    event_source_cpu_s: float,
) -> dict[str, Any]:
    """Per run: the poller's CPU, the worker function's (``work_batch``: what a Lambda invocation runs), and
    the event source's (receiving and deleting the batch's messages: on AWS the event source mapping's own
    pollers do that, outside the function). ``client_cpu_ms_per_run`` is poller + worker function, the CPU
    duetime's Lambda functions spend; ``..._with_event_source`` adds the receive and delete."""
    poller_ms = poller_cpu_s * 1000 / max(1, claimed)
    worker_ms = worker_cpu_s * 1000 / max(1, worked)
    event_source_ms = event_source_cpu_s * 1000 / max(1, worked)
    return {
        "jobs": jobs,
        "runs_claimed": claimed,
        "sweeps": sweeps,
        "runs_worked": worked,
        "batches": batches,
        "poller_cpu_ms_per_run": round(poller_ms, 3),
        "worker_cpu_ms_per_run": round(worker_ms, 3),
        "event_source_cpu_ms_per_run": round(event_source_ms, 3),
        "client_cpu_ms_per_run": round(poller_ms + worker_ms, 3),
        "client_cpu_ms_per_run_with_event_source": round(poller_ms + worker_ms + event_source_ms, 3),
    }
