"""`duetime plan`'s fixed cost: what an installation costs a month with no runs, part by part."""

from dataclasses import dataclass, field, replace

import pytest

from duetime.adapters.dynamodb.store import DynamoStore
from duetime.capacity.fixed_cost import (
    LEVERS,
    StackDefaults,
    fixed_monthly_cost,
    idle_dynamodb_per_second,
    invocations_alive,
    lever_savings,
    poller_invocation_seconds,
    totals,
)
from duetime.capacity.plan import PlanInputs, capacity_plan
from duetime.capacity.prices import PRICES_USD
from duetime.domain.clock import ManualClock
from duetime.scheduling.poller import Poller, PollerConfig
from duetime.scheduling.poller_lease import LeaseTimings, PollerShift

from .test_poller_lease_loop import NOW, NoAlerts, Queue
from .test_poller_lease_loop import store as store  # the moto store fixture of the poller loop tests

DEFAULTS = StackDefaults()
# every holder serves its minute (before duetime.scheduling.quiet)
AWAKE = StackDefaults(poller_rests_when_quiet=False)
SCHEDULED = StackDefaults(forecast_scaling=False)  # peak_workers from 23:55 to 00:15 every day


def test_the_parts_add_up_to_the_fixed_cost_and_the_plan_prints_both_costs() -> None:
    fixed = fixed_monthly_cost(64)
    parts = fixed["monthly_fixed_parts"]
    assert fixed["monthly_fixed_usd"] == pytest.approx(sum(parts.values()), abs=0.01 * len(parts))
    assert all(usd >= 0 for usd in parts.values())
    plan = capacity_plan(PlanInputs(jobs=1000, runs_per_day=1000, spike_jobs=0))
    assert plan["monthly_fixed_usd"] == fixed["monthly_fixed_usd"] > 0
    assert plan["monthly_fixed_parts"] == parts
    lines = plan["bill"]["lines"]
    assert plan["monthly_total_usd"] == pytest.approx(
        sum(line["monthly_usd"] for line in lines.values()), abs=0.01
    )
    assert plan["monthly_total_usd"] > sum(usd for name, usd in parts.items() if name != "dashboard") > 0


def test_an_awake_poller_invocation_lasts_until_its_handover_second() -> None:
    # By default it hands over once the next one, a minute later, registered (0.5 s) and the holder renewed
    # (1 s on average), from a whole second >= 2 s on (2.5 s on average): 64 s, about one alive at a time.
    assert poller_invocation_seconds(AWAKE, LeaseTimings()) == pytest.approx(64.0)
    assert invocations_alive(AWAKE, LeaseTimings()) == pytest.approx(64.0 / 60)
    # With a hot standby: 135 s runs, retiring 12 s before the end, handing over at a whole second >= 2 s
    # later: 125.5 s, about two alive at a time.
    hot = replace(AWAKE, poller_hot_standby=True)
    assert poller_invocation_seconds(hot, LeaseTimings()) == pytest.approx(125.5)
    assert invocations_alive(hot, LeaseTimings()) == pytest.approx(125.5 / 60)
    no_handover = LeaseTimings(retire_before=2.0, handover_lead=2.0, decide_before=0.5)
    assert poller_invocation_seconds(hot, no_handover) == 135.0  # never longer than its run
    assert poller_invocation_seconds(replace(AWAKE, poller_run_seconds=50.0), LeaseTimings()) == 50.0


def test_awake_pollers_cost_follows_groups_memory_and_run_length() -> None:
    base = fixed_monthly_cost(64, AWAKE)["monthly_fixed_parts"]["pollers_lambda_duration"]
    # 4 groups x 43,200 invocations x 64 s x 0.5 GB at the Arm price
    assert base == pytest.approx(4 * 43_200 * 64 * 0.5 * PRICES_USD["lambda_gb_second_arm64"], abs=0.01)
    hot = fixed_monthly_cost(64, replace(AWAKE, poller_hot_standby=True))["monthly_fixed_parts"]
    assert hot["pollers_lambda_duration"] == pytest.approx(base * 125.5 / 64, abs=0.01)
    one_group = fixed_monthly_cost(64, replace(AWAKE, poller_groups=1))["monthly_fixed_parts"]
    assert one_group["pollers_lambda_duration"] == pytest.approx(base / 4, abs=0.01)
    small = fixed_monthly_cost(64, replace(AWAKE, poller_memory_mb=128))["monthly_fixed_parts"]
    assert small["pollers_lambda_duration"] == pytest.approx(base / 4, abs=0.01)
    shorter = fixed_monthly_cost(64, replace(AWAKE, poller_run_seconds=60.0))["monthly_fixed_parts"]
    assert shorter["pollers_lambda_duration"] == pytest.approx(base * 60 / 64, abs=0.01)


