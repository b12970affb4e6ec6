"""`duetime plan`: the design's arithmetic for a workload (pure functions; the CLI prints them)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, cast

from duetime.adapters.dynamodb.reap_tickets import TICKET_RUNS_MAX
from duetime.capacity.bill import HOURS_PER_MONTH, BillInputs, CapacityMode, monthly_bill
from duetime.capacity.fixed_cost import StackDefaults, fixed_monthly_cost, lever_savings
from duetime.capacity.midnight_model import AwsModel
from duetime.capacity.plan_midnight import TABLE_NAMES, midnight_estimate, table_capacities
from duetime.capacity.prices import PRICES_AS_OF
from duetime.capacity.recommend import recommend, spike_estimate
from duetime.capacity.unforeseen_spike import UnforeseenSpike
from duetime.capacity.warm_throughput import format_units, rounded_up
from duetime.domain.ids import DEFAULT_POLLER_GROUPS
from duetime.scheduling.prescale import PrescalePolicy

PARTITION_WRITE_LIMIT = 1000  # DynamoDB: write units per second per partition (key)
# Measured by `duetime bench spike --jobs 5000` (BENCHMARKS.md, "Every write a run makes"): per run, by AWS's
# billing rules, the reap tickets' checks settled. The reads include the per-second sweeps of a 20-s spike
# spread over its runs (an upper bound: the run's own path reads ~2.1: the claim's consistent read of its
# job's version 1, the reaper's read of it at its ticket's check 1, the ticket itself 1/18; its worker reads
# it only when its message does not carry it: CHANGELOG.md, "a wave in one request, a run in its message").
MEASURED_WRITE_UNITS_PER_RUN = 6.72
MEASURED_READ_UNITS_PER_RUN = 2.7
MEASURED_SQS_REQUESTS_PER_RUN = 0.4
# Measured by `duetime bench preload --jobs 125000` (BENCHMARKS.md, "Preload memory"; 125,000 is a default
# group's share of 500,000 jobs due in one minute): the Python heap the minute preload holds per due job, a
# compact row (412 bytes at 20,000 jobs; 5,003 while it held whole models).
MEASURED_PRELOAD_BYTES_PER_JOB = 422
# Index writes per run that land on one partition key: the due bucket loses the job's entry (1); at a peak a
# claim holds many runs, so a reap ticket covers 18 of them (``adapters/dynamodb/reap_tickets.py``): a reap
# shard gains it at the claim (1) and loses it at the runs' check (1). A lease writes nothing to it (the
# index holds checks, not lease expiries: ``adapters/dynamodb/reap_checks.py``).
DUE_KEY_WRITES_PER_CLAIM = 1
REAP_KEY_WRITES_PER_RUN = 2 / TICKET_RUNS_MAX

_SUFFIX = {"": 1, "k": 1_000, "m": 1_000_000, "b": 1_000_000_000}


def parse_count(text: str) -> int:
    """``500k``, ``10M``, ``20000`` -> an integer."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kKmMbB]?)\s*", text)
    if not match:
        raise ValueError(f"not a count: {text!r} (use e.g. 500k or 10M)")
    return round(float(match.group(1)) * _SUFFIX[match.group(2).lower()])


@dataclass(frozen=True)
class PlanInputs:
    jobs: int = 10_000_000
    runs_per_day: int = 20_000_000
    spike_jobs: int = 500_000
    poller_groups: int = DEFAULT_POLLER_GROUPS  # partition groups, one poller each
    spike_window_s: int = 60
    spike_exact_fraction: float = 0.05  # with a window past a minute: the share due at its first second
    partitions: int = 64
    worker_rate: float | None = None  # runs a worker starts per second; None: the AWS model's estimate
    # Write units a second every table and index takes at least without throttling: a new on-demand table's
    # 4,000, or what all were pre-warmed (or have grown) to (AwsModel.ddb_warm_wru_per_s). The stack's own
    # pre-warming, per table and index, is StackDefaults.warm_write_units (StackConfig.warm_write_units).
    table_warm_write_units: float = 4000.0
    headroom: float = 1.1
    retention_days: int = 30
    teams: int = 500  # the teams the runs belong to (the seed's midnight: 1,000 jobs each)
    # the tables' capacity mode priced for the plan's bill: "auto", the recommended configuration's
    # (``duetime.capacity.recommend``), or one of ``bill.CAPACITY_MODES``
    capacity_mode: str = "auto"
    target_ms: float = 100.0  # each target call's answer (what the worker waits for, billed)
    job_item_bytes: int | None = None  # None: the measured sizes (``bill.RunFigures``)
    run_item_bytes: int | None = None


