"""Provisioned workers and the event source's provisioned mode from the forecast
(``duetime.scheduling.prescale``): on the in-memory twins with a manual clock, the real poller claiming the
busy minute and putting its runs on the queue, the prescaler looking every 5 minutes as its rule invokes
it."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from botocore.stub import Stubber
from pydantic import ValidationError

from duetime import wiring
from duetime.adapters.aws.clients import new_client
from duetime.adapters.aws.lambda_provisioning import (
    LambdaEventPollers,
    LambdaProvisionedWorkers,
    split_qualified_arn,
)
from duetime.adapters.memory import (
    MemoryAlerts,
    MemoryEventPollers,
    MemoryProvisionedWorkers,
    MemoryQueue,
    MemoryStore,
)
from duetime.capacity.midnight_model import AwsModel
from duetime.capacity.plan_midnight import worker_starts_per_s
from duetime.domain.clock import ManualClock
from duetime.domain.ids import PARTITIONS, partition_of
from duetime.domain.models import Job, Team
from duetime.domain.timeutil import minute_bucket
from duetime.scheduling.poller import Poller, PollerConfig
from duetime.scheduling.prescale import PrescalePolicy, Prescaler, decide, decide_pollers

from ..twin_support import T0, a_job

# Small numbers, the same arithmetic: a worker starts 1 run a second, the event source brings 1 by itself,
# so a minute of 120 runs needs ceil(120 / 60 / 1 * 1.1) = 3 workers. In standard mode the event source
# starts 1 batch and adds 1 a second up to 3: 1x2 + 2x2/2 + 3x58 = 178 worker-seconds, 178 runs in the
# minute by itself; a poller runs 2 at once, so a minute of 600 runs (11 at once) needs 6 pollers.
POLICY = PrescalePolicy(
    worker_starts_per_second=1,
    on_demand_workers=1,
    max_workers=8,
    standard_ramp_per_minute=60,
    standard_max_concurrency=3,
    invocations_per_poller=2,
    max_pollers=10,
)
STANDARD_ALONE = 178
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
    pollers: MemoryEventPollers
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

    def pollers_every_5_minutes_until(self, until: datetime) -> list[tuple[str, int | None, str | None]]:
        """As ``look_every_5_minutes_until``, for the event source: (HH:MM, minimum pollers after, action)."""
        looks = []
        while self.clock.now() <= until:
            decision = self.prescaler.tick()
            looks.append((decision.at.strftime("%H:%M"), decision.pollers_after, decision.pollers_action))
            self.clock.advance(LOOK.total_seconds())
        return looks

    def claim_and_drain(self, busy: datetime) -> None:
        """The poller queues the busy minute's runs; 3 minutes on, the workers have taken them all."""
        self.clock.set(busy + timedelta(seconds=1))
        self.poller.claim()
        self.clock.set(busy + timedelta(minutes=3))
        self.queue.delete([m.receipt_handle for m in self.queue.receive(max_messages=10_000)])


@pytest.fixture
def world() -> World:
    clock = ManualClock(T0)
    store = MemoryStore()
    store.put_team(Team(team_id="team-a", max_concurrency=1000))
    queue = MemoryQueue(clock)
    workers = MemoryProvisionedWorkers(clock)
    pollers = MemoryEventPollers(clock)
    config = PollerConfig(partitions=list(range(PARTITIONS)), preload_lead=None, page_size=1000)
    poller = Poller(store, store, queue, MemoryAlerts(), clock, config, store)
    prescaler = Prescaler(store, workers, queue, clock, POLICY, pollers=pollers)
    return World(clock, store, queue, workers, pollers, prescaler, poller)


def test_an_idle_installation_provisions_no_worker(world: World) -> None:
    looks = world.look_every_5_minutes_until(T0 + timedelta(hours=1))

    assert {(workers, action) for _, workers, action in looks} == {(0, "keep")}
    assert world.workers.history == []  # not one call to the provisioning API
    assert world.pollers.history == []  # nor to the event source's


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


