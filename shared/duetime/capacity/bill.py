"""`duetime plan`'s bill: every line AWS charges an installation a month, for its runs and for being there,
each with its quantity, its unit and its price, a figure per million runs, and EventBridge Scheduler's price
for the same runs beside it.

What a run costs comes from measurements (``RunFigures``: the write and read units and SQS requests a run
took in ``duetime bench versus``' spike, the item sizes of a finished run), the worker's billed duration from
the same AWS model that sizes the midnight (``plan_midnight.worker_starts_per_s``' cycle: the CPU ``bench
runcpu`` measured, at the worker's vCPU share, plus DynamoDB's and the target's latencies; the event source's
receive and delete are not the function's time). What the installation costs with no run is
``fixed_cost.fixed_monthly_cost``, taken as a busy installation's (its pollers never rest) once the load
gives every group a run a minute.

DynamoDB's capacity is priced in the mode asked (``CapacityMode``): on demand, every unit at the request
price; provisioned, the steady load's units at the hourly capacity price with auto scaling's 70% target
utilization (AWS's default), and each forecast spike on demand (the prescaler switches the tables to on
demand ahead of it and back after: ``duetime.scheduling.table_modes``, within AWS's four switches to on
demand a table in a rolling 24 hours). The steady load is taken as spread evenly over the day (auto scaling
follows a daily shape at about the same utilization, a few minutes behind it).

Not billed here, and why: the targets' own cost (theirs, not duetime's); API Gateway and the API function
(people's requests, not runs); data transfer (inside one Region, to AWS targets and the queue: free; to an
HTTP target on the internet, the target's data-out, per GB); KMS (tables and queue use AWS owned keys: no
charge); the warm throughput bought once (``warm_throughput``: never monthly); free tiers (except
Scheduler's, which its users all get).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Literal

from duetime.capacity.fixed_cost import DAYS_PER_MONTH, SECONDS_PER_MONTH, StackDefaults, fixed_monthly_cost
from duetime.capacity.midnight_model import AwsModel
from duetime.capacity.plan_midnight import SQS_BATCH, teams_in_batch, worker_billed_ms
from duetime.capacity.prices import PRICES_USD, RESERVED_CAPACITY_SAVING
from duetime.scheduling.wake import QUIET_HORIZON

CapacityMode = Literal["on_demand", "provisioned"]
CAPACITY_MODES: tuple[CapacityMode, ...] = ("on_demand", "provisioned")
HOURS_PER_MONTH = 24 * DAYS_PER_MONTH
AUTO_SCALING_TARGET_UTILIZATION = 0.70  # Application Auto Scaling's default target for DynamoDB
# Each provisioned table and index keeps at least this many units of each kind (the stack's auto scaling
# minimum: 1): jobs, its due and team-jobs indexes, runs, its reap index, control.
PROVISIONED_TABLES_AND_INDEXES = 6
PROVISIONED_MIN_UNITS = 1
SLOTS_PER_ITEM = 5  # a team's slots share an item five at a time (adapters/dynamodb/team_slots.py)
ITEM_WRITE_UNIT_BYTES = 1024  # DynamoDB: a write unit per 1 KB of the item (the larger of before and after)
# Bytes CloudWatch Logs ingests a Lambda invocation besides the function's own lines: START, END and REPORT
# (with the X-Ray segment id), and powertools' EMF document of the invocation's metrics (one per flush).
LAMBDA_PLATFORM_LOG_BYTES = 330
WORKER_EMF_BYTES = 900  # a batch's document: five counters and ten StartLateness values
POLLER_EMF_BYTES_PER_SECOND = 450  # a busy holder's document each sweep
LOGS_COMPRESSION = 0.15  # archived log storage is billed on the compressed size (assumption: JSON, ~6.5x)
XRAY_RESERVOIR_PER_SECOND = 1.0  # Lambda active tracing: the first invocation each second ...
XRAY_FIXED_RATE = 0.05  # ... and 5% of the rest


@dataclass(frozen=True)
class RunFigures:
    """What one run costs, measured. ``write_units_one_team``: ``duetime bench versus --jobs 5000
    --processes 2``' spike (every job of one team), by AWS's billing rules, reap tickets settled; of it
    ``slot_write_units_one_team`` are the team's slots (a batch of 10 runs of one team takes its slots of two
    items in two writes and frees them in two: BENCHMARKS.md, "Every write a run makes"); with 200 teams the
    same spike measured 8.22, what ``slot_write_units`` gives. ``read_units``: the claim's version read, the
    reaper's read at its ticket's check and the sweeps' share, as the many-teams spike measured them.
    ``run_item_bytes``: a finished run's row as stored (its keys, status, times, owner, result summary and the
    attributes the indexes read); ``job_item_bytes``: a job with an HTTP target of a few headers. Both under
    1 KB: an item over it costs a unit more for each KB on every write of it."""

    write_units_one_team: float = 6.64
    slot_write_units_one_team: float = 0.4
    read_units: float = 2.6
    sqs_requests: float = 0.4
    run_item_bytes: int = 770
    job_item_bytes: int = 600
    source: str = (
        "bench versus --jobs 5000 --processes 2 (2026-12-04, 1976875); item sizes: the stored-format fixtures"
    )


@dataclass(frozen=True)
class BillInputs:
    runs_per_day: int
    jobs: int
    spike_jobs: int  # runs of a forecast spike a day (the seed's midnight); 0: none
    teams: int = 500  # the teams the runs belong to (slots: a batch's runs are mostly of different teams)
    retention_days: int = 30  # run history kept (the runs table's TTL)
    capacity_mode: CapacityMode = "on_demand"
    job_item_bytes: int | None = None  # None: RunFigures'
    run_item_bytes: int | None = None
    partitions: int = 64
    tracing: bool = True  # Lambda active tracing on every function (the stack's default)
    log_retention_days: int = 30


def slot_write_units(teams: int, figures: RunFigures) -> float:
    """Write units a run spends on its team's slots, taken and freed: each team of a batch writes its slots'
    items once to take them and once to free them (five slots an item). One team: the measured figure; many:
    two writes for each team expected among a batch's ``SQS_BATCH`` runs, shared by them."""
    if teams <= 1:
        return figures.slot_write_units_one_team
    items = max(teams_in_batch(teams), SQS_BATCH / SLOTS_PER_ITEM)
    return 2 * items / SQS_BATCH