def test_awake_idle_reads_follow_the_partitions_and_the_sweep_interval() -> None:
    timings = LeaseTimings()
    parts = idle_dynamodb_per_second(64, AWAKE, timings, settle_s=30)
    assert parts["marks_read"]["requests"] == pytest.approx(4 / 60)  # one BatchGetItem a group a reign
    assert parts["marks_read"]["read_units"] == pytest.approx(32 / 60)  # 64 marks, eventually consistent
    assert parts["due_index_queries"]["requests"] == 96  # 64 buckets, 2 in the first 30 s of a minute
    assert parts["reap_index_queries"]["requests"] == pytest.approx(64 / 5)
    assert parts["lease_writes"]["write_units"] == pytest.approx(4 * (1 / 2 + 3 / 60))
    half = totals(idle_dynamodb_per_second(32, AWAKE, timings, settle_s=30))
    full = totals(parts)
    assert half["read_units"] < full["read_units"]
    slower = totals(idle_dynamodb_per_second(64, replace(AWAKE, sweep_interval_s=2.0), timings, 30))
    assert slower["read_units"] < full["read_units"]
    cost = fixed_monthly_cost(64, AWAKE)["monthly_fixed_parts"]["sweeps_dynamodb_reads"]
    assert cost == pytest.approx(
        full["read_units"] * 30 * 86_400 * PRICES_USD["dynamodb_read_request_unit"], abs=0.01
    )


def test_a_resting_groups_idle_invocation_lasts_the_settle_and_a_look() -> None:
    # Each tick: take the lease, sweep, read the wake count, sweep until the 2 s settle passed, look, return.
    assert poller_invocation_seconds(DEFAULTS, LeaseTimings()) == pytest.approx(3.5)
    awake = fixed_monthly_cost(64, AWAKE)["monthly_fixed_parts"]
    resting = fixed_monthly_cost(64)["monthly_fixed_parts"]
    assert resting["pollers_lambda_duration"] == pytest.approx(
        awake["pollers_lambda_duration"] * 3.5 / 64, abs=0.01
    )
    assert resting["sweeps_dynamodb_reads"] < awake["sweeps_dynamodb_reads"] / 5


def test_a_resting_groups_idle_traffic_is_one_short_reign_a_tick() -> None:
    parts = idle_dynamodb_per_second(64, DEFAULTS, LeaseTimings(), settle_s=30)
    assert "busy_counts" not in parts  # no handover
    assert parts["quiet_look_queries"]["requests"] == pytest.approx(64 * 3.5 / 60)  # a look a tick
    assert parts["reap_index_queries"]["requests"] == pytest.approx(64 / 60)  # the first sweep recovers
    assert parts["due_index_queries"]["requests"] == pytest.approx(64 * 1.5 * 3.5 / 60)  # 3.5 sweeps a tick
    assert parts["lease_writes"]["requests"] == pytest.approx(4 * 2 / 60)  # take it, give it back
    assert parts["mark_writes"]["requests"] == pytest.approx(64 / 60)  # each mark moves once a minute


def test_forecast_scaling_provisions_nothing_at_idle_and_pays_for_its_looks() -> None:
    fixed = fixed_monthly_cost(64)
    parts, quantities = fixed["monthly_fixed_parts"], fixed["fixed_cost_quantities"]
    assert DEFAULTS.forecast_scaling
    assert parts["provisioned_concurrency_peak"] == parts["provisioned_concurrency_baseline"] == 0
    assert quantities["provisioned_gb_seconds_per_month"] == 0
    assert quantities["prescaler_invocations_per_month"] == 30 * 1440 / 5  # every 5 minutes
    assert quantities["prescaler_count_queries_per_second"] == pytest.approx(64 * 11 / 300, abs=0.001)
    reads = 64 * 11 / 300 * 0.5 * 30 * 86_400 * PRICES_USD["dynamodb_read_request_unit"]
    assert parts["prescaler_dynamodb_reads"] == pytest.approx(reads, abs=0.01)
    assert 0 < parts["prescaler_lambda"] < 0.5
    scheduled = fixed_monthly_cost(64, SCHEDULED)
    assert scheduled["monthly_fixed_parts"]["prescaler_lambda"] == 0
    assert fixed["monthly_fixed_usd"] < scheduled["monthly_fixed_usd"] - 10  # the daily window's $10.80 went