# --- the event source's provisioned mode (ProvisionedEventPollers) ---------------------------------------


def test_the_event_source_goes_provisioned_5_to_10_minutes_before_a_spike_and_standard_once_it_has_drained(
    world: World,
) -> None:
    busy = T0 + timedelta(minutes=32)
    world.due_at(busy, 600)  # 11 runs a second at once: more than standard mode's 178 in the minute

    looks = world.pollers_every_5_minutes_until(busy)
    world.clock.set(busy + timedelta(seconds=1))
    assert len(world.poller.claim().runs) == 600
    world.clock.set(busy + timedelta(minutes=3))
    while_waiting = world.prescaler.tick()
    world.queue.delete([m.receipt_handle for m in world.queue.receive(max_messages=600)])
    after = world.prescaler.tick()

    assert looks == [
        ("10:00", 0, "keep"),
        ("10:05", 0, "keep"),
        ("10:10", 0, "keep"),
        ("10:15", 0, "keep"),
        ("10:20", 0, "keep"),
        ("10:25", 6, "on"),  # 7 minutes ahead, as the workers: ceil(600 / 60 / 1 * 1.1 / 2) pollers
        ("10:30", 6, "keep"),
    ]
    assert (while_waiting.pollers_action, while_waiting.pollers_after) == ("hold", 6)
    assert (after.pollers_action, after.pollers_after) == ("off", 0)
    assert world.pollers.history == [(T0 + timedelta(minutes=25), 6), (busy + timedelta(minutes=3), 0)]
    assert world.workers.history[0] == (T0 + timedelta(minutes=25), 8)  # the workers too, capped at 8


def test_the_event_source_stays_provisioned_while_more_runs_wait_than_standard_mode_would_start() -> None:
    assert POLICY.standard_startable() == STANDARD_ALONE
    assert decide_pollers(POLICY, {"m": 0}, 6, STANDARD_ALONE + 1) == (6, "hold")
    assert decide_pollers(POLICY, {"m": 0}, 6, STANDARD_ALONE) == (0, "off")
    # Fewer needed ahead (250 runs: 3 pollers), but not none: lowered once what waits fits their window.
    assert POLICY.pollers_startable(3) == 3 * 2 * 60
    assert decide_pollers(POLICY, {"m": 250}, 6, 361) == (6, "hold")
    assert decide_pollers(POLICY, {"m": 250}, 6, 360) == (3, "lower")
    assert decide_pollers(POLICY, {"m": 600}, 3, 0) == (6, "raise")


def test_a_minute_standard_mode_starts_by_itself_provisions_workers_but_leaves_the_event_source_standard(
    world: World,
) -> None:
    world.due_at(T0 + timedelta(minutes=5), STANDARD_ALONE)

    decision = world.prescaler.tick()

    assert (decision.workers_needed, decision.action) == (4, "raise")  # ceil(178 / 60 * 1.1) ready workers
    assert (decision.pollers_needed, decision.pollers_action, decision.pollers_after) == (0, "keep", 0)
    assert world.pollers.history == []