def write_units_per_run(p: BillInputs, figures: RunFigures) -> dict[str, float]:
    """A run's write units by part: the measured run (its slots replaced by the teams' share), and the
    extra units of a job item or a run row over 1 KB (the claim writes the job's item and moves its entry
    of the due index, which projects every attribute: three writes of its size; the claim, the lease and
    the result write the run's row: three more)."""
    job_kb = math.ceil((p.job_item_bytes or figures.job_item_bytes) / ITEM_WRITE_UNIT_BYTES)
    run_kb = math.ceil((p.run_item_bytes or figures.run_item_bytes) / ITEM_WRITE_UNIT_BYTES)
    parts = {
        "measured_without_slots": figures.write_units_one_team - figures.slot_write_units_one_team,
        "team_slots": slot_write_units(p.teams, figures),
        "job_item_over_1kb": 3.0 * (job_kb - 1),
        "run_item_over_1kb": 3.0 * (run_kb - 1),
    }
    return {name: round(units, 3) for name, units in parts.items()} | {"total": round(sum(parts.values()), 3)}


def xray_traces_per_month(invocations_per_second: float) -> float:
    """Traces Lambda's active tracing records a month for a function invoked this often: the first
    invocation each second and 5% of the others."""
    kept = min(invocations_per_second, XRAY_RESERVOIR_PER_SECOND)
    kept += XRAY_FIXED_RATE * max(0.0, invocations_per_second - XRAY_RESERVOIR_PER_SECOND)
    return kept * SECONDS_PER_MONTH