def spike_event_pollers(spike_jobs: int, stack: StackDefaults) -> int:
    """The worker's event pollers in provisioned mode at the spike: the stack's pinned minimum, else what
    the prescaler switches on for the forecast minute
    (``duetime.scheduling.prescale.PrescalePolicy.pollers_for``, the stack's max pollers), else none (standard
    mode)."""
    if stack.worker_min_pollers or not stack.forecast_pollers:
        return stack.worker_min_pollers
    return PrescalePolicy().pollers_for(spike_jobs)


def capacity_plan(p: PlanInputs, stack: StackDefaults | None = None) -> dict[str, Any]:
    """The workload's rates, per-partition load, workers, storage and monthly cost: per run
    (``monthly_usd``: requests and storage) and fixed (``monthly_fixed_usd``: what the stack costs with no
    runs, ``duetime.capacity.fixed_cost``), and their sum."""
    stack = stack or StackDefaults()
    fixed = fixed_monthly_cost(p.partitions, stack)
    model = _spike_model(p, stack)
    spike = midnight_estimate(
        p.spike_jobs, p.spike_window_s, model, p.partitions, p.spike_exact_fraction, stack.warm_write_units
    )
    capacity = table_capacities(model, stack.warm_write_units)
    needed = warm_write_units_needed(spike["peak_table_wru_per_s_asked"], capacity, model)
    worker_rate = p.worker_rate or spike["worker_starts_per_s_each"]
    average = p.runs_per_day / 86_400
    peak = p.spike_jobs / p.spike_window_s
    per_partition = peak / p.partitions
    due_key_wcu = per_partition * DUE_KEY_WRITES_PER_CLAIM
    reap_key_wcu = per_partition * REAP_KEY_WRITES_PER_RUN
    recommended = recommend(_bill_inputs(p), p.spike_window_s, p.spike_exact_fraction, stack, model)
    bill = recommended.pop("bill")
    if p.capacity_mode != "auto":  # the bill of the mode asked, on the recommended functions and groups
        chosen = replace(
            stack,
            poller_groups=recommended["poller_groups"],
            worker_memory_mb=recommended["worker_memory_mb"],
        )
        bill = monthly_bill(
            replace(_bill_inputs(p), capacity_mode=cast(CapacityMode, p.capacity_mode)),
            chosen,
            model,
            spike_estimate(
                p.spike_jobs, p.spike_window_s, p.spike_exact_fraction, p.partitions, chosen, model
            ),
        )
    warnings: list[str] = []
    flags = None
    if spike["seconds_to_all_started"] > p.spike_window_s:
        flags = flags_for_the_spike(p, stack, fixed["monthly_fixed_usd"])
        warnings.append(_slow_spike_warning(p, spike, flags))
    warnings += table_warnings(spike["peak_table_wru_per_s_asked"], capacity, model)
    warnings += _hot_key_warnings(due_key_wcu, reap_key_wcu, spike["peak_write_units_per_s_hottest_key"])
    return {
        "inputs": asdict(p),
        "average_starts_per_s": round(average, 1),
        "peak_starts_per_s": round(peak, 1),
        "peak_over_average": round(peak / average, 1) if average else None,
        "peak_claims_per_s_per_partition": round(per_partition, 1),
        "poller_preload_mb": round(preload_mb(p.spike_jobs / p.poller_groups), 1),
        "peak_wcu_per_s_due_bucket_key": round(due_key_wcu, 1),
        "peak_wcu_per_s_reap_shard_key": round(reap_key_wcu, 1),
        "partition_key_write_limit": PARTITION_WRITE_LIMIT,
        "worker_rate": worker_rate,
        "workers_for_peak": math.ceil(peak / worker_rate),
        "workers_with_headroom": math.ceil(peak / worker_rate * p.headroom),
        "spike_on_the_aws_model": spike,
        # The stack's warm throughput (bought once, not in the monthly cost) and what the spike asks past it.
        "warm_write_units": dict(stack.warm_write_units),
        "warm_write_units_needed": needed,
        # The month's bill, line by line, of the recommended configuration (or of --capacity-mode's), its
        # dollars a million runs and EventBridge Scheduler's price beside it (``duetime.capacity.bill``).
        "recommended": recommended,
        "bill": bill,
        "unforeseen_spike": _unforeseen_spike(p, bill, spike),
        "monthly_total_usd": bill["monthly_usd"],
        "usd_per_million_runs": bill["usd_per_million_runs"],
        "eventbridge_scheduler": bill["eventbridge_scheduler"],
        # What the stack as given costs with no run at all (its pollers resting).
        "monthly_fixed_usd": fixed["monthly_fixed_usd"],
        "monthly_fixed_parts": fixed["monthly_fixed_parts"],
        "fixed_cost_quantities": fixed["fixed_cost_quantities"],
        "fixed_cost_levers": lever_savings(p.partitions, stack),
        "prices_as_of": PRICES_AS_OF,
        "flags_for_the_spike": flags,
        "warnings": warnings,
    }


