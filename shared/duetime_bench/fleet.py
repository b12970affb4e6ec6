"""Workers in their own processes, as Lambda runs them: the poller's process does not share its
interpreter (and its lock) with them. Each process reports its runs, its requests and its CPU time."""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from duetime.adapters.dynamodb.tables import TableNames
from duetime.execution.worker import Worker, WorkerConfig, WorkReport

NICENESS = 10


@dataclass(frozen=True)
class FleetSpec:
    names: TableNames
    queue_url: str
    threads: int
    lease_seconds: float = 60.0
    heartbeat_seconds: float = 20.0
    queue_deadline_seconds: float = 600.0
    clock_skew_seconds: float = 0.0  # this process's own clock is wrong by this much
    dynamodb_fault_rate: float = 0.0
    seed: int = 0


def _work(spec: FleetSpec, reports: Any, stop: Any) -> None:
    from duetime.adapters.aws.clients import new_client
    from duetime.adapters.aws.sqs import SqsConsumer
    from duetime.adapters.dynamodb.store import DynamoStore
    from duetime.local.system import EventSourceMapping, local_environment
    from duetime_bench.accounting import Ledger

    local_environment()
    # On AWS the workers run on machines of their own; here they share two cores with the poller and the
    # emulators. A lower CPU priority keeps them from starving the poller's process (DynamoDB Local still
    # serves both, as one DynamoDB would).
    os.nice(NICENESS)
    dynamodb, sqs = new_client("dynamodb"), new_client("sqs")
    ledger = Ledger(spec.names)
    ledger.attach(dynamodb, "dynamodb")
    ledger.attach(sqs, "sqs")
    if spec.dynamodb_fault_rate:
        from duetime_bench.faults import Faults

        Faults(spec.seed, spec.dynamodb_fault_rate).attach_dynamodb(dynamodb)
    store = DynamoStore(dynamodb, spec.names)
    mappings = [
        EventSourceMapping(SqsConsumer(sqs, spec.queue_url), worker, on_report=reports.put)
        for worker in _workers(spec, dynamodb, sqs, store)
    ]
    _run_until_stopped([m.run for m in mappings], stop)
    reports.put(("done", ledger.snapshot(), time.process_time()))


def _workers(spec: FleetSpec, dynamodb: Any, sqs: Any, store: Any) -> list[Worker]:
    """``spec.threads`` workers on one store and one clock (this process's, off by its skew)."""
    from duetime.adapters.aws.alerts import StoredAlerts
    from duetime.adapters.aws.sqs import SqsRunQueue
    from duetime.adapters.aws.store_clock import StoreClock
    from duetime.adapters.http_target import HttpTargetCaller
    from duetime.execution.notifications import JobNotifier

    clock = StoreClock(
        dynamodb,
        local_time=lambda: time.time() + spec.clock_skew_seconds,
        sync=lambda: store.low_water_marks([0]),
    )
    clock.start_refining()
    worker_config = WorkerConfig(
        lease=timedelta(seconds=spec.lease_seconds),
        heartbeat=timedelta(seconds=spec.heartbeat_seconds),
        queue_deadline=timedelta(seconds=spec.queue_deadline_seconds),
        defer_seconds=1,
    )
    return [
        Worker(
            store,
            store,
            SqsRunQueue(sqs, spec.queue_url),
            JobNotifier(StoredAlerts(store), store, store),
            HttpTargetCaller(allow_private=True),
            clock,
            worker_config,
            deadlines=store,
        )
        for _ in range(spec.threads)
    ]


def _run_until_stopped(loops: list[Callable[[threading.Event], None]], stop: Any) -> None:
    """Each loop in a thread of its own until ``stop.value`` is set, then each told to end and joined."""
    done = threading.Event()
    threads = [threading.Thread(target=loop, args=(done,)) for loop in loops]
    for thread in threads:
        thread.start()
    while not stop.value:
        time.sleep(0.2)
    done.set()
    for thread in threads:
        thread.join(timeout=60)


class WorkerFleet:
    """Each process gets its own report queue and the stop flag is a plain shared byte: a process killed
    with SIGKILL can then corrupt nothing the others (or the parent) wait on."""

    def __init__(self, spec: FleetSpec, processes: int, specs: list[FleetSpec] | None = None) -> None:
        self._context = multiprocessing.get_context("spawn")
        self._stop = self._context.Value("b", 0, lock=False)
        self.specs = specs or [spec] * processes
        self._queues: list[Any] = []
        self._processes = [self._spawn(s) for s in self.specs]
        self.reports: list[WorkReport] = []
        self.usage: list[dict[str, Any]] = []
        self.cpu_seconds = 0.0
        self._expected_done = len(self._processes)

    def _spawn(self, spec: FleetSpec) -> Any:
        reports = self._context.Queue()
        self._queues.append(reports)
        return self._context.Process(target=_work, args=(spec, reports, self._stop), daemon=True)

    def start(self) -> None:
        for process in self._processes:
            process.start()

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._processes if p.pid is not None]

    def kill_and_replace(self, index: int) -> None:
        """SIGKILL one worker process mid-whatever-it-is-doing and start a fresh one in its place."""
        process = self._processes[index]
        if process.pid is not None:
            os.kill(process.pid, signal.SIGKILL)
        process.join(timeout=10)
        self._expected_done -= 1  # a killed process never reports its usage
        replacement = self._spawn(self.specs[index])
        replacement.start()
        self._processes[index] = replacement
        self._expected_done += 1

    def pause(self, index: int, seconds: float) -> None:
        """SIGSTOP one worker process for ``seconds`` (past its leases), then SIGCONT."""
        pid = self._processes[index].pid
        if pid is None:
            return
        os.kill(pid, signal.SIGSTOP)
        time.sleep(seconds)
        os.kill(pid, signal.SIGCONT)

    def collect(self) -> list[WorkReport]:
        """Move what the processes reported so far into ``reports``."""
        for reports in self._queues:
            while True:
                try:
                    item = reports.get_nowait()
                except (queue.Empty, OSError, EOFError):
                    break
                if isinstance(item, tuple) and item[0] == "done":
                    self.usage.append(item[1])
                    self.cpu_seconds += item[2]
                else:
                    self.reports.append(item)
        return self.reports

    def stop(self, grace_seconds: float = 90) -> None:
        """Tell the processes to take no more batches, and wait up to ``grace_seconds`` for each to finish
        its calls in flight and report its usage; a process still busy after that is killed, and the reports
        of the calls it had in flight are lost with it."""
        self._stop.value = 1
        deadline = time.monotonic() + grace_seconds
        while len(self.usage) < self._expected_done and time.monotonic() < deadline:
            self.collect()
            time.sleep(0.1)
        for process in self._processes:
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join(timeout=5)
        self.collect()