def _line(quantity: float, unit: str, price: float, note: str = "") -> dict[str, Any]:
    line: dict[str, Any] = {
        "quantity": round(quantity, 3),
        "unit": unit,
        "unit_price_usd": price,
        "monthly_usd": round(quantity * price, 2),
    }
    return line | ({"note": note} if note else {})


def dynamodb_capacity_lines(
    p: BillInputs, write_units_per_run: float, read_units_per_run: float
) -> dict[str, dict[str, Any]]:
    """The runs' DynamoDB reads and writes a month, in ``p.capacity_mode``."""
    runs_month = p.runs_per_day * DAYS_PER_MONTH
    spike_month = p.spike_jobs * DAYS_PER_MONTH
    if p.capacity_mode == "on_demand":
        return {
            "dynamodb_write_request_units": _line(
                runs_month * write_units_per_run, "WRU", PRICES_USD["dynamodb_write_request_unit"]
            ),
            "dynamodb_read_request_units": _line(
                runs_month * read_units_per_run, "RRU", PRICES_USD["dynamodb_read_request_unit"]
            ),
        }
    steady_runs_per_s = max(0, p.runs_per_day - p.spike_jobs) / 86_400
    floor = PROVISIONED_TABLES_AND_INDEXES * PROVISIONED_MIN_UNITS
    wcu = max(floor, steady_runs_per_s * write_units_per_run / AUTO_SCALING_TARGET_UTILIZATION)
    rcu = max(floor, steady_runs_per_s * read_units_per_run / AUTO_SCALING_TARGET_UTILIZATION)
    switched = "the prescaler switches the tables to on demand ahead of it and back after"
    return {
        "dynamodb_provisioned_wcu": _line(
            wcu * HOURS_PER_MONTH,
            "WCU-hour",
            PRICES_USD["dynamodb_wcu_hour"],
            f"{wcu:,.0f} WCU on average: the steady load at auto scaling's 70% target",
        ),
        "dynamodb_provisioned_rcu": _line(
            rcu * HOURS_PER_MONTH,
            "RCU-hour",
            PRICES_USD["dynamodb_rcu_hour"],
            f"{rcu:,.0f} RCU on average, as the writes",
        ),
        "dynamodb_spike_write_request_units": _line(
            spike_month * write_units_per_run,
            "WRU",
            PRICES_USD["dynamodb_write_request_unit"],
            f"each day's forecast spike on demand: {switched}",
        ),
        "dynamodb_spike_read_request_units": _line(
            spike_month * read_units_per_run, "RRU", PRICES_USD["dynamodb_read_request_unit"]
        ),
    }


def monthly_bill(
    p: BillInputs,
    stack: StackDefaults,
    model: AwsModel,
    spike: dict[str, Any] | None = None,
    figures: RunFigures | None = None,
) -> dict[str, Any]:
    """Every line of the month's bill (``lines``: quantity, unit, unit price, dollars), their total, the
    dollars a million runs, and EventBridge Scheduler's price for as many invocations
    (``eventbridge_scheduler``). ``model``: the AWS model at the stack's worker memory (its billed duration);
    ``spike``: ``plan_midnight.midnight_estimate``' result for the day's spike (its helpers and event
    pollers, billed each day)."""
    figures = figures or RunFigures()
    runs_month = p.runs_per_day * DAYS_PER_MONTH
    units = write_units_per_run(p, figures)
    lines = dynamodb_capacity_lines(p, units["total"], figures.read_units)
    lines |= _storage_lines(p, figures)
    lines |= _run_path_lines(p, stack, model, runs_month, figures)
    lines |= _spike_lines(spike)
    busy = busy_fraction(p.runs_per_day, stack.poller_groups)
    resting = fixed_monthly_cost(p.partitions, replace(stack, poller_rests_when_quiet=True))
    serving = fixed_monthly_cost(p.partitions, replace(stack, poller_rests_when_quiet=False))
    lines |= _logs_and_traces_lines(p, resting, serving, runs_month, busy)
    for part, usd in resting["monthly_fixed_parts"].items():
        usd = usd * (1 - busy) + serving["monthly_fixed_parts"][part] * busy
        if usd:
            lines[f"fixed_{part}"] = {
                "monthly_usd": round(usd, 2),
                "note": "fixed_cost.fixed_monthly_cost, its pollers busy " + f"{busy:.0%} of the time",
            }
    total = sum(line["monthly_usd"] for line in lines.values())
    return {
        "capacity_mode": p.capacity_mode,
        "write_units_per_run": units,
        "read_units_per_run": figures.read_units,
        "run_figures": figures.source,
        "pollers_busy_fraction": round(busy, 3),
        "lines": lines,
        "monthly_usd": round(total, 2),
        "usd_per_million_runs": round(total / (runs_month / 1e6), 3) if runs_month else None,
        "reserved_capacity_option": _reserved_option(lines),
        "eventbridge_scheduler": eventbridge_scheduler_bill(runs_month),
    }


