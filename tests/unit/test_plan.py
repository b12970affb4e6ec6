"""`duetime plan` reproduces the design's arithmetic for the seed's assumptions."""

import pytest

from duetime.bench.fixed_cost import StackDefaults
from duetime.bench.plan import (
    MEASURED_PRELOAD_BYTES_PER_JOB,
    PlanInputs,
    capacity_plan,
    minutes_needing_prescale,
    parse_count,
)


def test_the_seed_workload() -> None:
    plan = capacity_plan(PlanInputs())
    assert plan["average_starts_per_s"] == pytest.approx(231.5, abs=0.1)
    assert plan["peak_starts_per_s"] == pytest.approx(8333.3, abs=0.1)
    assert plan["peak_over_average"] == 36.0
    assert plan["peak_claims_per_s_per_partition"] == pytest.approx(130.2, abs=0.1)
    assert plan["job_table_gb"] == 1.0 and plan["run_history_gb"] == 120.0
    seed = capacity_plan(PlanInputs(worker_rate=100))  # the seed's assumption: 100 starts/s a worker
    assert seed["workers_for_peak"] == 84 and seed["workers_with_headroom"] == 92


def test_workers_are_sized_at_the_aws_models_rate_unless_one_is_given() -> None:
    plan = capacity_plan(PlanInputs())
    spike = plan["spike_on_the_aws_model"]
    assert plan["worker_rate"] == spike["worker_starts_per_s_each"] == pytest.approx(30.0, abs=0.1)
    assert plan["workers_for_peak"] == 278 and plan["workers_with_headroom"] == 306


def test_the_seed_spike_on_the_aws_model_is_late_and_says_why() -> None:
    spike = capacity_plan(PlanInputs())["spike_on_the_aws_model"]
    # 125,000 claims a poller at ~922 a second (a version read, two requests of 25 claims); 100 workers at
    # ~30 starts a second once the event source has grown to them; a poller behind its spike claims a
    # sweep's page (250) of a partition at once, and that burst's results come back together: 2 writes a
    # claim on the partition's reap shard.
    assert spike["seconds_to_all_claimed"] == pytest.approx(135.6, abs=0.5)
    assert spike["seconds_to_all_started"] == pytest.approx(175.7, abs=0.5)
    assert spike["peak_claims_per_s_per_partition"] == 250
    assert spike["peak_write_units_per_s_hottest_key"] == 500
    (late,) = capacity_plan(PlanInputs())["warnings"]
    assert "takes 176 s to start, not 60" in late and "278 workers" in late
    # 300 s of jitter, 5% exact: claimed in time, no sweep's burst; the exact 5% fall due at once and a
    # poller fires them as fast as it can (~1,153 a second over its 16 partitions).
    spread = capacity_plan(PlanInputs(spike_window_s=360))
    assert spread["spike_on_the_aws_model"]["peak_claims_per_s_per_partition"] == pytest.approx(72.1, abs=0.1)
    assert spread["warnings"] == []
    all_jittered = capacity_plan(PlanInputs(spike_window_s=360, spike_exact_fraction=0))
    assert all_jittered["spike_on_the_aws_model"]["peak_claims_per_s_per_partition"] == pytest.approx(
        26.0, abs=0.1
    )


def test_the_exact_seed_spike_starts_in_time_with_sixteen_groups_and_the_event_source_provisioned() -> None:
    # 16 groups claim in a quarter of the time; provisioned mode starts 20 workers and adds 1,000 a minute.
    inputs = PlanInputs(poller_groups=16)
    standard = capacity_plan(inputs, StackDefaults(poller_groups=16))
    provisioned = capacity_plan(inputs, StackDefaults(poller_groups=16, worker_min_pollers=2))
    assert standard["spike_on_the_aws_model"]["seconds_to_all_claimed"] == pytest.approx(33.9, abs=0.5)
    assert standard["spike_on_the_aws_model"]["seconds_to_all_started"] > 120  # the standard ramp
    assert provisioned["spike_on_the_aws_model"]["seconds_to_all_started"] == pytest.approx(43.5, abs=0.5)
    assert provisioned["warnings"] == []
    assert provisioned["monthly_fixed_parts"]["event_pollers_minimum"] == pytest.approx(13.32, abs=0.01)