def test_the_pollers_a_minute_needs_come_from_its_runs_a_second_and_a_pollers_10_invokes() -> None:
    # The AWS figures: 5 batches, +300 a minute, the stack's cap of 100, 10 invokes a poller.
    policy = PrescalePolicy(max_workers=1000)

    # Standard mode alone: 5 -> 100 in 19 s, 5,097.5 worker-seconds at 30 runs/s = 152,925 runs in a minute.
    assert policy.standard_startable() == pytest.approx(152_925)
    assert policy.pollers_for(152_925) == 0
    assert policy.pollers_for(152_926) == math.ceil(152_926 / 60 / 30 * 1.1 / 10) == 10
    # The seed's midnight: 306 concurrent batches, 31 pollers (310 at once, the rest scaled as AWS does).
    assert policy.pollers_for(500_000) == 31
    # Bounded: by max_pollers (the stack's worker_max_pollers), by AWS's 200 minimum pollers, and at least 2.
    assert PrescalePolicy(max_pollers=20).pollers_for(10**7) == 20
    assert PrescalePolicy(max_pollers=2000).pollers_for(10**8) == 200
    assert PrescalePolicy(invocations_per_poller=1000).pollers_for(200_000) == 2
    # Without the cap of 100, standard mode's ramp (5 -> 305 in the minute) starts 279,000 by itself.
    assert PrescalePolicy(standard_max_concurrency=1000).standard_startable() == pytest.approx(279_000)
    assert PrescalePolicy(standard_max_concurrency=1000).pollers_for(250_000) == 0
    assert policy.pollers_for(250_000) == 16


def test_without_an_event_source_to_switch_the_prescaler_leaves_it_alone_and_reports_none(
    world: World,
) -> None:
    """A stack that pins provisioned mode (worker_min_pollers) or turns switching off gives no pollers."""
    pinned = MemoryEventPollers(world.clock, minimum=20)  # what the stack set: never the prescaler's
    prescaler = Prescaler(world.store, world.workers, world.queue, world.clock, POLICY)
    world.due_at(T0 + timedelta(minutes=5), 600)

    decision = prescaler.tick()

    assert decision.action == "raise"  # the workers are still the prescaler's
    summary = decision.summary()
    assert {key: summary[key] for key in summary if key.startswith("pollers_")} == {
        "pollers_needed": None,
        "pollers_before": None,
        "pollers_after": None,
        "pollers_action": None,
        "pollers_error": None,
    }
    assert (pinned.minimum_pollers(), pinned.history) == (20, [])