def busy_fraction(runs_per_day: float, poller_groups: int) -> float:
    """The share of the time a poller group serves rather than rests: a group rests only when nothing of its
    partitions is due within the quiet horizon (``duetime.scheduling.quiet``), which runs spread evenly
    over the day leave empty with probability ``exp(-runs in a horizon)``."""
    per_group_in_horizon = runs_per_day / 86_400 / poller_groups * QUIET_HORIZON.total_seconds()
    return 1 - math.exp(-per_group_in_horizon)


def _storage_lines(p: BillInputs, figures: RunFigures) -> dict[str, dict[str, Any]]:
    """The tables' storage (the run history at its stored size, the jobs) and their continuous backups."""
    run_bytes = p.run_item_bytes or figures.run_item_bytes
    job_bytes = p.job_item_bytes or figures.job_item_bytes
    # the due index projects every attribute of a job: its storage is the job's again
    history_gb = p.runs_per_day * p.retention_days * run_bytes / 1e9
    jobs_gb = 2 * p.jobs * job_bytes / 1e9
    return {
        "dynamodb_storage_run_history": _line(
            history_gb, "GB-month", PRICES_USD["dynamodb_storage_gb_month"], f"{run_bytes} B a run row"
        ),
        "dynamodb_storage_jobs": _line(
            jobs_gb,
            "GB-month",
            PRICES_USD["dynamodb_storage_gb_month"],
            f"{job_bytes} B a job, twice (the due index projects it all)",
        ),
        "dynamodb_point_in_time_recovery": _line(
            history_gb + jobs_gb, "GB-month", PRICES_USD["dynamodb_pitr_gb_month"], "every table"
        ),
    }


def _run_path_lines(
    p: BillInputs, stack: StackDefaults, model: AwsModel, runs_month: float, figures: RunFigures
) -> dict[str, dict[str, Any]]:
    """The queue's requests and the worker's invocations and billed duration."""
    invocations = runs_month / SQS_BATCH
    billed_ms = worker_billed_ms(replace(model, worker_memory_mb=stack.worker_memory_mb, teams=p.teams))
    return {
        "sqs_requests": _line(runs_month * figures.sqs_requests, "request", PRICES_USD["sqs_request"]),
        "lambda_worker_requests": _line(invocations, "invocation", PRICES_USD["lambda_request"]),
        "lambda_worker_duration": _line(
            invocations * billed_ms / 1000 * stack.worker_memory_mb / 1024,
            "GB-second",
            PRICES_USD["lambda_gb_second_arm64"],
            f"{billed_ms:,.0f} ms a batch of {SQS_BATCH} at {stack.worker_memory_mb} MB (arm64), "
            f"a {model.target_ms:,.0f} ms target included",
        ),
    }


