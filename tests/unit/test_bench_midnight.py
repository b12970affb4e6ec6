"""`duetime bench midnight --simulate`: the real poller and worker on the twin under a modelled AWS, small.

Each run is a few thousand jobs at most, so the suite takes seconds; the full 500,000 is in BENCHMARKS.md.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

import pytest

from duetime.bench.midnight import MIDNIGHT, midnight_jobs, run_midnight
from duetime.bench.midnight_model import AwsModel, KeyMeter, esm_concurrency
from duetime.bench.spike import spike_jobs
from duetime.claim_plan import initial_state
from duetime.cli import main

SMALL = AwsModel()


def test_every_job_is_started_once_and_none_is_lost() -> None:
    result = run_midnight(1500, model=SMALL)

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
    fast = run_midnight(1500, model=replace(SMALL, target_ms=100))
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
    assert esm_concurrency(replace(model, max_concurrency=1000), 600) == 1000


def test_the_event_source_in_provisioned_mode_starts_with_its_pollers_and_grows_faster() -> None:
    model = replace(AwsModel(), esm_min_pollers=2, esm_max_pollers=100)
    assert esm_concurrency(model, 0) == 20  # 10 invocations a poller
    assert esm_concurrency(model, 6.0) == 120  # 1,000 a minute
    assert esm_concurrency(model, 600) == 1000  # the maximum pollers'; MaximumConcurrency (100) is not used
    assert esm_concurrency(replace(model, esm_max_pollers=2000), 3600) == 20_000  # Lambda's ceiling


def test_an_exact_burst_starts_sooner_with_the_event_source_in_provisioned_mode() -> None:
    standard = run_midnight(6000, model=SMALL)
    provisioned = run_midnight(6000, model=replace(SMALL, esm_min_pollers=2))

    assert provisioned["seconds_to_all_started"] < standard["seconds_to_all_started"]
    assert provisioned["lost"] == standard["lost"] == 0
    assert provisioned["duplicate_runs"] == 0


def test_the_key_meter_holds_back_writes_past_one_seconds_units() -> None:
    meter = KeyMeter(limit=100)
    assert meter.write("k", 100, at=0.0) == 0.0
    assert meter.write("k", 50, at=0.0) == pytest.approx(0.5)
    assert meter.write("k", 10, at=5.0) == 0.0
    assert meter.keys_over() == ["k"] and meter.hottest() == ("k", 150)


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
    ):
        assert field in result


def test_the_cli_refuses_to_run_without_simulate() -> None:
    with pytest.raises(SystemExit):
        main(["bench", "midnight", "--jobs", "10"])


def test_duetime_plans_arithmetic_agrees_with_the_simulation_within_the_models_error() -> None:
    """`duetime plan`'s spike estimate (``bench/plan_midnight.py``) against the simulation of the same spike
    on the same model: each figure within a factor of 2, the error BENCHMARKS.md states for the model's
    latencies. (The 500,000-job run, where the pollers fall behind and sweeps claim in pages, is in
    BENCHMARKS.md; it takes minutes.)"""
    result = run_midnight(20_000, model=SMALL)

    ratios = result["simulation_over_plan"]
    assert set(ratios) == {
        "seconds_to_all_claimed",
        "seconds_to_all_started",
        "worker_starts_per_s_each",
        "workers_needed",
        "peak_claims_per_s_per_partition",
        "peak_write_units_per_s_hottest_key",
    }
    assert all(0.5 <= ratio <= 2.0 for ratio in ratios.values()), ratios
