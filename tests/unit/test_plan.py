"""`duetime plan` reproduces the design's arithmetic for the seed's assumptions."""

import json

import pytest

from duetime import cli
from duetime.bench import calibration
from duetime.bench.fixed_cost import StackDefaults
from duetime.bench.plan import (
    MEASURED_PRELOAD_BYTES_PER_JOB,
    PlanInputs,
    capacity_plan,
    minutes_needing_prescale,
    parse_count,
)
from duetime.warm_throughput import DEFAULT_WARM_WRITE_UNITS, TABLE_QUOTA_UNITS, format_units, parse_units


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
    assert plan["worker_rate"] == spike["worker_starts_per_s_each"] == pytest.approx(30.9, abs=0.1)
    assert plan["workers_for_peak"] == 270 and plan["workers_with_headroom"] == 297


def test_the_seed_spike_on_the_aws_model_is_late_and_says_why() -> None:
    spike = capacity_plan(PlanInputs())["spike_on_the_aws_model"]
    # 125,000 claims a poller at ~264 a second (the calibrated 1.01 ms of CPU a claim at 512 MB's 0.29
    # vCPU, and a version read and two requests of 25 claims); a poller behind its spike claims a sweep's
    # page (250) of a partition at once, and that burst's results come back together: 2 writes a claim on
    # the partition's reap shard.
    assert spike["seconds_to_all_claimed"] == pytest.approx(472.7, abs=0.5)
    assert spike["seconds_to_all_started"] == pytest.approx(472.7, abs=0.5)
    assert spike["peak_claims_per_s_per_partition"] == 250
    assert spike["peak_write_units_per_s_hottest_key"] == 500
    late, *tables = capacity_plan(PlanInputs())["warnings"]
    assert "takes 473 s to start, not 60" in late and "270 workers" in late
    # The default stack pre-warms the runs and control tables for the starts at the workers' pace ...
    assert tables == []
    # ... which, on tables as new, write them past a new table's 4,000 units.
    cold = capacity_plan(PlanInputs(), StackDefaults(warm_write_units={}))
    assert [w.split(":")[0] for w in cold["warnings"][1:]] == ["the runs table", "the control table"]
    assert "-c warm_write_units=runs:8000" in cold["warnings"][1]
    assert cold["warm_write_units_needed"] == {"runs": 8000, "control": 7000}
    # 300 s of jitter, 5% exact: still late (473 s of claims), the runs table still over 4,000.
    spread = capacity_plan(PlanInputs(spike_window_s=360), StackDefaults(warm_write_units={}))
    assert "takes 473 s to start, not 360" in spread["warnings"][0]
    assert spread["spike_on_the_aws_model"]["peak_table_wru_per_s_asked"]["runs"] == pytest.approx(
        3894.4, abs=1
    )


def test_a_fresh_tables_due_index_holds_the_claims_to_two_thousand_a_second() -> None:
    # 16 groups would claim 4,231 a second, but each claim moves its job's due-index entry (a delete and a
    # put: 2 units) and a new on-demand index takes 4,000 units a second: 250 s for 500,000.
    inputs = PlanInputs(poller_groups=16)
    provisioned = capacity_plan(inputs, StackDefaults(poller_groups=16, worker_min_pollers=2))
    assert provisioned["spike_on_the_aws_model"]["seconds_to_all_claimed"] == pytest.approx(250.0, abs=0.1)
    assert any(
        w.startswith("the jobs table's due index: the spike asks for 8,462") for w in provisioned["warnings"]
    )
    assert provisioned["monthly_fixed_parts"]["event_pollers_minimum"] == pytest.approx(13.32, abs=0.01)
    # Pre-warmed to the table quota, the index is no longer what holds them: the pollers' CPU is.
    warm = capacity_plan(
        PlanInputs(poller_groups=16, table_warm_write_units=40_000),
        StackDefaults(poller_groups=16, worker_min_pollers=2),
    )
    assert warm["spike_on_the_aws_model"]["seconds_to_all_claimed"] == pytest.approx(118.2, abs=0.5)


def test_a_table_asked_past_the_account_quota_says_to_request_an_increase() -> None:
    plan = capacity_plan(PlanInputs(poller_groups=64), StackDefaults(poller_groups=64, worker_min_pollers=2))
    (runs,) = [w for w in plan["warnings"] if w.startswith("the runs table")]
    assert "over the account's table quota of 40,000" in runs and "Service Quotas" in runs


