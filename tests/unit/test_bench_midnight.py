"""`duetime bench midnight --simulate`: the real poller and worker on the twin under a modelled AWS, small.

Each run is a few thousand jobs at most, so the suite takes seconds; the full 500,000 is in BENCHMARKS.md.
"""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from duetime.capacity.midnight_model import AwsModel, KeyMeter, esm_activation, esm_concurrency
from duetime.capacity.plan import PlanInputs, capacity_plan
from duetime.cli import main
from duetime.domain.claim_plan import initial_state
from duetime.scheduling.prescale import PrescalePolicy
from duetime_bench.midnight import MIDNIGHT, midnight_jobs, plan_estimate, run_midnight
from duetime_bench.spike import spike_jobs

SMALL = AwsModel()


@functools.cache
def small_midnight(jobs: int) -> dict[str, Any]:
    """``run_midnight(jobs, model=SMALL)``, simulated once a process for the tests that read that same
    midnight (they only read it)."""
    return run_midnight(jobs, model=SMALL)


def test_every_job_is_started_once_and_none_is_lost() -> None:
    result = small_midnight(1500)

    assert result["lost"] == 0 and result["runs_started"] == 1500
    assert result["runs_created"] == 1500 and result["duplicate_runs"] == 0
    assert result["run_statuses"] == {"succeeded": 1500}
    assert result["poller_errors"] == 0 and result["failed_messages"] == 0
    assert 0 < result["seconds_to_all_claimed"] <= result["seconds_to_all_started"]
    assert result["goal_met"] is True
    assert "seconds_to_all_started" in result["decided_by_model"]


def test_with_jitter_runs_start_near_their_jittered_second() -> None:
    result = run_midnight(800, jitter=60, exact_fraction=0.05, model=SMALL)

    assert result["lost"] == 0 and result["duplicate_runs"] == 0
    assert 30 < result["seconds_to_all_started"] <= 62  # spread over the window, not all at :00
    assert result["start_lateness_p50_s"] < 2


def test_slower_targets_need_more_workers_and_more_time() -> None:
    assert SMALL.target_ms == 100
    fast = small_midnight(1500)
    slow = run_midnight(1500, model=replace(SMALL, target_ms=2000))

    assert slow["worker_starts_per_s_each"] < fast["worker_starts_per_s_each"]
    assert slow["workers_needed"] > fast["workers_needed"]
    assert slow["seconds_to_all_started"] > fast["seconds_to_all_started"]
    assert slow["lost"] == fast["lost"] == 0


def test_more_poller_groups_claim_sooner() -> None:
    four = run_midnight(2000, model=replace(SMALL, poller_groups=4))
    sixteen = run_midnight(2000, model=replace(SMALL, poller_groups=16))

    assert sixteen["seconds_to_all_claimed"] < four["seconds_to_all_claimed"]
    assert sixteen["poller_peak_rows_held"] < four["poller_peak_rows_held"]


def test_a_key_past_its_write_limit_is_reported_and_throttled() -> None:
    result = run_midnight(1500, model=replace(SMALL, key_write_limit=20))

    assert result["keys_over_limit"] > 0
    assert result["peak_write_units_per_s_hottest_key"] > 20
    assert result["throttled_write_units"] > 0
    assert result["goal_met"] is False
    assert result["lost"] == 0  # throttled writes wait; none is dropped


def test_the_event_source_grows_by_its_published_rate() -> None:
    model = AwsModel()
    assert esm_concurrency(model, 0) == 5
    assert esm_concurrency(model, 1.0) == 10  # 300 a minute: 5 a second
    assert esm_concurrency(model, 600) == model.max_concurrency
    assert esm_concurrency(replace(model, max_concurrency=500), 600) == 500


def test_the_event_source_in_provisioned_mode_starts_with_its_pollers_and_grows_faster() -> None:
    model = replace(AwsModel(), esm_min_pollers=2, esm_max_pollers=100)
    assert esm_concurrency(model, 0) == 20  # 10 invocations a poller
    assert esm_concurrency(model, 6.0) == 120  # 1,000 a minute
    # The maximum pollers' 1,000 (MaximumConcurrency's 100 is not used), within the account's 1,000 less
    # the pollers' own:
    assert esm_concurrency(model, 600) == 1000 - model.poller_groups
    big = replace(model, esm_max_pollers=2000, lambda_account_concurrency=30_000)
    assert esm_concurrency(big, 3600) == 20_000  # the event source's ceiling


