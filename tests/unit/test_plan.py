"""`duetime plan` reproduces the design's arithmetic for the seed's assumptions."""

import json
from dataclasses import replace

import pytest

from duetime import cli
from duetime.capacity import calibration
from duetime.capacity.fixed_cost import StackDefaults
from duetime.capacity.plan import (
    MEASURED_PRELOAD_BYTES_PER_JOB,
    PlanInputs,
    capacity_plan,
    minutes_needing_prescale,
    parse_count,
)
from duetime.capacity.warm_throughput import (
    DEFAULT_WARM_WRITE_UNITS,
    TABLE_QUOTA_UNITS,
    format_units,
    parse_units,
)


def test_the_seed_workload() -> None:
    plan = capacity_plan(PlanInputs())
    assert plan["average_starts_per_s"] == pytest.approx(231.5, abs=0.1)
    assert plan["peak_starts_per_s"] == pytest.approx(8333.3, abs=0.1)
    assert plan["peak_over_average"] == 36.0
    assert plan["peak_claims_per_s_per_partition"] == pytest.approx(130.2, abs=0.1)
    storage = plan["bill"]["lines"]
    # 20 M runs a day kept 30 days at a run row's stored 770 B; 10 M jobs of 600 B, twice (the due index)
    assert storage["dynamodb_storage_run_history"]["quantity"] == pytest.approx(462.0)
    assert storage["dynamodb_storage_jobs"]["quantity"] == pytest.approx(12.0)
    seed = capacity_plan(PlanInputs(worker_rate=100))  # the seed's assumption: 100 starts/s a worker
    assert seed["workers_for_peak"] == 84 and seed["workers_with_headroom"] == 92


def test_workers_are_sized_at_the_aws_models_rate_unless_one_is_given() -> None:
    plan = capacity_plan(PlanInputs())
    spike = plan["spike_on_the_aws_model"]
    assert plan["worker_rate"] == spike["worker_starts_per_s_each"] == pytest.approx(30.9, abs=0.1)
    assert plan["workers_for_peak"] == 270 and plan["workers_with_headroom"] == 297


def test_the_seed_spike_starts_within_the_minute_on_the_default_stack() -> None:
    """The default stack: 4 groups whose holders each hand their minute to 8 helpers (32 in all, a vCPU
    each: ``duetime.scheduling.fan_out``), claims paced to what the pre-warmed tables take of claims and
    starts (11,191 a second: 90% of the runs table's 38,000 units at 3.06 a run), the event source switched to
    provisioned mode for the spike (the prescaler: 31 pollers). All 500,000 claimed and started in 45 s."""
    plan = capacity_plan(PlanInputs())
    spike = plan["spike_on_the_aws_model"]
    assert spike["helpers_invoked"] == 32
    assert spike["seconds_to_all_claimed"] == pytest.approx(44.7, abs=0.5)
    assert spike["seconds_to_all_started"] == pytest.approx(44.7, abs=0.5)
    assert plan["warnings"] == [] and plan["flags_for_the_spike"] is None
    assert plan["warm_write_units_needed"] == {}
    # 16.24 before the absence alarms (issue 50): 18 alarm metrics more, the reconciler's Lambda and reads
    assert plan["monthly_fixed_usd"] == pytest.approx(20.15, abs=0.01)


def test_the_plan_prints_one_midnights_own_bill_part_by_part() -> None:
    """The seed's midnight costs its writes (8.4 write units a run at $0.625 a million), the workers'
    batches, the helpers, the queue and the provisioned pollers for the prescaler's hold: about $3."""
    cost = capacity_plan(PlanInputs())["spike_on_the_aws_model"]["spike_cost_usd"]
    parts = {k: v for k, v in cost.items() if k != "total"}
    assert set(parts) == {
        "dynamodb_writes",
        "worker_duration",
        "worker_requests",
        "helper_duration",
        "helper_requests",
        "sqs_requests",
        "event_pollers",
    }
    assert cost["total"] == pytest.approx(sum(parts.values()), abs=0.001)
    assert cost["dynamodb_writes"] == pytest.approx(500_000 * 8.444 * 0.625e-6, rel=0.01)
    assert cost["helper_duration"] > 0 and cost["event_pollers"] > 0  # the fan-out and provisioned mode
    assert 2.0 < cost["total"] < 5.0


def test_a_midnight_without_helpers_or_provisioned_pollers_pays_for_neither() -> None:
    stack = replace(StackDefaults(), poller_fan_out=False, forecast_pollers=False)
    cost = capacity_plan(PlanInputs(spike_jobs=1_000), stack)["spike_on_the_aws_model"]["spike_cost_usd"]
    assert cost["helper_duration"] == cost["helper_requests"] == cost["event_pollers"] == 0