def test_bigger_pollers_claim_the_spike_sooner() -> None:
    warm = PlanInputs(table_warm_write_units=40_000)  # the due index not what holds the claims back
    default = capacity_plan(warm)["spike_on_the_aws_model"]
    bigger = capacity_plan(warm, StackDefaults(poller_memory_mb=1769))["spike_on_the_aws_model"]
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
    plan = capacity_plan(PlanInputs())  # the seed's 500,000, all exact, on the default stack: 473 s
    flags = plan["flags_for_the_spike"]
    # The tables the default stack does not pre-warm enough for 32 groups' pace are named in the flag with
    # their units; the runs/reap index (283 units a second) takes the spike as it is.
    warm = {"jobs": 9000, "jobs/due": 17000, "runs": 26000, "control": 17000}
    assert flags["flags"] == (
        "-c partition_groups=32 -c worker_min_pollers=2 "
        "-c warm_write_units=jobs:9000,jobs/due:17000,runs:26000,control:17000"
    )
    assert flags["seconds_to_all_started"] <= 60
    assert flags["warm_write_units"] == warm
    assert f"Deployed with {flags['flags']} it starts in" in plan["warnings"][0]
    assert (
        "one-time purchase of warm throughput (write units a second: jobs 9,000, jobs/due 17,000"
        in (plan["warnings"][0])
    )
    # The flags do what they say: deployed so (the stack config's merge of the flag over its defaults), the
    # plan has no warning and costs what the flags said.
    flagged = capacity_plan(
        PlanInputs(poller_groups=32),
        StackDefaults(
            poller_groups=32, worker_min_pollers=2, warm_write_units={**DEFAULT_WARM_WRITE_UNITS, **warm}
        ),
    )
    assert flagged["warnings"] == [] and flagged["flags_for_the_spike"] is None
    assert flagged["warm_write_units_needed"] == {}
    assert flagged["monthly_fixed_usd"] == flags["monthly_fixed_usd"]
    assert flags["more_than_now_usd"] == pytest.approx(
        flags["monthly_fixed_usd"] - plan["monthly_fixed_usd"], abs=0.01
    )
    # And none cheaper does: 16 groups claim too slowly even on warm tables, standard mode grows workers too
    # slowly, and 64 groups cost more a month.
    warm = 40_000
    sixteen = capacity_plan(
        PlanInputs(poller_groups=16, table_warm_write_units=warm),
        StackDefaults(poller_groups=16, worker_min_pollers=2),
    )
    assert sixteen["spike_on_the_aws_model"]["seconds_to_all_started"] > 60
    standard = capacity_plan(
        PlanInputs(poller_groups=64, table_warm_write_units=warm), StackDefaults(poller_groups=64)
    )
    assert standard["spike_on_the_aws_model"]["seconds_to_all_started"] > 60
    more = capacity_plan(PlanInputs(poller_groups=64), StackDefaults(poller_groups=64, worker_min_pollers=2))
    assert more["monthly_fixed_usd"] > flags["monthly_fixed_usd"]


def test_a_spike_in_time_names_no_flags_and_one_no_flag_helps_says_so() -> None:
    assert capacity_plan(PlanInputs(spike_jobs=20_000, spike_window_s=360))["flags_for_the_spike"] is None
    huge = capacity_plan(PlanInputs(spike_jobs=50_000_000))
    assert huge["flags_for_the_spike"] is None
    assert "No partition_groups and worker_min_pollers the plan tries start it in time" in huge["warnings"][0]


def test_the_stacks_default_warm_throughput_is_what_the_plan_says_the_seeds_midnight_asks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At bench/calibration.json's CPU figures (what `duetime plan` charges; not the unit tests' pinned
    ones), the seed's midnight on the default stack asks each table for what the stack pre-warms it to by
    default (StackConfig.warm_write_units; tests/infra checks the template has it): rounded up to a
    thousand, within the table quota, and nothing for the tables a new one's 4,000 serves. A new calibration
    that moves them fails here: change DEFAULT_WARM_WRITE_UNITS (it is never lowered on a deployed table)."""
    monkeypatch.setattr(calibration, "saved", lambda: calibration.load(calibration.SAVED))
    cold = capacity_plan(PlanInputs(), StackDefaults(warm_write_units={}))
    assert cold["warm_write_units_needed"] == DEFAULT_WARM_WRITE_UNITS
    assert all(units <= TABLE_QUOTA_UNITS for units in DEFAULT_WARM_WRITE_UNITS.values())
    # And the default stack's tables then take it: no table warning, nothing more needed.
    default = capacity_plan(PlanInputs())
    assert default["warm_write_units"] == DEFAULT_WARM_WRITE_UNITS
    assert default["warm_write_units_needed"] == {}
    assert not any(
        w.startswith(("the runs table", "the control table", "the jobs")) for w in default["warnings"]
    )


def test_warm_units_parse_as_the_stack_takes_them_and_format_as_the_flag_names_them() -> None:
    units = parse_units("runs:26000, jobs/due:17000,control:0", floor=4000)
    assert units == {"runs": 26000, "jobs/due": 17000, "control": 0}
    assert format_units(units) == "jobs/due:17000,runs:26000,control:0"
    assert parse_units(format_units(units), floor=4000) == units
    assert parse_units({"runs/reap": 5000}, floor=4000) == {"runs/reap": 5000}
    for bad, why in (
        ("runz:9000", "no table or index"),
        ("runs=9000", "is not <table or index>:<units a second>"),
        ("runs:lots", "not a whole number"),
        ("runs:3000", "under the 4,000"),
        ("runs:-1", "under the 4,000"),
    ):
        with pytest.raises(ValueError, match=why):
            parse_units(bad, floor=4000)


def test_the_plan_command_takes_the_stacks_warm_throughput_as_the_stack_flag_gives_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cli.main(["plan", "--json"])
    default = json.loads(capsys.readouterr().out)
    assert default["warm_write_units"] == DEFAULT_WARM_WRITE_UNITS
    cli.main(["plan", "--json", "--warm-write-units", "runs:0,control:0"])
    cold = json.loads(capsys.readouterr().out)
    assert cold["warm_write_units"] == {"runs": 0, "control": 0}
    assert set(cold["warm_write_units_needed"]) == {"runs", "control"}
    with pytest.raises(SystemExit, match="--warm-write-units: 'runz' is no table or index"):
        cli.main(["plan", "--warm-write-units", "runz:9000"])