def test_the_event_source_never_runs_more_than_the_account_lets_it() -> None:
    model = replace(AwsModel(), max_concurrency=1000, lambda_account_concurrency=300, poller_groups=8)
    assert model.esm_cap() == 292 and model.esm_cap_bound_by() == "lambda_account_concurrency"
    assert esm_concurrency(model, 3600) == 292
    assert AwsModel().esm_cap_bound_by() == "max_concurrency"


def test_lambda_adds_at_most_a_thousand_environments_every_ten_seconds() -> None:
    model = replace(
        AwsModel(), esm_min_pollers=200, esm_max_pollers=500, lambda_account_concurrency=30_000
    )  # 2,000 batches at once by the event source's own count
    assert model.esm_start() == 2000
    assert esm_concurrency(model, 0) == 1000 and esm_concurrency(model, 9.9) == 1000
    assert esm_concurrency(model, 10) == 2000
    assert esm_activation(model, 999) == 0 and esm_activation(model, 1000) == 10.0
    assert esm_activation(model, 3999) == pytest.approx(120.0)  # then its own ramp: 1,000 a minute


def test_a_table_takes_its_warm_throughput_or_twice_its_previous_peak_within_the_quota() -> None:
    model = AwsModel()
    assert model.table_write_capacity() == 4000  # a new on-demand table
    assert replace(model, ddb_previous_peak_wru_per_s=9000).table_write_capacity() == 18_000
    assert replace(model, ddb_warm_wru_per_s=60_000).table_write_capacity() == 40_000  # the table quota
    raised = replace(model, ddb_warm_wru_per_s=60_000, ddb_table_quota_wru_per_s=80_000)
    assert raised.table_write_capacity() == 60_000


def test_a_table_past_its_write_capacity_throttles_and_is_reported() -> None:
    cold = replace(SMALL, ddb_warm_wru_per_s=300, ddb_warm_write_units="", claims_paced=False)
    result = run_midnight(1500, model=cold)

    assert set(result["table_write_capacity"].values()) == {300}
    assert "runs" in result["tables_over_capacity"]
    assert max(result["peak_table_wru_per_s"].values()) > 300
    assert result["throttled_requests_by_limit"]["table_write_capacity"] > 0
    assert result["time_spent_s"]["poller"]["table_throttle"] > 0
    assert result["goals"]["no_table_or_index_over_its_capacity"] is False and result["goal_met"] is False
    assert result["lost"] == 0 and result["duplicate_runs"] == 0  # throttled writes wait; none is dropped
    roomy = small_midnight(1500)
    assert roomy["tables_over_capacity"] == []
    assert roomy["throttled_requests_by_limit"]["table_write_capacity"] == 0
    assert result["seconds_to_all_claimed"] > roomy["seconds_to_all_claimed"]


def test_paced_claims_keep_every_table_within_its_capacity() -> None:
    """The same cold tables with the claims paced (``duetime.scheduling.claim_pace``: each group its share of
    what the tables take of claims and starts): no table is asked past its capacity, and every run starts,
    later."""
    cold = replace(SMALL, ddb_warm_wru_per_s=300, ddb_warm_write_units="")
    paced = run_midnight(1500, model=cold)
    assert paced["tables_over_capacity"] == [] and paced["lost"] == 0 and paced["duplicate_runs"] == 0
    assert max(paced["peak_table_wru_per_s"].values()) <= 300
    assert paced["seconds_to_all_claimed"] > 1500 / (300 / 3.06) * 0.8  # held to about 98 claims a second


def test_every_table_and_index_a_run_writes_is_charged_by_item_size() -> None:
    result = run_midnight(500, model=SMALL)

    assert set(result["peak_table_wru_per_s"]) == {"jobs", "jobs/due", "runs", "runs/reap", "control"}
    units = result["write_units_per_item"]
    assert units["job"] >= 1 and units["run"] >= 1 and units["finished run"] >= units["run"]
    cost = result["spike_cost_usd"]
    assert cost["dynamodb_writes"] > 0 and cost["worker_duration"] > 0 and cost["sqs_requests"] > 0
    assert cost["total"] == pytest.approx(sum(v for k, v in cost.items() if k != "total"), abs=1e-3)