def _spike_model(p: PlanInputs, stack: StackDefaults) -> AwsModel:
    """The AWS model of the stack as deployed, for the spike's estimate."""
    return AwsModel(
        poller_groups=p.poller_groups,
        poller_memory_mb=stack.poller_memory_mb,
        esm_min_pollers=spike_event_pollers(p.spike_jobs, stack),
        ddb_warm_wru_per_s=p.table_warm_write_units,
        fan_out=stack.poller_fan_out,
        worker_memory_mb=stack.worker_memory_mb,
        teams=p.teams,
        target_ms=p.target_ms,
    )


def _unforeseen_spike(
    p: PlanInputs, bill: Mapping[str, Any], spike: Mapping[str, Any]
) -> dict[str, Any] | None:
    """With provisioned tables: how late the spike would start had nobody forecast it
    (``capacity.unforeseen_spike``), taking on demand what the forecast spike takes; None on demand."""
    wcu = bill["lines"].get("dynamodb_provisioned_wcu")
    if wcu is None or not p.spike_jobs:
        return None
    return UnforeseenSpike(
        spike_runs=p.spike_jobs,
        write_units_per_run=bill["write_units_per_run"]["total"],
        provisioned_wcu=wcu["quantity"] / HOURS_PER_MONTH,
        on_demand_runs_per_s=p.spike_jobs / max(1.0, spike["seconds_to_all_started"]),
    ).delay()


def _bill_inputs(p: PlanInputs) -> BillInputs:
    """The plan's workload as the bill takes it."""
    return BillInputs(
        runs_per_day=p.runs_per_day,
        jobs=p.jobs,
        spike_jobs=p.spike_jobs,
        teams=p.teams,
        retention_days=p.retention_days,
        job_item_bytes=p.job_item_bytes,
        run_item_bytes=p.run_item_bytes,
        partitions=p.partitions,
    )