def test_the_seed_spike_without_fan_out_is_late_and_says_why() -> None:
    # 125,000 claims a holder at ~264 a second (the pinned 1.01 ms of CPU a claim at 512 MB's 0.29 vCPU, and
    # a version read and two requests of 25 claims); a poller behind its spike claims a sweep's page (250)
    # of a partition at once, and that burst's results come back together: 2 writes a claim on the
    # partition's reap shard.
    plan = capacity_plan(PlanInputs(), StackDefaults(poller_fan_out=False))
    spike = plan["spike_on_the_aws_model"]
    assert spike["helpers_invoked"] == 0
    assert spike["seconds_to_all_claimed"] == pytest.approx(472.7, abs=0.5)
    assert spike["peak_claims_per_s_per_partition"] == 250
    assert spike["peak_write_units_per_s_hottest_key"] == 500
    (late,) = plan["warnings"]
    assert "takes 473 s to start, not 60" in late
    assert plan["flags_for_the_spike"]["flags"] == "-c partition_groups=32"


def test_on_fresh_tables_the_paced_claims_take_what_the_runs_table_takes_and_each_table_is_named() -> None:
    cold = capacity_plan(PlanInputs(), StackDefaults(warm_write_units={}))
    # 4,000 units a second on the runs table at 3.06 a claim and its start, at 90%: 1,178 claims a second.
    assert cold["spike_on_the_aws_model"]["seconds_to_all_claimed"] == pytest.approx(424.4, abs=0.5)
    tables = [w.split(":")[0] for w in cold["warnings"][1:]]
    assert tables == [
        "the jobs table",
        "the jobs table's due index",
        "the runs table",
        "the runs table's reap index",
        "the control table",
    ]
    assert "-c warm_write_units=runs:38000" in cold["warnings"][3]
    assert cold["flags_for_the_spike"]["flags"] == (
        "-c warm_write_units=jobs:13000,jobs/due:25000,runs:38000,runs/reap:5000,control:25000"
    )  # what the plan asks; the stack's default gives the reap index more (warm_throughput.py)
    # 300 s of jitter, 5% exact: the claims follow the seconds the runs fall due on; each minute fans out.
    spread = capacity_plan(PlanInputs(spike_window_s=360))["spike_on_the_aws_model"]
    assert spread["seconds_to_all_started"] == pytest.approx(300, abs=1) and spread["helpers_invoked"] == 28


def test_a_table_asked_past_the_account_quota_says_to_request_an_increase() -> None:
    plan = capacity_plan(PlanInputs(spike_jobs=1_000_000))  # 22,222 claims a second wanted: runs 55,224
    (runs,) = [w for w in plan["warnings"] if w.startswith("the runs table:")]
    assert "over the account's table quota of 40,000" in runs and "Service Quotas" in runs
    assert plan["flags_for_the_spike"] is None  # no flag of the stack's raises a quota


def test_bigger_pollers_claim_the_spike_sooner() -> None:
    alone = StackDefaults(poller_fan_out=False)  # the holders claim alone: their CPU holds the claims
    default = capacity_plan(PlanInputs(), alone)["spike_on_the_aws_model"]
    bigger = capacity_plan(PlanInputs(), replace(alone, poller_memory_mb=1769))["spike_on_the_aws_model"]
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
    """Without fan-out the holders claim alone: 32 groups are the cheapest that claim the seed's midnight in
    time, 16 claim too slowly, and 64 cost more a month."""
    alone = StackDefaults(poller_fan_out=False)
    plan = capacity_plan(PlanInputs(), alone)
    flags = plan["flags_for_the_spike"]
    assert flags["flags"] == "-c partition_groups=32" and flags["seconds_to_all_started"] <= 60
    assert f"Deployed with {flags['flags']} it starts in" in plan["warnings"][0]
    # The flags do what they say: deployed so, the plan has no warning and costs what the flags said.
    flagged = capacity_plan(PlanInputs(poller_groups=32), replace(alone, poller_groups=32))
    assert flagged["warnings"] == [] and flagged["flags_for_the_spike"] is None
    assert flagged["monthly_fixed_usd"] == flags["monthly_fixed_usd"]
    assert flags["more_than_now_usd"] == pytest.approx(
        flags["monthly_fixed_usd"] - plan["monthly_fixed_usd"], abs=0.01
    )
    sixteen = capacity_plan(PlanInputs(poller_groups=16), replace(alone, poller_groups=16))
    assert sixteen["spike_on_the_aws_model"]["seconds_to_all_started"] > 60
    more = capacity_plan(PlanInputs(poller_groups=64), replace(alone, poller_groups=64))
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
    needed = cold["warm_write_units_needed"]
    # Each what the plan asks; the reap index and the control table more (writes in bursts the plan's even
    # pace leaves out: warm_throughput.py says what the simulation found).
    bursty = ("runs/reap", "control")
    assert {n: u for n, u in DEFAULT_WARM_WRITE_UNITS.items() if n not in bursty} == {
        n: u for n, u in needed.items() if n not in bursty
    }
    assert needed["runs/reap"] == 5_000 < DEFAULT_WARM_WRITE_UNITS["runs/reap"]
    assert needed["control"] == 25_000 < DEFAULT_WARM_WRITE_UNITS["control"]
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
    assert cold["warm_write_units"] == {**DEFAULT_WARM_WRITE_UNITS, "runs": 0, "control": 0}
    assert set(cold["warm_write_units_needed"]) == {"runs", "control"}
    with pytest.raises(SystemExit, match="--warm-write-units: 'runz' is no table or index"):
        cli.main(["plan", "--warm-write-units", "runz:9000"])