def test_the_result_says_which_calibration_it_charged_and_what_a_flag_overrode() -> None:
    result = run_midnight(300, model=replace(SMALL, worker_cpu_ms_per_run=9.0))

    calibration = result["calibration"]
    assert calibration["commit"] and calibration["measured_at"] and calibration["runs_measured"] >= 1
    assert calibration["overridden_by_flags"] == {"worker_cpu_ms_per_run": 9.0}
    assert result["model"]["poller_claim_cpu_us_per_run"] == calibration["poller_claim_cpu_us_per_run"]


def test_each_phase_says_which_limit_bound_it() -> None:
    slow_claims = run_midnight(2000, model=replace(SMALL, poller_memory_mb=128, esm_min_pollers=20))
    assert slow_claims["bound_by"]["claims"].startswith("CPU")
    assert slow_claims["bound_by"]["starts"] == "claims"
    capped = run_midnight(3000, model=replace(SMALL, max_concurrency=5, poller_groups=16))
    assert capped["bound_by"]["starts"] == "max_concurrency"


def test_an_exact_burst_starts_sooner_with_the_event_source_in_provisioned_mode() -> None:
    standard = run_midnight(6000, model=replace(SMALL, esm_forecast_pollers=False))
    provisioned = run_midnight(6000, model=replace(SMALL, esm_min_pollers=2))

    assert provisioned["seconds_to_all_started"] < standard["seconds_to_all_started"]
    assert provisioned["lost"] == standard["lost"] == 0
    assert provisioned["duplicate_runs"] == 0


def test_the_key_meter_holds_back_writes_past_one_seconds_units() -> None:
    meter = KeyMeter(limit=100)
    assert meter.write("k", 100, at=0.0) == 0.0
    assert meter.write("k", 50, at=0.25) == pytest.approx(0.75)  # the next second has room
    assert meter.write("k", 60, at=0.5) == pytest.approx(1.5)  # second 1 holds 50 more, second 2 the rest
    assert meter.write("k", 10, at=5.0) == 0.0
    assert meter.keys_over() == ["k"] and meter.hottest() == ("k", 210)
    assert meter.throttled_writes == 2 and meter.throttled_units == 110


def test_the_key_meter_counts_a_seconds_units_whichever_write_comes_first() -> None:
    late_first, early_first = KeyMeter(limit=100), KeyMeter(limit=100)
    assert late_first.write("k", 60, at=0.9) == 0.0 and late_first.write("k", 40, at=0.1) == 0.0
    assert early_first.write("k", 40, at=0.1) == 0.0 and early_first.write("k", 60, at=0.9) == 0.0
    assert late_first.throttled_writes == early_first.throttled_writes == 0


def test_the_jobs_are_scheduled_as_spike_jobs_and_initial_state_would() -> None:
    created = MIDNIGHT - timedelta(minutes=1)
    jobs = midnight_jobs(200, MIDNIGHT, 300, 0.1, created, teams=7)
    reference = spike_jobs(1, MIDNIGHT, 300, 0.0, "https://hooks.example.com/duetime", created)[0]

    assert sum(job.exact for job in jobs) == 20 and {job.team for job in jobs} == {f"t{i}" for i in range(7)}
    for job in jobs:
        assert job.state == initial_state(job, created)
        assert job.schedule == reference.schedule and job.jitter_seconds == reference.jitter_seconds
    offsets = {(job.state.next_fire_at - MIDNIGHT).total_seconds() for job in jobs if not job.exact}  # type: ignore[operator]
    assert len(offsets) > 50 and max(offsets) < 300


def test_the_cli_runs_it_and_prints_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "midnight", "--simulate", "--jobs", "300", "--target-ms", "50", "--json"])

    out = capsys.readouterr().out.strip().splitlines()
    assert code == 0 and len(out) == 1
    result = json.loads(out[0])
    assert result["jobs"] == 300 and result["lost"] == 0 and result["model"]["target_ms"] == 50
    for field in (
        "seconds_to_all_claimed",
        "seconds_to_all_started",
        "peak_claims_per_s_per_partition",
        "peak_write_units_per_s_hottest_key",
        "poller_peak_rss_mb",
        "workers_needed",
        "decided_by_model",
        "helpers_invoked",
        "peak_table_wru_per_s",
        "throttled_requests",
        "spike_cost_usd",
        "bound_by",
        "calibration",
    ):
        assert field in result