def _spike_lines(spike: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """What each day's spike adds beyond its runs: the helpers that claim it and the event source's
    provisioned pollers for the prescaler's hold."""
    if not spike:
        return {}
    cost = spike["spike_cost_usd"]
    return {
        "lambda_spike_helpers": {
            "monthly_usd": round((cost["helper_duration"] + cost["helper_requests"]) * DAYS_PER_MONTH, 2),
            "note": f"{spike['helpers_invoked']} helpers a spike, each day",
        },
        "lambda_spike_event_pollers": {
            "monthly_usd": round(cost["event_pollers"] * DAYS_PER_MONTH, 2),
            "note": "the worker's event source in provisioned mode around each spike",
        },
    }


def _logs_and_traces_lines(
    p: BillInputs, resting: dict[str, Any], serving: dict[str, Any], runs_month: float, busy: float
) -> dict[str, dict[str, Any]]:
    """CloudWatch Logs (ingested and kept) and X-Ray traces of the workers and the pollers (the pollers'
    traces are in the fixed cost): a poller invocation's platform lines, and an EMF document each second
    it serves."""
    worker_invocations = runs_month / SQS_BATCH
    poller_invocations = resting["fixed_cost_quantities"]["poller_invocations_per_month"]
    poller_seconds = poller_invocations * (
        resting["fixed_cost_quantities"]["poller_invocation_seconds"] * (1 - busy)
        + serving["fixed_cost_quantities"]["poller_invocation_seconds"] * busy
    )
    ingested_gb = (
        worker_invocations * (LAMBDA_PLATFORM_LOG_BYTES + WORKER_EMF_BYTES)
        + poller_invocations * LAMBDA_PLATFORM_LOG_BYTES
        + poller_seconds * POLLER_EMF_BYTES_PER_SECOND
    ) / 1e9
    stored_gb = ingested_gb * LOGS_COMPRESSION * min(1.0, p.log_retention_days / DAYS_PER_MONTH)
    lines = {
        "cloudwatch_logs_ingested": _line(
            ingested_gb, "GB", PRICES_USD["cloudwatch_logs_ingested_gb"], "platform lines and EMF documents"
        ),
        "cloudwatch_logs_stored": _line(
            stored_gb, "GB-month", PRICES_USD["cloudwatch_logs_stored_gb_month"], "compressed"
        ),
    }
    if p.tracing:
        lines["xray_worker_traces"] = _line(
            xray_traces_per_month(worker_invocations / SECONDS_PER_MONTH),
            "trace",
            PRICES_USD["xray_trace_recorded"],
            "Lambda's sampling: 1 a second and 5% of the rest",
        )
    return lines


def _reserved_option(lines: dict[str, dict[str, Any]]) -> dict[str, float] | None:
    """What reserving the provisioned capacity would save a month (an option: a one- or three-year
    commitment), or None on demand (nothing to reserve)."""
    provisioned = sum(
        lines[name]["monthly_usd"]
        for name in ("dynamodb_provisioned_wcu", "dynamodb_provisioned_rcu")
        if name in lines
    )
    if not provisioned:
        return None
    return {term: round(provisioned * saving, 2) for term, saving in RESERVED_CAPACITY_SAVING.items()}


def eventbridge_scheduler_bill(invocations_month: float) -> dict[str, Any]:
    """EventBridge Scheduler's price for as many invocations a month (its free 14 M counted): to an AWS
    target (SQS, Lambda, Step Functions, ... by ARN), and to an HTTP endpoint (it has no HTTP target: a
    schedule puts an event on an EventBridge bus, whose rule calls an API destination). Neither keeps a run
    history, a ledger or team caps; its default quota is 1,000 invocations a second (a seed's midnight of
    500,000 takes 500 s at it)."""
    free = PRICES_USD["eventbridge_scheduler_free_invocations_month"]
    scheduler = max(0.0, invocations_month - free) * PRICES_USD["eventbridge_scheduler_invocation"]
    http = scheduler + invocations_month * (
        PRICES_USD["eventbridge_custom_event"] + PRICES_USD["eventbridge_api_destination_invocation"]
    )
    per_million = 1e6 / invocations_month if invocations_month else 0.0
    return {
        "aws_targets_monthly_usd": round(scheduler, 2),
        "aws_targets_usd_per_million_runs": round(scheduler * per_million, 3),
        "http_targets_monthly_usd": round(http, 2),
        "http_targets_usd_per_million_runs": round(http * per_million, 3),
        "quota_invocations_per_second": 1000,
    }
