"""A worker's heartbeat outlives failed lease extensions, on DynamoDB Local with the store's clock and real
waits (tests/unit/test_loops_resilience.py has the same on moto with a manual clock)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from duetime.adapters.dynamodb.store import DynamoStore
from duetime.domain.models import RunStatus
from duetime.execution.worker import WorkerConfig, WorkOutcome

from .conftest import Stack


class FailingExtensions:
    """The store, except that its first ``failures`` lease extensions raise (a connection reset)."""

    def __init__(self, store: DynamoStore, failures: int) -> None:
        self.store = store
        self.failures = failures

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def extend_leases(
        self, attempts: Sequence[tuple[str, int]], owner: str, now: datetime, until: datetime
    ) -> set[str]:
        if self.failures:
            self.failures -= 1
            raise ConnectionResetError("connection reset by peer")
        return self.store.extend_leases(attempts, owner, now, until)


def test_two_failed_heartbeats_neither_lose_the_lease_nor_repeat_the_run(stack: Stack, target) -> None:
    stack.job_due_now("team-a", target.url + "?sleep=6")  # a call longer than the lease
    assert stack.poller().claim().runs_created == 1
    [message] = stack.messages()
    config = WorkerConfig(
        lease=timedelta(seconds=4), heartbeat=timedelta(seconds=1), heartbeat_retry=timedelta(seconds=0.2)
    )
    worker = stack.worker(config, store=FailingExtensions(stack.store, failures=2))

    # Meanwhile a reaper looks for lapsed leases, as the pollers do.
    reaper, done, reaped = stack.poller(), threading.Event(), []

    def reap() -> None:
        while not done.wait(0.25):
            reaped.append(reaper.recover())

    watching = threading.Thread(target=reap)
    watching.start()
    try:
        report = worker.process(message)
    finally:
        done.set()
        watching.join()

    assert report.outcome is WorkOutcome.SUCCEEDED and report.heartbeat_errors == 2
    assert reaped and sum(r.leases_expired for r in reaped) == 0
    assert len(target.recorder.keyed(message.run_id)) == 1 and stack.messages() == []
    run = stack.store.get_run(message.run_id)
    assert run is not None and run.status is RunStatus.SUCCEEDED and run.attempt == 1