def test_a_refused_switch_is_logged_and_asked_again_at_the_next_look_and_the_workers_are_set_all_the_same(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    world.due_at(T0 + timedelta(minutes=8), 600)
    world.pollers.refuse = 1

    with caplog.at_level(logging.WARNING, logger="duetime.scheduling.prescale"):
        refused = world.prescaler.tick()
    world.clock.advance(LOOK.total_seconds())
    retried = world.prescaler.tick()

    assert refused.pollers_error == "RuntimeError: refused: the event source mapping is being updated"
    assert (refused.pollers_before, refused.pollers_after, refused.pollers_action) == (0, 0, None)
    assert (refused.action, refused.provisioned_after) == ("raise", 8)  # the workers were set regardless
    assert "event source pollers not switched" in caplog.text
    assert (retried.pollers_error, retried.pollers_action, retried.pollers_after) == (None, "on", 6)
    assert world.pollers.history == [(T0 + timedelta(minutes=5), 6)]


def test_a_failed_read_of_the_event_source_is_reported_and_the_workers_are_set_all_the_same(
    world: World,
) -> None:
    class Unreadable(MemoryEventPollers):
        def minimum_pollers(self) -> int:
            raise ConnectionError("throttled")

    prescaler = Prescaler(
        world.store, world.workers, world.queue, world.clock, POLICY, pollers=Unreadable(world.clock)
    )
    world.due_at(T0 + timedelta(minutes=5), 600)

    decision = prescaler.tick()

    assert (decision.pollers_error, decision.pollers_before, decision.pollers_needed) == (
        "ConnectionError: throttled",
        None,
        6,
    )
    assert world.workers.provisioned() == 8


def test_the_pollers_twin_takes_what_an_sqs_event_source_takes(world: World) -> None:
    for bad in (-1, 1):
        with pytest.raises(ValueError, match="0 \\(standard mode\\) or 2\\+ pollers"):
            world.pollers.provision_pollers(bad)


# --- the event source adapter: Get/UpdateEventSourceMapping (tests/integration runs it on LocalStack) ---

MAPPING = "a1b2c3d4-5678-90ab-cdef-11111EXAMPLE"


def stubbed_pollers() -> tuple[LambdaEventPollers, Stubber]:
    client = new_client("lambda", endpoint_url="http://127.0.0.1:1")
    return LambdaEventPollers(client, MAPPING, max_pollers=40, max_concurrency=100), Stubber(client)


def test_the_adapter_drops_maximum_concurrency_to_go_provisioned_and_restores_it_to_go_standard() -> None:
    pollers, stub = stubbed_pollers()
    uuid = {"UUID": MAPPING}
    stub.add_response(
        "update_event_source_mapping",
        {},
        {
            **uuid,
            "ProvisionedPollerConfig": {"MinimumPollers": 31, "MaximumPollers": 40},
            "ScalingConfig": {},
        },
    )
    stub.add_response(
        "get_event_source_mapping",
        {"UUID": MAPPING, "ProvisionedPollerConfig": {"MinimumPollers": 31, "MaximumPollers": 40}},
        uuid,
    )
    stub.add_response(
        "update_event_source_mapping",
        {},
        {**uuid, "ProvisionedPollerConfig": {}, "ScalingConfig": {"MaximumConcurrency": 100}},
    )
    stub.add_response("get_event_source_mapping", {"UUID": MAPPING, "ProvisionedPollerConfig": {}}, uuid)
    stub.add_response(
        "get_event_source_mapping", {"UUID": MAPPING, "ScalingConfig": {"MaximumConcurrency": 100}}, uuid
    )
    stub.add_response(  # more pollers than max_pollers: the maximum follows the minimum
        "update_event_source_mapping",
        {},
        {
            **uuid,
            "ProvisionedPollerConfig": {"MinimumPollers": 50, "MaximumPollers": 50},
            "ScalingConfig": {},
        },
    )

    with stub:
        pollers.provision_pollers(31)
        assert pollers.minimum_pollers() == 31
        pollers.provision_pollers(0)
        assert pollers.minimum_pollers() == 0  # LocalStack answers {} once it is off
        assert pollers.minimum_pollers() == 0  # and no ProvisionedPollerConfig at all is standard mode too
        pollers.provision_pollers(50)
    stub.assert_no_pending_responses()


def test_the_adapter_refuses_pollers_an_sqs_event_source_does_not_take() -> None:
    pollers, _ = stubbed_pollers()
    for bad in (1, 201):
        with pytest.raises(ValueError, match="0 \\(standard mode\\) or 2-200 minimum pollers"):
            pollers.provision_pollers(bad)
    with pytest.raises(ValueError, match="event source mapping UUID"):
        LambdaEventPollers(pollers.client, "", max_pollers=40, max_concurrency=100)


def test_the_prescaler_switches_the_event_source_only_when_the_stack_names_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    environment = {
        "DUETIME_WORKER_FUNCTION_ARN": ALIAS,
        "DUETIME_RUN_QUEUE_URL": "http://127.0.0.1:1/000000000000/runs",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("DUETIME_WORKER_EVENT_SOURCE_UUID", raising=False)
    wiring.forget()
    assert wiring.prescaler().pollers is None  # pinned provisioned mode, or forecast_pollers=false

    monkeypatch.setenv("DUETIME_WORKER_EVENT_SOURCE_UUID", MAPPING)
    monkeypatch.setenv("DUETIME_PRESCALE_MAX_POLLERS", "40")
    monkeypatch.setenv("DUETIME_WORKER_MAX_CONCURRENCY", "50")
    wiring.forget()
    prescaler = wiring.prescaler()
    wiring.forget()

    assert isinstance(prescaler.pollers, LambdaEventPollers)
    assert (prescaler.pollers.uuid, prescaler.pollers.max_pollers, prescaler.pollers.max_concurrency) == (
        MAPPING,
        40,
        50,
    )
    assert (prescaler.policy.max_pollers, prescaler.policy.standard_max_concurrency) == (40, 50)