def test_the_cli_refuses_to_run_without_simulate() -> None:
    with pytest.raises(SystemExit):
        main(["bench", "midnight", "--jobs", "10"])


def test_duetime_plans_arithmetic_agrees_with_the_simulation_within_the_models_error() -> None:
    """`duetime plan`'s spike estimate (``bench/plan_midnight.py``) against the simulation of the same spike
    on the same model: each figure within a factor of 2, the error BENCHMARKS.md states for the model's
    latencies. (The 500,000-job run, where the pollers fall behind and sweeps claim in pages, is in
    BENCHMARKS.md; it takes minutes.)  Each poller's minute is past what it claims alone, so both fan out."""
    result = run_midnight(20_000, model=replace(SMALL, fan_out_holder_rows=2_000, claims_paced=False))

    ratios = result["simulation_over_plan"]
    assert set(ratios) == {
        "helpers_invoked",
        "seconds_to_all_claimed",
        "seconds_to_all_started",
        "worker_starts_per_s_each",
        "workers_needed",
        "peak_claims_per_s_per_partition",
        "peak_write_units_per_s_hottest_key",
        "spike_cost_usd",  # the bills' totals
    }
    # The peaks are bursty: a claim call charges its CPU before its writes, so a batch's claims land within
    # one second and the next second has none, and the jobs' ids (random) decide the hottest key. They run
    # 1.8-2.3x the plan's even spread; every other figure is within the factor of 2.
    bursty = {"peak_claims_per_s_per_partition", "peak_write_units_per_s_hottest_key"}
    assert all(0.5 <= ratio <= 2.0 for name, ratio in ratios.items() if name not in bursty), ratios
    assert all(0.5 <= ratios[name] <= 2.5 for name in bursty), ratios


def test_the_plan_the_simulation_is_compared_with_charges_the_stacks_warm_throughput_as_it_does() -> None:
    """The seed's midnight at the stack's defaults: the figure ``bench midnight`` puts beside the simulation
    is the one ``duetime plan`` prints (its tables pre-warmed), not a fresh table's 4,000 units a second,
    which held it to 424 s while the simulation, metering the warm tables, started everything in 47 s."""
    planned = capacity_plan(PlanInputs(spike_exact_fraction=1.0))["spike_on_the_aws_model"]
    as_run = replace(AwsModel(), esm_min_pollers=PrescalePolicy().pollers_for(500_000))  # as run_midnight
    compared = plan_estimate(500_000, 60, as_run, exact_fraction=1.0)
    assert compared["seconds_to_all_started"] == planned["seconds_to_all_started"] <= 60


def test_a_busy_minute_fans_out_to_helpers_and_starts_every_run_once() -> None:
    """Holders whose minute holds more than they claim alone hand slices to helpers
    (``duetime.scheduling.fan_out``): the real holder and helper code, on the model's clock. Every run starts
    once, and sooner."""
    alone = run_midnight(8000, model=replace(SMALL, fan_out=False, poller_memory_mb=256))
    helped = run_midnight(8000, model=replace(SMALL, fan_out_holder_rows=500, poller_memory_mb=256))
    assert alone["helpers_invoked"] == 0 and helped["helpers_invoked"] >= 4
    for result in (alone, helped):
        assert result["lost"] == 0 and result["duplicate_runs"] == 0 and result["poller_errors"] == 0
    assert helped["seconds_to_all_claimed"] < alone["seconds_to_all_claimed"]
    assert helped["spike_cost_usd"]["helper_duration"] > 0 == alone["spike_cost_usd"]["helper_duration"]
    assert helped["time_spent_s"]["helper"]["cpu"] > 0


def test_the_cli_takes_the_models_switches_and_warm_units_as_the_stack_writes_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(
        [
            "bench", "midnight", "--simulate", "--jobs", "200", "--json",
            "--fan-out", "false", "--claims-paced", "no", "--ddb-warm-write-units", "runs:9000",
        ]
    )  # fmt: skip
    result = json.loads(capsys.readouterr().out)
    assert (result["model"]["fan_out"], result["model"]["claims_paced"]) == (False, False)
    assert result["table_write_capacity"]["runs"] == 9000 and result["table_write_capacity"]["jobs"] == 4000
    with pytest.raises(SystemExit):
        main(["bench", "midnight", "--simulate", "--fan-out", "maybe"])