def _slow_spike_warning(p: PlanInputs, spike: Mapping[str, Any], flags: Mapping[str, Any] | None) -> str:
    """Why the spike starts late on the AWS model, and the deploy flags that would start it in time."""
    return (
        f"on the AWS model the spike takes {spike['seconds_to_all_started']:,.0f} s to start, not "
        f"{p.spike_window_s}: its claims take {spike['seconds_to_all_claimed']:,.0f} s (more poller "
        f"groups or poller memory shorten them) and {spike['workers_needed']} workers would start it "
        "in time (worker_max_concurrency caps them; worker_min_pollers' provisioned mode grows them "
        "faster); or spread it with jitter"
        + (
            f". Deployed with {flags['flags']} it starts in {flags['seconds_to_all_started']:,.0f} s on "
            f"the model, for a fixed cost of ${flags['monthly_fixed_usd']:,.2f} a month "
            f"(+${flags['more_than_now_usd']:,.2f})"
            + (
                " and a one-time purchase of warm throughput (write units a second: "
                + ", ".join(f"{n} {u:,}" for n, u in flags["warm_write_units"].items())
                + "; AWS charges for raising it once, never monthly)"
                if flags["warm_write_units"]
                else ""
            )
            if flags
            else ". No partition_groups and worker_min_pollers the plan tries start it in time"
        )
    )


def _hot_key_warnings(due_key_wcu: float, reap_key_wcu: float, busiest_wcu: float) -> list[str]:
    """Each key written past 80% of a DynamoDB partition's limit at the peak."""
    keys = (
        ("due-index bucket key", due_key_wcu),
        ("reap-index shard key", reap_key_wcu),
        ("busiest key at the spike's bursts (AWS model)", busiest_wcu),
    )
    return [
        f"{name}: {value:,.0f} WCU/s at the peak is over 80% of DynamoDB's "
        f"{PARTITION_WRITE_LIMIT} per partition: raise --partitions or spread the spike"
        for name, value in keys
        if value > 0.8 * PARTITION_WRITE_LIMIT
    ]


def warm_write_units_needed(
    asked: Mapping[str, float], capacity: Mapping[str, float], model: AwsModel
) -> dict[str, int]:
    """The tables and indexes the spike asks more write units a second of than they take (``capacity``:
    ``table_capacities``), each with what to pre-warm it to: the units asked rounded up to a thousand,
    at most the table quota."""
    return {
        name: min(rounded_up(units), int(model.ddb_table_quota_wru_per_s))
        for name, units in asked.items()
        if units > capacity[name]
    }


def table_warnings(asked: dict[str, float], capacity: Mapping[str, float], model: AwsModel) -> list[str]:
    """A warning for each table or index the spike asks for more write units a second than it takes
    (``capacity``: a new on-demand table or index takes 4,000, or twice its previous peak, or what the
    stack's ``warm_write_units`` pre-warm it to, within the 40,000 default table quota), saying what to set
    or to request."""
    warnings = []
    for name, units in asked.items():
        if units <= capacity[name]:
            continue
        what = TABLE_NAMES[name]
        advice = (
            f"pre-warm it to {rounded_up(units):,} write units a second (-c warm_write_units="
            f"{name}:{rounded_up(units)}: DynamoDB warm throughput, set per table and per index, charged "
            "once when raised above the default, never lowered)"
        )
        if units > model.ddb_table_quota_wru_per_s:
            advice = (
                f"that is over the account's table quota of {model.ddb_table_quota_wru_per_s:,.0f}: request "
                "an increase of DynamoDB's 'Table-level write throughput limit' in Service Quotas, then "
                + advice
            )
        warnings.append(
            f"{what}: the spike asks for {units:,.0f} write units a second, over the "
            f"{capacity[name]:,.0f} it takes on demand ("
            + ("a new table's" if capacity[name] <= model.table_write_capacity() else "its warm throughput")
            + f"); {advice}, or spread the spike with jitter"
        )
    return warnings


# What `flags_for_the_spike` tries: partition groups (each divides the 64 partitions) and provisioned SQS
# event pollers (0: the event source's standard mode, whose ramp of 300 more a minute no flag speeds up).
GROUPS_TRIED = (4, 8, 16, 32, 64)
MIN_POLLERS_TRIED = (0, 2)


