"""``duetime plan``: capacity and cost arithmetic for a workload, optionally with a running duetime's
due histogram (``/v1/load``)."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from duetime.cli.common import client_from


def add_commands(commands: Any) -> None:
    plan = commands.add_parser("plan", help="capacity and cost arithmetic for a workload")
    plan.set_defaults(run=run_plan)
    plan.add_argument("--jobs", default="10M")
    plan.add_argument("--runs-per-day", default="20M")
    plan.add_argument("--spike-jobs", default="500k")
    plan.add_argument("--spike-window", type=int, default=60, help="seconds the spike's runs may start in")
    plan.add_argument("--partitions", type=int, default=64)
    plan.add_argument(
        "--spike-exact-fraction",
        type=float,
        default=0.05,
        help="with --spike-window past 60 s: the share of the spike due at its first second (no jitter)",
    )
    plan.add_argument(
        "--table-warm-write-units",
        type=float,
        default=4000.0,
        help="write units a second every table and index takes at least: a new on-demand table's 4,000, or "
        "what all have grown to",
    )
    plan.add_argument(
        "--warm-write-units",
        default="",
        help="the stack's warm_write_units, as -c takes it (e.g. runs:26000,jobs/due:17000): names given "
        "replace the stack's defaults (duetime.capacity.warm_throughput), 0 for none",
    )
    plan.add_argument(
        "--teams",
        type=int,
        default=500,
        help="teams the runs belong to (their slots: a run's share of writes)",
    )
    plan.add_argument(
        "--capacity-mode",
        choices=("auto", "on_demand", "provisioned"),
        default="auto",
        help="the tables' capacity mode the bill prices (auto: the recommended configuration's)",
    )
    plan.add_argument(
        "--target-ms",
        type=float,
        default=100.0,
        help="each target call's answer time (the worker waits, billed)",
    )
    plan.add_argument("--retention-days", type=int, default=30, help="run history kept")
    plan.add_argument(
        "--job-item-bytes", type=int, default=None, help="a job's stored size (default: the measured 600 B)"
    )
    plan.add_argument(
        "--run-item-bytes",
        type=int,
        default=None,
        help="a run row's stored size (default: the measured 770 B)",
    )
    plan.add_argument(
        "--worker-rate",
        type=float,
        default=None,
        help="runs one worker starts per second (default: the AWS model's estimate, as bench midnight's)",
    )
    add_stack_flags(plan)


def add_stack_flags(plan: argparse.ArgumentParser) -> None:
    """The stack's settings the plan prices, and ``--url`` for a running duetime's histogram."""
    plan.add_argument(
        "--baseline-workers", type=int, default=10, help="with --url: workers without pre-scaling"
    )
    plan.add_argument(
        "--poller-groups", type=int, default=4, help="the stack's poller groups (partition_groups)"
    )
    plan.add_argument("--poller-memory-mb", type=int, default=512, help="each poller function's memory")
    plan.add_argument(
        "--poller-hot-standby",
        action="store_true",
        help="the stack's poller_hot_standby: the next poller invocation waits out each run (twice the time)",
    )
    plan.add_argument(
        "--peak-workers", type=int, default=90, help="the stack's provisioned workers before midnight"
    )
    plan.add_argument(
        "--worker-min-pollers",
        type=int,
        default=0,
        help="the stack's worker_min_pollers: its event source in provisioned mode (0: standard mode)",
    )
    plan.add_argument("--url", help="read the real due histogram of a running duetime (/v1/load)")
    plan.add_argument("--token")
    plan.add_argument("--json", action="store_true")


def run_plan(args: argparse.Namespace) -> None:
    from duetime.capacity.fixed_cost import StackDefaults
    from duetime.capacity.plan import PlanInputs, capacity_plan, minutes_needing_prescale, parse_count
    from duetime.capacity.warm_throughput import DEFAULT_WARM_WRITE_UNITS, NEW_TABLE_WRITE_UNITS, parse_units

    try:
        warm = {**DEFAULT_WARM_WRITE_UNITS, **parse_units(args.warm_write_units, NEW_TABLE_WRITE_UNITS)}
    except ValueError as exc:
        raise SystemExit(f"duetime plan: --warm-write-units: {exc}") from None
    stack = StackDefaults(
        poller_groups=args.poller_groups,
        poller_memory_mb=args.poller_memory_mb,
        peak_workers=args.peak_workers,
        poller_hot_standby=args.poller_hot_standby,
        worker_min_pollers=args.worker_min_pollers,
        warm_write_units=warm,
    )
    inputs = PlanInputs(
        jobs=parse_count(args.jobs),
        runs_per_day=parse_count(args.runs_per_day),
        spike_jobs=parse_count(args.spike_jobs),
        spike_window_s=args.spike_window,
        spike_exact_fraction=args.spike_exact_fraction,
        table_warm_write_units=args.table_warm_write_units,
        partitions=args.partitions,
        worker_rate=args.worker_rate,
        poller_groups=args.poller_groups,  # the same groups share the spike's preload and cost the fixed part
        teams=args.teams,
        capacity_mode=args.capacity_mode,
        target_ms=args.target_ms,
        retention_days=args.retention_days,
        job_item_bytes=args.job_item_bytes,
        run_item_bytes=args.run_item_bytes,
    )
    plan = capacity_plan(inputs, stack)
    if args.url:
        start = datetime.now(UTC).replace(second=0, microsecond=0)
        load = client_from(args).request(
            "GET",
            "/v1/load",
            query={"from": start.isoformat(), "to": (start + timedelta(hours=24)).isoformat()},
        )
        minutes = {m["minute"]: m["runs"] for m in load["minutes"]}
        busiest = max(minutes.items(), key=lambda kv: kv[1], default=("-", 0))
        plan["measured_busiest_minute"] = {"minute": busiest[0], "runs": busiest[1]}
        plan["minutes_needing_prescale"] = [
            {"minute": m, "runs": n, "workers": w}
            for m, n, w in minutes_needing_prescale(minutes, args.baseline_workers, plan["worker_rate"])
        ]
    if args.json:
        print(json.dumps(plan))
        return
    print_plan(plan)


def print_plan(plan: dict[str, Any]) -> None:
    """The plan for people: a line a figure, the levers, the spike's bill, pre-scaled minutes, warnings."""
    for key, value in plan.items():
        if key in (
            "inputs",
            "warnings",
            "minutes_needing_prescale",
            "fixed_cost_quantities",
            "flags_for_the_spike",  # in the spike's warning
            "eventbridge_scheduler",  # in the bill's
        ):
            continue
        if key == "bill":
            print_bill(value)
            continue
        if key == "recommended":
            print(f"recommended configuration: {value['flags']}")
            for mode, figures in value["by_capacity_mode"].items():
                print(
                    f"  {mode.replace('_', ' '):38} ${figures['monthly_usd']:,.2f} a month, "
                    f"${figures['usd_per_million_runs']} a million runs"
                )
            continue
        if key == "fixed_cost_levers":
            print("levers on the fixed cost (estimated; each after the ones above it):")
            for lever in value:
                name = lever["lever"].replace("_", " ")
                print(f"  lever: {name:32} saves {lever['saves_usd']:>7} -> {lever['leaves_usd']}")
            continue
        if key == "spike_on_the_aws_model":
            print("the spike on the AWS model (bench midnight --simulate's, by arithmetic):")
            for name, figure in value.items():
                if name == "spike_cost_usd":  # one midnight's own bill, part by part
                    parts = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in figure.items() if k != "total")
                    figure = f"{figure['total']} ({parts})"
                print(f"  {name.replace('_', ' '):38} {figure}")
            continue
        if key == "monthly_fixed_parts":
            for part, usd in value.items():
                print(f"  {part.replace('_', ' '):38} {usd}")
            continue
        print(f"{key.replace('_', ' '):40} {value}")
    for minute in plan.get("minutes_needing_prescale", []):
        print(
            f"pre-scale: {minute['minute']} UTC has {minute['runs']} due runs -> {minute['workers']} workers"
        )
    for warning in plan["warnings"]:
        print(f"warning: {warning}")


