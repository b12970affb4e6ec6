"""Provisioned workers from the forecast (``duetime.prescale``): on the in-memory twin with a manual clock,
the real poller claiming the busy minute and putting its runs on the queue, the prescaler looking every 5
minutes as its rule invokes it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from botocore.stub import Stubber
from pydantic import ValidationError

from duetime.adapters.clients import new_client
from duetime.adapters.lambda_provisioning import LambdaProvisionedWorkers, split_qualified_arn
from duetime.adapters.memory import MemoryAlerts, MemoryProvisionedWorkers, MemoryQueue, MemoryStore
from duetime.bench.midnight_model import AwsModel
from duetime.bench.plan_midnight import worker_starts_per_s
from duetime.clock import ManualClock
from duetime.ids import PARTITIONS, partition_of
from duetime.models import Job, Team
from duetime.poller import Poller, PollerConfig
from duetime.prescale import PrescalePolicy, Prescaler, decide
from duetime.timeutil import minute_bucket

from ..twin_support import T0, a_job

# Small numbers, the same arithmetic: a worker starts 1 run a second, the event source brings 1 by itself,
# so a minute of 120 runs needs ceil(120 / 60 / 1 * 1.1) = 3 workers.
POLICY = PrescalePolicy(worker_starts_per_second=1, on_demand_workers=1, max_workers=8)
LOOK = timedelta(minutes=5)  # the prescaler's rule
ALIAS = "arn:aws:lambda:us-east-1:123456789012:function:duetime-worker:live"


def daily(fire_at: datetime) -> Job:
    """A daily job (as a midnight spike's are) whose next run fires at ``fire_at``."""
    return a_job(fire_at, schedule={"cron": f"{fire_at.minute} {fire_at.hour} * * *"})


@dataclass
class World:
    clock: ManualClock
    store: MemoryStore
    queue: MemoryQueue
    workers: MemoryProvisionedWorkers
    prescaler: Prescaler
    poller: Poller

    def due_at(self, fire_at: datetime, count: int) -> list[Job]:
        jobs = [daily(fire_at) for _ in range(count)]
        for job in jobs:
            self.store.put_job(job, self.clock.now())
        return jobs

    def look_every_5_minutes_until(self, until: datetime) -> list[tuple[datetime, int, str]]:
        """The prescaler's looks from the clock's instant, 5 minutes apart, up to ``until``: (when, workers
        provisioned after it, its action)."""
        looks = []
        while self.clock.now() <= until:
            decision = self.prescaler.tick()
            looks.append((decision.at, decision.provisioned_after, decision.action))
            self.clock.advance(LOOK.total_seconds())
        return looks


@pytest.fixture
def world() -> World:
    clock = ManualClock(T0)
    store = MemoryStore()
    store.put_team(Team(team_id="team-a", max_concurrency=1000))
    queue = MemoryQueue(clock)
    workers = MemoryProvisionedWorkers(clock)
    config = PollerConfig(partitions=list(range(PARTITIONS)), preload_lead=None, page_size=1000)
    poller = Poller(store, store, queue, MemoryAlerts(), clock, config, store)
    return World(clock, store, queue, workers, Prescaler(store, workers, queue, clock, POLICY), poller)


def test_an_idle_installation_provisions_no_worker(world: World) -> None:
    looks = world.look_every_5_minutes_until(T0 + timedelta(hours=1))

    assert {(workers, action) for _, workers, action in looks} == {(0, "keep")}
    assert world.workers.history == []  # not one call to the provisioning API


def test_workers_are_raised_5_to_10_minutes_before_a_busy_minute_and_lowered_once_its_runs_have_started(
    world: World,
) -> None:
    busy = T0 + timedelta(minutes=32)
    world.due_at(busy, 120)

    looks = world.look_every_5_minutes_until(busy)  # 10:00, 10:05, ... 10:30
    world.clock.set(busy + timedelta(seconds=1))
    assert len(world.poller.claim().runs) == 120  # the minute's runs are queued; the due index moved on
    world.clock.set(busy + timedelta(minutes=3))
    while_waiting = world.prescaler.tick()
    world.queue.delete([m.receipt_handle for m in world.queue.receive(max_messages=120)])
    after = world.prescaler.tick()

    assert [(at.strftime("%H:%M"), workers) for at, workers, _ in looks] == [
        ("10:00", 0),
        ("10:05", 0),
        ("10:10", 0),
        ("10:15", 0),
        ("10:20", 0),
        ("10:25", 3),  # 7 minutes ahead: the busy minute entered the 10-minute look-ahead
        ("10:30", 3),
    ]
    assert (while_waiting.action, while_waiting.provisioned_after, while_waiting.waiting_runs) == (
        "hold",
        3,
        120,
    )
    assert (after.action, after.provisioned_after) == ("lower", 0)
    assert world.workers.history == [(T0 + timedelta(minutes=25), 3), (busy + timedelta(minutes=3), 0)]


def test_workers_stay_while_more_runs_wait_than_the_event_source_starts_alone_in_the_window(
    world: World,
) -> None:
    world.workers.provision(3)
    startable_alone = POLICY.startable(0)  # 1 worker x 1 run/s x 60 s

    for waiting, action in [(int(startable_alone) + 1, "hold"), (int(startable_alone), "lower")]:
        assert decide(POLICY, {"m": 0}, 3, waiting) == ((3, "hold") if action == "hold" else (0, "lower"))


def test_a_minute_the_event_source_handles_by_itself_provisions_nothing(world: World) -> None:
    world.due_at(T0 + timedelta(minutes=5), 54)  # ceil(54 / 60 * 1.1) = 1 worker: the event source's own

    decision = world.prescaler.tick()

    assert (decision.busiest_runs, decision.workers_needed, decision.action) == (54, 0, "keep")


def test_the_forecast_counts_every_partition_and_each_minute_of_the_lookahead(world: World) -> None:
    world.due_at(T0 + timedelta(minutes=3, seconds=59), 5)
    world.due_at(T0 + timedelta(minutes=10), 7)  # the last minute looked at
    world.due_at(T0 + timedelta(minutes=11), 100)  # beyond it
    partitions = {partition_of(job.id) for job in world.due_at(T0 + timedelta(minutes=3), 40)}

    forecast = world.prescaler.forecast(T0)

    assert len(partitions) > 10  # the 40 jobs landed in many partitions, and every one was counted
    assert len(forecast) == POLICY.lookahead_minutes + 1
    assert forecast[minute_bucket(T0 + timedelta(minutes=3))] == 45
    assert forecast[minute_bucket(T0 + timedelta(minutes=10))] == 7
    assert sum(forecast.values()) == 52


def test_a_paused_job_is_not_forecast(world: World) -> None:
    for _ in range(3):
        world.store.put_job(a_job(T0 + timedelta(minutes=2), paused=True), T0)

    assert sum(world.prescaler.forecast(T0).values()) == 0


def test_provisioned_workers_never_exceed_the_maximum_nor_fall_below_the_baseline() -> None:
    policy = PrescalePolicy(
        worker_starts_per_second=1, on_demand_workers=1, baseline_workers=2, max_workers=8
    )

    assert policy.workers_for(0) == 2  # an idle minute: the baseline
    assert policy.workers_for(10_000) == 8  # 184 needed: the maximum
    assert decide(policy, {"m": 0}, 0, 0) == (2, "raise")  # the baseline comes back if something removed it


def test_the_seeds_midnight_needs_the_workers_duetime_plan_computes() -> None:
    rate = worker_starts_per_s(AwsModel())  # duetime plan's worker rate on the AWS model
    policy = PrescalePolicy(max_workers=1000)

    # The default is the plan's rate, to within the calibrated CPU's spread (bench/calibration.json).
    assert abs(policy.worker_starts_per_second - rate) <= 0.1 * rate
    assert (
        policy.workers_for(500_000) == math.ceil(500_000 / 60 / policy.worker_starts_per_second * 1.1) == 306
    )
    assert PrescalePolicy().workers_for(500_000) == 90  # the stack's default peak_workers caps it


def test_a_baseline_over_the_maximum_is_refused_naming_the_fields() -> None:
    with pytest.raises(ValidationError, match="baseline_workers may not exceed max_workers"):
        PrescalePolicy(baseline_workers=10, max_workers=5)


# --- the Lambda adapter: what it asks of Lambda's API (the deployed-stack test runs it on LocalStack) -----


def stubbed_workers() -> tuple[LambdaProvisionedWorkers, Stubber]:
    client = new_client("lambda", endpoint_url="http://127.0.0.1:1")
    return LambdaProvisionedWorkers(client, ALIAS), Stubber(client)


def test_the_adapter_sets_the_alias_and_removes_the_config_for_zero() -> None:
    workers, stub = stubbed_workers()
    target = {"FunctionName": ALIAS.removesuffix(":live"), "Qualifier": "live"}
    stub.add_response(
        "put_provisioned_concurrency_config", {}, {**target, "ProvisionedConcurrentExecutions": 4}
    )
    stub.add_response(
        "get_provisioned_concurrency_config", {"RequestedProvisionedConcurrentExecutions": 4}, target
    )
    stub.add_response("delete_provisioned_concurrency_config", {}, target)
    stub.add_client_error(
        "get_provisioned_concurrency_config", "ProvisionedConcurrencyConfigNotFoundException"
    )
    stub.add_client_error("delete_provisioned_concurrency_config", "ResourceNotFoundException")

    with stub:
        workers.provision(4)
        assert workers.provisioned() == 4
        workers.provision(0)
        assert workers.provisioned() == 0  # no config is no provisioned worker
        workers.provision(0)  # already none: nothing to remove, no error
    stub.assert_no_pending_responses()


def test_provisioning_needs_an_alias_arn_not_a_bare_function() -> None:
    assert split_qualified_arn(ALIAS) == (ALIAS.removesuffix(":live"), "live")
    for bad in ("duetime-worker", ALIAS.removesuffix(":live"), "arn:aws:sqs:us-east-1:1:q:x:y"):
        with pytest.raises(ValueError, match="worker_function_arn must be a Lambda alias ARN"):
            split_qualified_arn(bad)
