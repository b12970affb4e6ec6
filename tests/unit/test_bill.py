"""`duetime plan`'s bill (``duetime.capacity.bill``): every line AWS charges, its quantity, unit and price,
the dollars a million runs, EventBridge Scheduler's price beside it, and the configuration recommended for a
workload (``duetime.capacity.recommend``)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from duetime import cli
from duetime.capacity.bill import (
    BillInputs,
    RunFigures,
    busy_fraction,
    eventbridge_scheduler_bill,
    monthly_bill,
    slot_write_units,
    write_units_per_run,
    xray_traces_per_month,
)
from duetime.capacity.fixed_cost import StackDefaults
from duetime.capacity.midnight_model import AwsModel
from duetime.capacity.plan import PlanInputs, capacity_plan
from duetime.capacity.recommend import POLLER_GROUPS_TRIED, groups_claim_the_steady_load
from duetime.capacity.unforeseen_spike import UnforeseenSpike

SEED = PlanInputs(jobs=10_000_000, runs_per_day=20_000_000, spike_jobs=500_000)
# Every charge AWS makes a busy installation for its own parts (the targets' own cost is theirs).
SEED_LINES = {
    "dynamodb_provisioned_wcu",
    "dynamodb_provisioned_rcu",
    "dynamodb_spike_write_request_units",
    "dynamodb_spike_read_request_units",
    "dynamodb_storage_run_history",
    "dynamodb_storage_jobs",
    "dynamodb_point_in_time_recovery",
    "sqs_requests",
    "lambda_worker_requests",
    "lambda_worker_duration",
    "lambda_spike_helpers",
    "lambda_spike_event_pollers",
    "cloudwatch_logs_ingested",
    "cloudwatch_logs_stored",
    "xray_worker_traces",
    "fixed_pollers_lambda_duration",
    "fixed_pollers_lambda_requests",
    "fixed_sweeps_dynamodb_reads",
    "fixed_sweeps_dynamodb_writes",
    "fixed_dashboard",
    "fixed_alarms",
    "fixed_poller_custom_metrics",
    "fixed_poller_xray_traces",
    "fixed_sqs_idle_receives",
    "fixed_prescaler_lambda",
    "fixed_prescaler_dynamodb_reads",
    "fixed_reconciler_lambda",
    "fixed_reconciler_dynamodb",
    "fixed_reconciler_custom_metrics",
}


def test_the_seeds_bill_has_every_line_aws_charges_each_nonzero_and_they_add_up() -> None:
    plan = capacity_plan(SEED)
    bill = plan["bill"]
    assert set(bill["lines"]) == SEED_LINES
    assert all(line["monthly_usd"] > 0 for line in bill["lines"].values())
    total = sum(line["monthly_usd"] for line in bill["lines"].values())
    assert bill["monthly_usd"] == pytest.approx(total, abs=0.01) == plan["monthly_total_usd"]
    assert plan["usd_per_million_runs"] == pytest.approx(total / 600, abs=0.001)  # 600 M runs a month
    for line in bill["lines"].values():  # a priced line: quantity x unit price = its dollars
        if "quantity" in line:
            assert line["monthly_usd"] == pytest.approx(line["quantity"] * line["unit_price_usd"], abs=0.01)


def test_the_seed_is_recommended_provisioned_tables_small_workers_the_fewest_groups_and_half_the_cost() -> (
    None
):
    recommended = capacity_plan(SEED)["recommended"]
    groups = recommended["poller_groups"]
    assert recommended["flags"] == (
        f"-c capacity_mode=provisioned -c worker_memory_mb=256 -c partition_groups={groups}"
    )
    # the fewest groups whose holders claim the day's average load at a quarter of their rate
    model = AwsModel()
    fewer = [g for g in POLLER_GROUPS_TRIED if g < groups]
    assert groups_claim_the_steady_load(SEED.runs_per_day, SEED.spike_jobs, groups, model)
    assert not any(groups_claim_the_steady_load(SEED.runs_per_day, SEED.spike_jobs, g, model) for g in fewer)
    assert recommended["spike_starts_in_time"] and recommended["seconds_to_all_started"] <= 60
    modes = recommended["by_capacity_mode"]
    assert modes["provisioned"]["monthly_usd"] < modes["on_demand"]["monthly_usd"] / 1.9
    # the figure a million runs, as measured today: the goal of $2.00 is not met (issue 51's note says why)
    assert 3.0 < modes["provisioned"]["usd_per_million_runs"] < 3.5
    assert 6.0 < modes["on_demand"]["usd_per_million_runs"] < 6.7


def test_eventbridge_scheduler_is_priced_beside_with_its_free_14_million() -> None:
    assert eventbridge_scheduler_bill(14_000_000)["aws_targets_monthly_usd"] == 0
    seed = eventbridge_scheduler_bill(600_000_000)
    assert seed["aws_targets_monthly_usd"] == 586.0  # (600 - 14) M x $1.00
    assert seed["http_targets_monthly_usd"] == 586.0 + 600 * 1.20  # + a bus event and an API destination each
    assert capacity_plan(SEED)["eventbridge_scheduler"] == seed


def test_an_idle_small_installation_is_recommended_on_demand_one_group_and_stays_under_20_dollars() -> None:
    plan = capacity_plan(PlanInputs(jobs=0, runs_per_day=0, spike_jobs=0, teams=1))
    assert plan["recommended"]["capacity_mode"] == "on_demand"
    assert plan["recommended"]["poller_groups"] == 1
    assert plan["monthly_total_usd"] <= 20.0
    assert plan["usd_per_million_runs"] is None  # no run to divide by


def test_a_small_installation_pays_on_demand_for_what_it_runs() -> None:
    small = capacity_plan(PlanInputs(jobs=2_000, runs_per_day=10_000, spike_jobs=100, teams=3))
    assert small["recommended"]["capacity_mode"] == "on_demand"
    assert small["unforeseen_spike"] is None  # nothing to switch on demand


def test_team_slots_cost_two_writes_a_run_with_many_teams_and_a_fifth_of_that_with_one() -> None:
    figures = RunFigures()
    assert slot_write_units(1, figures) == 0.4  # measured: a batch of one team, 2 items taken and freed
    assert slot_write_units(500, figures) == pytest.approx(1.98, abs=0.01)  # ~10 teams in a batch of 10
    assert slot_write_units(2, figures) == pytest.approx(0.4, abs=0.01)  # two teams: still 2 items a batch
    one, many = (write_units_per_run(BillInputs(1, 1, 0, teams=t), figures)["total"] for t in (1, 500))
    assert (one, round(many, 2)) == (6.64, 8.22)


def test_an_item_over_1_kb_costs_a_unit_a_kb_on_each_write_of_it() -> None:
    figures = RunFigures()
    big_job = write_units_per_run(BillInputs(1, 1, 0, teams=1, job_item_bytes=1100), figures)
    assert big_job["job_item_over_1kb"] == 3.0  # the claim's job write and its due-index move (2)
    big_run = write_units_per_run(BillInputs(1, 1, 0, teams=1, run_item_bytes=2100), figures)
    assert big_run["run_item_over_1kb"] == 6.0  # the run row's claim, lease and result, 2 KB more each


def test_provisioned_capacity_is_the_steady_load_at_auto_scalings_70_percent_and_the_spike_on_demand() -> (
    None
):
    p = BillInputs(runs_per_day=8_640_000, jobs=1, spike_jobs=0, teams=1, capacity_mode="provisioned")
    bill = monthly_bill(p, StackDefaults(), AwsModel())
    wcu = bill["lines"]["dynamodb_provisioned_wcu"]
    assert wcu["quantity"] / 720 == pytest.approx(100 * 6.64 / 0.7)  # 100 runs a second
    assert bill["lines"]["dynamodb_spike_write_request_units"]["quantity"] == 0
    assert bill["reserved_capacity_option"]["one_year"] == pytest.approx(
        (wcu["monthly_usd"] + bill["lines"]["dynamodb_provisioned_rcu"]["monthly_usd"]) * 0.54, abs=0.02
    )


def test_the_workers_duration_is_billed_by_wall_time_and_grows_with_the_target() -> None:
    p = BillInputs(runs_per_day=1_000_000, jobs=1, spike_jobs=0, teams=1)
    fast, slow = (
        monthly_bill(p, StackDefaults(worker_memory_mb=256), AwsModel(target_ms=ms))["lines"][
            "lambda_worker_duration"
        ]
        for ms in (10, 1000)
    )
    # 3 M invocations a month, each waiting 990 ms more, at 0.25 GB
    assert slow["quantity"] - fast["quantity"] == pytest.approx(3_000_000 * 0.99 * 0.25, rel=1e-6)


def test_lambda_active_tracing_keeps_one_invocation_a_second_and_5_percent_of_the_rest() -> None:
    assert xray_traces_per_month(0.5) == pytest.approx(0.5 * 2_592_000)
    assert xray_traces_per_month(21.0) == pytest.approx((1 + 0.05 * 20) * 2_592_000)


def test_a_group_rests_only_when_nothing_of_it_is_due_within_the_quiet_horizon() -> None:
    assert busy_fraction(0, 4) == 0
    assert busy_fraction(20_000_000, 4) == pytest.approx(1.0)
    assert 0.05 < busy_fraction(1000, 1) < 0.7


def test_a_spike_nobody_forecast_starts_late_on_provisioned_tables_and_is_never_dropped() -> None:
    spike = UnforeseenSpike(
        spike_runs=500_000, write_units_per_run=8.2, provisioned_wcu=2651, on_demand_runs_per_s=11_000
    )
    late = spike.delay()
    assert late["switched"] and 600 < late["last_run_late_s"] < 700  # 5 + 5 minutes, then on demand
    small = replace(spike, spike_runs=20_000).delay()
    assert not small["switched"] and small["runs_started_before_the_switch"] == 20_000


def test_plan_json_prints_the_bill_and_its_figure_a_million(capsys: pytest.CaptureFixture[str]) -> None:
    cli.main(["plan", "--jobs", "10M", "--runs-per-day", "20M", "--spike-jobs", "500k", "--json"])
    plan = json.loads(capsys.readouterr().out)
    assert plan["usd_per_million_runs"] == plan["bill"]["usd_per_million_runs"] > 0
    assert plan["eventbridge_scheduler"]["aws_targets_usd_per_million_runs"] == 0.977
    cli.main(["plan", "--capacity-mode", "on_demand", "--teams", "1"])
    text = capsys.readouterr().out
    assert "the month's bill (on demand tables), line by line:" in text
    assert "dynamodb write request units" in text and "EventBridge Scheduler" in text