def flags_for_the_spike(p: PlanInputs, stack: StackDefaults, fixed_now_usd: float) -> dict[str, Any] | None:
    """The deploy flags of the cheapest stack (by its fixed monthly cost) that starts the spike within its
    window on the AWS model: more poller groups than ``stack``'s (claims in parallel) and the worker's event
    source in provisioned mode (workers sooner), from ``GROUPS_TRIED`` x ``MIN_POLLERS_TRIED``, with every
    table and index pre-warmed to what the spike asks of it (``warm_write_units``: those the spike asks
    more of than ``stack``'s warm throughput gives them, rounded up to a thousand, at most the table quota;
    the flag ``-c warm_write_units=...`` names them, the rest keep the stack's); None when none of them
    does. Warm throughput is bought once: it adds nothing to the fixed cost a month. What the model leaves
    out is ``midnight_estimate``'s to say."""
    best: dict[str, Any] | None = None
    for groups in (g for g in GROUPS_TRIED if g >= stack.poller_groups and p.partitions % g == 0):
        for min_pollers in (m for m in MIN_POLLERS_TRIED if m >= stack.worker_min_pollers):
            tried = replace(stack, poller_groups=groups, worker_min_pollers=min_pollers)
            model = AwsModel(
                poller_groups=groups,
                poller_memory_mb=tried.poller_memory_mb,
                esm_min_pollers=spike_event_pollers(p.spike_jobs, tried),
                ddb_warm_wru_per_s=AwsModel.ddb_table_quota_wru_per_s,
                fan_out=tried.poller_fan_out,
            )
            asked = midnight_estimate(
                p.spike_jobs, p.spike_window_s, model, p.partitions, p.spike_exact_fraction
            )["peak_table_wru_per_s_asked"]
            # What each table takes as the stack has it, and what it would take pre-warmed as asked: the
            # spike again on those (the asked units do not depend on the tables' capacity).
            now = replace(model, ddb_warm_wru_per_s=p.table_warm_write_units)
            warm = warm_write_units_needed(asked, table_capacities(now, stack.warm_write_units), now)
            tried = replace(tried, warm_write_units={**stack.warm_write_units, **warm})
            spike = midnight_estimate(
                p.spike_jobs,
                p.spike_window_s,
                now,
                p.partitions,
                p.spike_exact_fraction,
                tried.warm_write_units,
            )
            if spike["seconds_to_all_started"] > p.spike_window_s:
                continue
            fixed = fixed_monthly_cost(p.partitions, tried)["monthly_fixed_usd"]
            if best is None or fixed < best["monthly_fixed_usd"]:
                flags = [f"-c partition_groups={groups}"] * (groups != stack.poller_groups)
                flags += [f"-c worker_min_pollers={min_pollers}"] * (min_pollers != stack.worker_min_pollers)
                flags += [f"-c warm_write_units={format_units(warm)}"] * bool(warm)
                best = {
                    "flags": " ".join(flags),
                    "partition_groups": groups,
                    "worker_min_pollers": min_pollers,
                    "seconds_to_all_started": spike["seconds_to_all_started"],
                    "monthly_fixed_usd": fixed,
                    "more_than_now_usd": round(fixed - fixed_now_usd, 2),
                    "warm_write_units": warm,
                }
    return best


def preload_mb(jobs: float, bytes_per_job: float = MEASURED_PRELOAD_BYTES_PER_JOB) -> float:
    """MiB of Python heap the minute preload holds for ``jobs`` due rows (by default at the measured bytes
    per job)."""
    return jobs * bytes_per_job / 2**20


def minutes_needing_prescale(
    load: dict[str, int], baseline_workers: int, worker_rate: float
) -> list[tuple[str, int, int]]:
    """(minute, runs, workers needed) for minutes whose due runs exceed what the baseline starts."""
    capacity = baseline_workers * worker_rate * 60
    return [
        (minute, runs, math.ceil(runs / 60 / worker_rate))
        for minute, runs in sorted(load.items())
        if runs > capacity
    ]