def test_scheduled_scaling_provisions_the_peak_window_and_the_baseline() -> None:
    parts = fixed_monthly_cost(64, SCHEDULED)["monthly_fixed_parts"]
    price = PRICES_USD["lambda_provisioned_concurrency_gb_second_arm64"]
    assert parts["provisioned_concurrency_peak"] == pytest.approx(90 * 1.0 * 20 * 60 * 30 * price, abs=0.01)
    assert parts["provisioned_concurrency_baseline"] == 0  # none outside the peak: pollers warm one
    one = fixed_monthly_cost(64, replace(SCHEDULED, baseline_provisioned_workers=1))["monthly_fixed_parts"]
    assert one["provisioned_concurrency_baseline"] == pytest.approx(1420 * 60 * 30 * price, abs=0.01)  # 1 GB
    fewer = fixed_monthly_cost(64, replace(SCHEDULED, peak_workers=45))["monthly_fixed_parts"]
    assert fewer["provisioned_concurrency_peak"] == pytest.approx(
        parts["provisioned_concurrency_peak"] / 2, abs=0.01
    )
    forecast_baseline = fixed_monthly_cost(64, replace(DEFAULTS, baseline_provisioned_workers=1))
    assert forecast_baseline["monthly_fixed_parts"]["provisioned_concurrency_baseline"] == pytest.approx(
        1440 * 60 * 30 * price, abs=0.01
    )  # the prescaler keeps the baseline all day


def test_the_event_source_in_provisioned_mode_bills_its_minimum_pollers_all_month() -> None:
    assert fixed_monthly_cost(64)["monthly_fixed_parts"]["event_pollers_minimum"] == 0  # standard mode
    two = fixed_monthly_cost(64, replace(DEFAULTS, worker_min_pollers=2))
    assert two["monthly_fixed_parts"]["event_pollers_minimum"] == pytest.approx(2 * 720 * 0.00925, abs=0.01)
    assert two["monthly_fixed_usd"] == pytest.approx(fixed_monthly_cost(64)["monthly_fixed_usd"] + 13.32)


def test_cloudwatch_and_sqs_parts() -> None:
    parts = fixed_monthly_cost(64)["monthly_fixed_parts"]
    assert DEFAULTS.alarm_metrics == 43  # the throttles alarm covers the pollers' helper too; 18 of absence
    assert parts["alarms"] == pytest.approx(43 * 0.10)
    assert parts["dashboard"] == 3.0
    assert parts["poller_custom_metrics"] == pytest.approx(2 * 0.30)
    assert parts["sqs_idle_receives"] == pytest.approx(5 * 30 * 86_400 / 20 * 0.40 / 1e6, abs=0.01)
    no_dashboard = fixed_monthly_cost(64, replace(DEFAULTS, dashboards=0))
    assert no_dashboard["monthly_fixed_usd"] == pytest.approx(
        fixed_monthly_cost(64)["monthly_fixed_usd"] - 3.0
    )


@dataclass
class MetricNames:
    names: set[str] = field(default_factory=set)

    def add_metric(self, name: str, unit: str, value: float) -> None:
        self.names.add(name)


def test_the_reconciler_costs_its_minute_ticks_three_empty_reads_a_partition_and_four_metrics() -> None:
    parts = fixed_monthly_cost(64)["monthly_fixed_parts"]
    ticks = 30 * 1440
    assert parts["reconciler_custom_metrics"] == pytest.approx(4 * 0.30)
    reads = ticks * 64 * 3 * 0.5 * PRICES_USD["dynamodb_read_request_unit"]
    writes = ticks * PRICES_USD["dynamodb_write_request_unit"]
    assert parts["reconciler_dynamodb"] == pytest.approx(reads + writes, abs=0.01)
    assert 0.2 < parts["reconciler_lambda"] < 0.6  # 43,200 ticks of 256 MB x 1 s, requests and traces


def test_an_idle_poller_publishes_the_custom_metrics_the_fixed_cost_counts(store: DynamoStore) -> None:
    clock = ManualClock(NOW)
    poller = Poller(store, store, Queue(), NoAlerts(), clock, PollerConfig(partitions=list(range(16))))
    metrics = MetricNames()
    PollerShift(poller, store, LeaseTimings()).serve("idle", None, 20, clock.advance, metrics=metrics)
    assert len(metrics.names) == DEFAULTS.poller_custom_metrics, sorted(metrics.names)
    assert metrics.names == {"DueIndexQueries", "PollerHeldSeconds"}  # no zeros


def test_the_levers_savings_add_up_to_the_cost_left_with_all_of_them() -> None:
    savings = lever_savings(64)
    assert [s["lever"] for s in savings] == [lever.name for lever in LEVERS]
    assert all(s["saves_usd"] > 0 for s in savings)
    stack, dropped = DEFAULTS, frozenset[str]()
    for lever in LEVERS:
        stack, dropped = replace(stack, **lever.stack), dropped | lever.drops
    left = fixed_monthly_cost(64, stack, dropped)["monthly_fixed_usd"]
    assert savings[-1]["leaves_usd"] == left
    total = fixed_monthly_cost(64)["monthly_fixed_usd"]
    assert sum(s["saves_usd"] for s in savings) == pytest.approx(total - left, abs=0.01)
