"""`duetime plan` reproduces the design's arithmetic for the seed's assumptions."""

import pytest

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
    assert plan["workers_for_peak"] == 84 and plan["workers_with_headroom"] == 92
    assert plan["job_table_gb"] == 1.0 and plan["run_history_gb"] == 120.0
    assert plan["warnings"] == []


def test_each_poller_preloads_its_groups_share_of_the_spike_at_the_measured_bytes_per_job() -> None:
    seed = capacity_plan(PlanInputs())["poller_preload_mb"]  # 500k due in the minute, 4 poller groups
    assert seed == pytest.approx(125_000 * MEASURED_PRELOAD_BYTES_PER_JOB / 2**20, abs=0.05)
    assert MEASURED_PRELOAD_BYTES_PER_JOB <= 600  # the goal a compact preload was built for
    alone = capacity_plan(PlanInputs(poller_groups=1))["poller_preload_mb"]
    assert alone == pytest.approx(4 * seed, abs=0.1)


def test_a_spike_too_hot_for_a_partition_key_is_flagged() -> None:
    plan = capacity_plan(PlanInputs(spike_jobs=2_000_000, partitions=16))
    assert any("reap-index shard key" in w for w in plan["warnings"])


def test_counts_and_prescale_minutes() -> None:
    assert parse_count("500k") == 500_000 and parse_count("10M") == 10_000_000 and parse_count("1.5k") == 1500
    with pytest.raises(ValueError):
        parse_count("lots")
    load = {"2026-12-01T00:00": 120_000, "2026-12-01T00:01": 3_000}
    assert minutes_needing_prescale(load, baseline_workers=10, worker_rate=100) == [
        ("2026-12-01T00:00", 120_000, 20)
    ]
