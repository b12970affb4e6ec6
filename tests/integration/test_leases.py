"""Leases under failure: a killed worker, a skewed clock, and the team concurrency cap."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta

from duetime.adapters.aws.store_clock import StoreClock
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.domain.ids import partition_of, split_run_id
from duetime.domain.models import RunStatus, Team
from duetime.execution.worker import WorkerConfig, WorkOutcome
from duetime.local.system import EventSourceMapping
from duetime.ports import ReapCandidate

from ..lambda_support import ROOT
from .conftest import Stack, new_clients, wait_until
from .test_worker import FAST, claim_one


def test_a_worker_killed_mid_run_is_replaced_and_the_retry_carries_the_same_idempotency_key(
    stack: Stack, target
) -> None:
    run_id = claim_one(stack, target.url + "?sleep=60&slow_attempt=1")
    env = {
        **os.environ,
        "DUETIME_JOBS_TABLE": stack.names.jobs,
        "DUETIME_RUNS_TABLE": stack.names.runs,
        "DUETIME_CONTROL_TABLE": stack.names.control,
        "DUETIME_RUN_QUEUE_URL": stack.queue_url,
        "DUETIME_LEASE_SECONDS": "2",
        "DUETIME_HEARTBEAT_SECONDS": "0.5",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    doomed = subprocess.Popen([sys.executable, "-m", "tests.integration.worker_process"], cwd=ROOT, env=env)
    try:
        wait_until(lambda: len(target.recorder.keyed(run_id)) == 1, timeout=30)
        time.sleep(1.5)  # it heartbeats while the call hangs...
        assert stack.store.get_run(run_id).status is RunStatus.RUNNING  # type: ignore[union-attr]
    finally:
        doomed.send_signal(signal.SIGKILL)  # ...then dies mid-call
        doomed.wait()
    poller = stack.poller()
    wait_until(lambda: poller.recover().leases_expired == 1, timeout=10, every=0.5)
    reports = stack.drain(stack.worker(FAST), lambda: len(target.recorder.keyed(run_id)) == 2)
    assert [r.outcome for r in reports] == [WorkOutcome.SUCCEEDED]
    first, second = target.recorder.keyed(run_id)
    assert first.headers["idempotency-key"] == second.headers["idempotency-key"] == run_id
    assert (first.headers["x-duetime-attempt"], second.headers["x-duetime-attempt"]) == ("1", "2")
    run = stack.store.get_run(run_id)
    assert run is not None and run.status is RunStatus.SUCCEEDED and run.attempt == 2


def skewed(stack: Stack, seconds: float) -> tuple[DynamoStore, StoreClock, float]:
    dynamodb, _ = new_clients()
    store = DynamoStore(dynamodb, stack.names)
    clock = StoreClock(
        dynamodb, local_time=lambda: time.time() + seconds, sync=lambda: store.low_water_marks([0])
    )
    return store, clock, seconds


def test_a_worker_whose_clock_is_off_by_five_minutes_can_neither_steal_nor_keep_a_lease(
    stack: Stack,
) -> None:
    run_id = claim_one(stack, "http://127.0.0.1:1024/unused")
    partition = partition_of(split_run_id(run_id)[0])
    slow_store, slow_clock, _ = skewed(stack, -300)  # worker A: its clock is 5 minutes behind
    fast_store, fast_clock, _ = skewed(stack, +300)  # worker/poller B: 5 minutes ahead
    real = datetime.now(UTC)
    assert abs((slow_clock.now() - real).total_seconds()) < 2.5  # both read the store's time
    assert abs((fast_clock.now() - real).total_seconds()) < 2.5

    now_a = slow_clock.now()
    assert slow_store.acquire_lease(run_id, 1, "worker-a", now_a, now_a + timedelta(seconds=3)) is not None

    # B cannot steal it: by the store's clock the lease is alive, whatever B's own clock says.
    assert fast_store.runs_needing_attention(partition, fast_clock.now(), 10) == []
    candidate = ReapCandidate(run_id, RunStatus.RUNNING, 1, 4, now_a)
    assert fast_store.requeue_expired_lease(candidate, fast_clock.now(), fast_clock.now()) is None

    time.sleep(3.5)
    # A cannot keep it: its heartbeat after expiry is refused, though A's own clock says 5 minutes remain.
    now_a = slow_clock.now()
    assert not slow_store.extend_lease(run_id, 1, "worker-a", now_a, now_a + timedelta(seconds=60))
    # Had A used its own clock, the heartbeat would have kept the dead lease alive: the danger is real.
    own_clock_a = datetime.fromtimestamp(time.time() - 300, UTC)
    assert slow_store.extend_lease(run_id, 1, "worker-a", own_clock_a, own_clock_a + timedelta(seconds=1))


def test_team_cap_holds_with_100_slow_jobs_and_other_teams_are_not_slowed(stack: Stack, target) -> None:
    stack.store.put_team(Team(team_id="team-b", max_concurrency=5))
    stack.store.put_team(Team(team_id="team-c", max_concurrency=50))
    for _ in range(100):
        stack.job_due_now("team-b", target.url + "?sleep=0.3&group=team-b")
    for _ in range(10):
        stack.job_due_now("team-c", target.url + "?group=team-c")
    assert stack.poller().claim().runs_created == 110

    stop = threading.Event()
    config = WorkerConfig(lease=timedelta(seconds=10), heartbeat=timedelta(seconds=3), defer_seconds=1)
    mappings = [EventSourceMapping(stack.consumer, stack.worker(config)) for _ in range(16)]
    threads = [threading.Thread(target=m.run, args=(stop,)) for m in mappings]
    for t in threads:
        t.start()
    try:
        wait_until(
            lambda: sum(1 for c in target.recorder.calls if c.status == 200) >= 110, timeout=120, every=0.2
        )
    finally:
        stop.set()
        for t in threads:
            t.join()
    recorder = target.recorder
    assert recorder.max_in_flight["team-b"] <= 5
    assert recorder.max_in_flight["team-b"] >= 2  # the cap, not a lack of workers, was the limit
    b_calls = [c.received_at for c in recorder.calls if c.query.get("group") == "team-b"]
    c_calls = [c.received_at for c in recorder.calls if c.query.get("group") == "team-c"]
    assert len(c_calls) == 10 and len(set(c.headers["idempotency-key"] for c in recorder.calls)) == 110
    assert max(c_calls) < max(b_calls) - 2  # team c finished long before team b's queue drained
    assert not [e for m in mappings for e in m.errors]


def test_a_dead_workers_slot_comes_back_when_its_lease_expires(stack: Stack) -> None:
    team = Team(team_id="solo", max_concurrency=1)
    now = stack.clock.now()
    assert stack.store.acquire_slot(team, "run-1", now, now + timedelta(seconds=2)) == 0
    assert stack.store.acquire_slot(team, "run-2", now, now + timedelta(seconds=2)) is None  # at the cap
    # run-1's worker dies without releasing; after its lease the slot is free again.
    later = now + timedelta(seconds=3)
    assert stack.store.acquire_slot(team, "run-2", later, later + timedelta(seconds=2)) == 0


def slot_keys(stack: Stack, team_id: str) -> set[str]:
    items = stack.dynamodb.scan(TableName=stack.names.control)["Items"]
    return {i["pk"]["S"] for i in items if i["pk"]["S"].startswith(f"team#{team_id}#slots#")}


def test_a_big_teams_slots_spread_over_partition_keys_and_the_cap_still_holds(stack: Stack) -> None:
    team = Team(team_id="big", max_concurrency=60)
    now = stack.clock.now()
    until = now + timedelta(seconds=30)
    slots = [stack.store.acquire_slot(team, f"run-{i}", now, until) for i in range(60)]
    assert sorted(s for s in slots if s is not None) == list(range(60))  # every slot found, none twice
    assert stack.store.acquire_slot(team, "run-60", now, until) is None  # at the cap
    assert slot_keys(stack, "big") == {"team#big#slots#0", "team#big#slots#1", "team#big#slots#2"}
    stack.store.release_slot("big", 55, f"run-{slots.index(55)}")
    assert stack.store.acquire_slot(team, "run-61", now, until) == 55  # the one free slot is found


def test_a_team_with_more_groups_than_searched_never_goes_over_its_cap(stack: Stack) -> None:
    random.seed(7)
    team = Team(team_id="huge", max_concurrency=200)  # 8 groups of 25; a miss searches 4 of them
    now = stack.clock.now()
    until = now + timedelta(seconds=30)
    taken = [stack.store.acquire_slot(team, f"run-{i}", now, until) for i in range(260)]
    held = [s for s in taken if s is not None]
    assert len(held) == len(set(held)) <= 200
    assert len(held) >= 180  # the searches still find nearly every slot
    assert len(slot_keys(stack, "huge")) == 8


def test_a_cron_job_keeps_its_schedule_when_its_runs_fail(stack: Stack, target) -> None:
    from duetime.domain.clock import ManualClock

    from ..job_support import create_job

    start = stack.clock.now().replace(second=0, microsecond=0)
    job = create_job(
        stack.store,
        "team-a",
        {
            "name": "failing report",
            "schedule": {"cron": "* * * * *", "timezone": "Europe/Berlin"},
            "target": {"url": target.url + "?status=500"},
            "exact": True,
            "retry": {"max_attempts": 1},
        },
        start,
    )
    clock = ManualClock(start)
    poller = stack.poller(clock=clock)
    worker = stack.worker(FAST)
    for minute in range(1, 4):
        clock.set(start + timedelta(minutes=minute, seconds=1))
        assert poller.claim().runs_created == 1
        reports = stack.drain(worker, lambda m=minute: len(target.recorder.calls) == m)
        assert [r.outcome for r in reports] == [WorkOutcome.DEAD]
    stored = stack.store.get_job(job.id)
    assert stored is not None and stored.state.next_nominal_at == start + timedelta(minutes=4)
    assert stored.state.last_scheduled_at == start + timedelta(minutes=3)
    keys = [c.headers["idempotency-key"] for c in target.recorder.calls]
    assert keys == [f"{job.id}@{(start + timedelta(minutes=m)):%Y-%m-%dT%H:%M:%SZ}" for m in (1, 2, 3)]
