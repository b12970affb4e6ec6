"""Workers in their own processes, as Lambda runs them: the poller's process does not share its
interpreter (and its lock) with them. Each process reports its runs, its requests and its CPU time."""

from __future__ import annotations

import multiprocessing
import os
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

from duetime.adapters.dynamodb.tables import TableNames
from duetime.worker import WorkReport

NICENESS = 10


@dataclass(frozen=True)
class FleetSpec:
    names: TableNames
    queue_url: str
    threads: int


def _work(spec: FleetSpec, reports: Any, stop: Any) -> None:
    from duetime.adapters.alerts import StoredAlerts
    from duetime.adapters.clients import new_client
    from duetime.adapters.dynamodb.store import DynamoStore
    from duetime.adapters.http_target import HttpTargetCaller
    from duetime.adapters.sqs import SqsConsumer, SqsRunQueue
    from duetime.adapters.store_clock import StoreClock
    from duetime.bench.accounting import Ledger
    from duetime.local import EventSourceMapping, local_environment
    from duetime.worker import Worker, WorkerConfig

    local_environment()
    # On AWS the workers run on machines of their own; here they share two cores with the poller and the
    # emulators. A lower CPU priority keeps them from starving the poller's process (DynamoDB Local still
    # serves both, as one DynamoDB would).
    os.nice(NICENESS)
    dynamodb, sqs = new_client("dynamodb"), new_client("sqs")
    ledger = Ledger(spec.names)
    ledger.attach(dynamodb, "dynamodb")
    ledger.attach(sqs, "sqs")
    store = DynamoStore(dynamodb, spec.names)
    clock = StoreClock(dynamodb, sync=lambda: store.low_water_marks([0]))
    done = threading.Event()
    mappings = [
        EventSourceMapping(
            SqsConsumer(sqs, spec.queue_url),
            Worker(
                store,
                store,
                SqsRunQueue(sqs, spec.queue_url),
                StoredAlerts(store),
                HttpTargetCaller(allow_private=True),
                clock,
                WorkerConfig(),
            ),
            on_report=reports.put,
        )
        for _ in range(spec.threads)
    ]
    threads = [threading.Thread(target=m.run, args=(done,)) for m in mappings]
    for thread in threads:
        thread.start()
    while not stop.wait(0.2):
        pass
    done.set()
    for thread in threads:
        thread.join(timeout=60)
    reports.put(("done", ledger.snapshot(), time.process_time()))


class WorkerFleet:
    def __init__(self, spec: FleetSpec, processes: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._reports = context.Queue()
        self._stop = context.Event()
        self._processes = [
            context.Process(target=_work, args=(spec, self._reports, self._stop), daemon=True)
            for _ in range(processes)
        ]
        self.reports: list[WorkReport] = []
        self.usage: list[dict[str, Any]] = []
        self.cpu_seconds = 0.0

    def start(self) -> None:
        for process in self._processes:
            process.start()

    def collect(self) -> list[WorkReport]:
        """Move what the processes reported so far into ``reports``."""
        while True:
            try:
                item = self._reports.get_nowait()
            except queue.Empty:
                return self.reports
            if isinstance(item, tuple) and item[0] == "done":
                self.usage.append(item[1])
                self.cpu_seconds += item[2]
            else:
                self.reports.append(item)

    def stop(self) -> None:
        self._stop.set()
        deadline = time.monotonic() + 90
        while len(self.usage) < len(self._processes) and time.monotonic() < deadline:
            self.collect()
            time.sleep(0.1)
        for process in self._processes:
            process.join(timeout=5)
        self.collect()