def print_bill(bill: dict[str, Any]) -> None:
    """The month's bill, a line a charge, with EventBridge Scheduler's price for the same runs."""
    print(f"the month's bill ({bill['capacity_mode'].replace('_', ' ')} tables), line by line:")
    for name, line in bill["lines"].items():
        quantity = f"{line['quantity']:,.1f} {line['unit']}" if "quantity" in line else ""
        note = f"  ({line['note']})" if line.get("note") else ""
        print(f"  {name.replace('_', ' '):44} {quantity:>26} ${line['monthly_usd']:>10,.2f}{note}")
    print(f"  {'total':44} {'':>26} ${bill['monthly_usd']:>10,.2f}")
    print(
        f"  a million runs: ${bill['usd_per_million_runs']}; write units a run: {bill['write_units_per_run']}"
    )
    if bill["reserved_capacity_option"]:
        saving = bill["reserved_capacity_option"]
        print(
            f"  reserving the provisioned capacity would save ${saving['one_year']:,.2f} a month (one "
            f"year) or ${saving['three_years']:,.2f} (three years): a commitment, not in the total"
        )
    scheduler = bill["eventbridge_scheduler"]
    print(
        f"EventBridge Scheduler for as many invocations: ${scheduler['aws_targets_monthly_usd']:,.2f} "
        f"(${scheduler['aws_targets_usd_per_million_runs']} a million) to AWS targets, "
        f"${scheduler['http_targets_monthly_usd']:,.2f} (${scheduler['http_targets_usd_per_million_runs']} a "
        "million) to HTTP targets through a bus and an API destination; no run history, ledger or team caps"
    )