def test_bigger_pollers_claim_the_spike_sooner() -> None:
    default = capacity_plan(PlanInputs())["spike_on_the_aws_model"]
    bigger = capacity_plan(PlanInputs(), StackDefaults(poller_memory_mb=1769))["spike_on_the_aws_model"]
    assert bigger["seconds_to_all_claimed"] < default["seconds_to_all_claimed"] / 2  # a vCPU, not 0.29


def test_each_poller_preloads_its_groups_share_of_the_spike_at_the_measured_bytes_per_job() -> None:
    seed = capacity_plan(PlanInputs())["poller_preload_mb"]  # 500k due in the minute, 4 poller groups
    assert seed == pytest.approx(125_000 * MEASURED_PRELOAD_BYTES_PER_JOB / 2**20, abs=0.05)
    assert MEASURED_PRELOAD_BYTES_PER_JOB <= 600  # the goal a compact preload was built for
    alone = capacity_plan(PlanInputs(poller_groups=1))["poller_preload_mb"]
    assert alone == pytest.approx(4 * seed, abs=0.1)


def test_a_spike_too_hot_for_a_partition_key_is_flagged() -> None:
    plan = capacity_plan(PlanInputs(spike_jobs=2_000_000, partitions=16))
    assert any("due-index bucket key" in w for w in plan["warnings"])
    # A reap ticket covers 18 runs of a claim (reap_tickets): the reap shard is no longer the hot key.
    assert not any("reap-index shard key" in w for w in plan["warnings"])


def test_counts_and_prescale_minutes() -> None:
    assert parse_count("500k") == 500_000 and parse_count("10M") == 10_000_000 and parse_count("1.5k") == 1500
    with pytest.raises(ValueError):
        parse_count("lots")
    load = {"2026-12-01T00:00": 120_000, "2026-12-01T00:01": 3_000}
    assert minutes_needing_prescale(load, baseline_workers=10, worker_rate=100) == [
        ("2026-12-01T00:00", 120_000, 20)
    ]


def test_a_late_spike_names_the_cheapest_deploy_flags_that_start_it_in_time() -> None:
    plan = capacity_plan(PlanInputs())  # the seed's 500,000, all exact, on the default stack: 176 s
    flags = plan["flags_for_the_spike"]
    assert flags["flags"] == "-c partition_groups=16 -c worker_min_pollers=2"
    assert flags["seconds_to_all_started"] <= 60
    assert f"Deployed with {flags['flags']} it starts in" in plan["warnings"][0]
    # The flags do what they say: deployed so, the plan has no warning and costs what the flags said.
    flagged = capacity_plan(
        PlanInputs(poller_groups=16), StackDefaults(poller_groups=16, worker_min_pollers=2)
    )
    assert flagged["warnings"] == [] and flagged["flags_for_the_spike"] is None
    assert flagged["monthly_fixed_usd"] == flags["monthly_fixed_usd"]
    assert flags["more_than_now_usd"] == pytest.approx(
        flags["monthly_fixed_usd"] - plan["monthly_fixed_usd"], abs=0.01
    )
    # And none cheaper does: 8 groups claim too slowly, standard mode grows workers too slowly, and 32
    # groups cost more a month.
    eight = capacity_plan(PlanInputs(poller_groups=8), StackDefaults(poller_groups=8, worker_min_pollers=2))
    assert eight["spike_on_the_aws_model"]["seconds_to_all_started"] > 60
    standard = capacity_plan(PlanInputs(poller_groups=64), StackDefaults(poller_groups=64))
    assert standard["spike_on_the_aws_model"]["seconds_to_all_started"] > 60
    more = capacity_plan(PlanInputs(poller_groups=32), StackDefaults(poller_groups=32, worker_min_pollers=2))
    assert more["monthly_fixed_usd"] > flags["monthly_fixed_usd"]


def test_a_spike_in_time_names_no_flags_and_one_no_flag_helps_says_so() -> None:
    assert capacity_plan(PlanInputs(spike_window_s=360))["flags_for_the_spike"] is None
    huge = capacity_plan(PlanInputs(spike_jobs=50_000_000))
    assert huge["flags_for_the_spike"] is None
    assert "No partition_groups and worker_min_pollers the plan tries start it in time" in huge["warnings"][0]
