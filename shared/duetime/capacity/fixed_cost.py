"""The fixed cost of an installation: what the default stack costs a month with no runs at all.

Pure arithmetic over the stack's settings (``StackDefaults``, which tests/infra/test_fixed_cost_defaults.py
checks against the synthesized template), the poller's own timings (``LeaseTimings``, ``PollerConfig``)
and the prices in ``prices.py``. ``duetime bench idle`` measures the same idle installation on DynamoDB
Local (requests and units per second, invocation lengths) to check the model.

Parts, a month of 30 days:

* **pollers' Lambda**: every group's rule starts an invocation a minute; each may serve ``run_seconds``.
  By default it hands its group's lease to the next invocation a few seconds after that one starts and is
  ready (it registers at its first lease read, the holder sees it at its next renewal and offers the lease
  from a whole second ``handover_lead`` on), and returns then: about a minute and four seconds. With a hot
  standby (``poller_hot_standby``) it hands over only once it began to retire (``retire_before`` before its
  end). Every second of it is billed at its memory size. An idle installation has no busy minute (one
  whose holder keeps a hot standby whatever the setting).
* **resting groups** (``poller_rests_when_quiet``, the default; ``duetime.scheduling.quiet``): with nothing
due in the
  quiet horizon, each tick's invocation takes the free lease, loads the current minute, sweeps, reads the
  lease's wake count, sweeps until ``settle`` has passed, looks ahead (per partition: the reap index once
  and the due index once per minute bucket of the horizon), gives the lease back and returns: about
  ``settle`` + 1.5 s (the sweep after the settle falls on the next whole second, the first one half a
  second into the invocation). Nobody claims until the next tick; no handover, no standby.
* **sweeps' DynamoDB**: the holder of each group reads its partitions' low-water marks once a reign (one
  BatchGetItem at each handover: it keeps them as it moves them), and sweeps every second (one Query per
  partition of the current minute's bucket, two in the 30 s the last
  bucket takes to settle), reads the reap index every 5th sweep, moves each mark once a minute and renews
  the lease every ``renew_every``; every live invocation loads each coming minute's bucket (and the
  current one when it starts); with early handover the holder counts the coming minute's rows once a
  handover (a Query per partition); standbys read the lease every ``standby_poll``; each handover is three
  lease writes and one read. Success deadlines: each partition's watch shard is read every 30 s (a resting
  group's invocation reads it once); job notifications: each reap pass reads the one ``notify`` shard (a
  resting group's invocation, once). Empty Queries and small items, by DynamoDB's rules: 0.5 read unit an
  eventually consistent read (an index Query, the marks), 1 a consistent one (the lease), 1 write unit a
  write of an item under 1 KB with no index.
* **provisioned concurrency**: with ``forecast_scaling`` (the default) the prescaler provisions workers only
  ahead of a minute the due index shows busy: none at idle, and ``baseline_provisioned_workers`` all day.
  With the scheduled window instead, ``peak_workers`` for ``prescale_minutes_per_day`` every day.
* **the prescaler**: an invocation every 5 minutes counting the due index over the look-ahead
  (``prescaler_month``).
* **CloudWatch**: the dashboard, every alarm metric, the custom metrics the pollers publish every sweep
  and invocation (idle or not), and an X-Ray trace per poller invocation.
* **SQS**: the worker's event source mapping long-polls the empty queue. Assumption: 5 concurrent long
  polls of 20 s (AWS: "when traffic is low, Lambda scales back the processing to five concurrent batches
  and can optimize to as few as 2", an optimization not available with maximum concurrency set, as the
  stack sets it), i.e. 5 ReceiveMessage requests every 20 s.

Left out: CloudWatch Logs ingestion and storage (a few hundred bytes a poller invocation: START/REPORT
lines and the EMF metric blob), DynamoDB storage and backups of an empty installation, Lambda INIT
billing of the pollers' cold starts, the free tiers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from duetime.capacity.prices import PRICES_USD
from duetime.capacity.warm_throughput import DEFAULT_WARM_WRITE_UNITS
from duetime.domain.ids import DEFAULT_POLLER_GROUPS
from duetime.execution.deadlines import DEADLINE_CHECK_INTERVAL
from duetime.scheduling.poller import PollerConfig
from duetime.scheduling.poller_lease import LeaseTimings
from duetime.scheduling.quiet import QuietTimings

SECONDS_PER_DAY = 86_400
DAYS_PER_MONTH = 30
SECONDS_PER_MONTH = SECONDS_PER_DAY * DAYS_PER_MONTH
MINUTES_PER_DAY = 1_440

# DynamoDB's billing rules for the items an idle poller touches (all well under 1 KB / 4 KB).
EVENTUALLY_CONSISTENT_READ_UNITS = 0.5  # an item of a BatchGetItem, or a Query's (empty) page
CONSISTENT_READ_UNITS = 1.0  # the lease's GetItem (ConsistentRead)
SMALL_WRITE_UNITS = 1.0  # a mark or the lease: an item under 1 KB in the control table, no index
BATCH_GET_KEYS = 100  # keys per BatchGetItem
HANDOVER_WRITES = 3  # register as successor, offer, accept
HANDOVER_READS = 1  # the old holder reads the lease before its handover second
RECOVER_EVERY_SWEEPS = 5  # Poller.run_until: the reap index every 5th sweep
DEADLINE_CHECK_SECONDS = DEADLINE_CHECK_INTERVAL.total_seconds()  # each partition's watch shard, read


@dataclass(frozen=True)
class StackDefaults:
    """What the default stack keeps running, whatever the load (infra/cdk/duetime_cdk)."""

    poller_groups: int = DEFAULT_POLLER_GROUPS  # StackConfig.partition_groups' default
    # infra/cdk pollers.poller_memory_mb at the default groups (the CPU share's floor)
    poller_memory_mb: int = 512
    poller_run_seconds: float = 135.0  # pollers.POLLER_RUN_SECONDS
    poller_hot_standby: bool = False  # StackConfig.poller_hot_standby
    poller_ticks_per_minute: float = 1.0  # each group's rule: rate(1 minute)
    sweep_interval_s: float = 1.0  # Settings.poll_interval_seconds
    peak_workers: int = 90  # StackConfig.peak_workers: the most workers ever provisioned
    # StackConfig.forecast_scaling: the prescaler (duetime.scheduling.prescale) provisions workers only ahead
    # of a minute the due index shows busy; off, the scheduled window (peak_scale_up to peak_scale_down) every
    # day.
    forecast_scaling: bool = True
    prescaler_interval_minutes: float = 5.0  # the prescaler's rule: rate(5 minutes)
    prescaler_memory_mb: int = 256
    prescale_lookahead_minutes: int = 10  # Settings.prescale_lookahead_minutes: buckets counted a tick
    # One look: 704 COUNT Queries (64 partitions x 11 minutes), 0.60-0.70 s of CPU on the bench machine
    # against DynamoDB Local, at 256 MB's share of a vCPU (256 / 1,769) about 4.5 s; 5 s assumed.
    prescaler_invocation_seconds: float = 5.0
    # The reconciler (duetime.scheduling.reconcile, infra/cdk/duetime_cdk/reconciler.py): a minute's tick of
    # 256 MB; at rest, per partition a due-index Query and a reap-index Query (0.5 read unit each, empty), and
    # the marks (a BatchGetItem, 64 items of 0.5); one PutItem of its report; four custom metrics. Its
    # duration is assumed (1 s: 128 small Queries eight at a time), not measured on AWS.
    reconciler_interval_minutes: float = 1.0
    reconciler_memory_mb: int = 256
    reconciler_invocation_seconds: float = 1.0
    reconciler_custom_metrics: int = 4
    worker_memory_mb: int = 1024  # Workers: memory_mb=1024
    prescale_minutes_per_day: float = 20.0  # peak_scale_up cron(55 23) to peak_scale_down cron(15 0)
    baseline_provisioned_workers: int = 0  # StackConfig.baseline_workers: the rest of the day
    # StackConfig.worker_min_pollers: the worker's event source in provisioned mode keeps this many SQS event
    # pollers all day (0: standard mode, no poller is billed).
    worker_min_pollers: int = 0
    # StackConfig.forecast_pollers: with worker_min_pollers unset, the prescaler switches the event source to
    # provisioned mode ahead of a forecast spike (PrescalePolicy.pollers_for) and back after: no fixed cost.
    forecast_pollers: bool = True
    # StackConfig.poller_fan_out: a busy minute's holder starts helpers (duetime.scheduling.fan_out), only
    # then.
    poller_fan_out: bool = True
    dashboards: int = 1
    # Observability's alarms, each metric a metric-math alarm reads counted: latency p99 (1), dead runs
    # (2), dead letters (1), poller takeovers (1), unreadable rows (1), DynamoDB throttles (2 tables x 2),
    # poller errors (the pollers' Errors + 1), prescaler errors (1), Lambda throttles (the pollers + their
    # helper + worker + api + authorizer + prescaler); and the absence alarms (issue 50): the reconciler's
    # four (missed fires, oldest unclaimed due, oldest queued, its heartbeat), worker, api and reconciler
    # errors, API 5xx, and the throttles of the control table and of every index.
    alarm_metrics_besides_pollers: int = 35
    alarm_metrics_per_poller_group: int = 2
    # Custom metrics (namespace duetime, dimension service=poller) an idle poller publishes: zeros are not
    # published (observability.add_counts), so only DueIndexQueries and PollerHeldSeconds (11 when every
    # figure was published, zeros too).
    poller_custom_metrics: int = 2
    event_source_long_polls: int = 5
    long_poll_seconds: float = 20.0
    poller_rests_when_quiet: bool = True  # Settings.poller_rest_when_quiet (duetime.scheduling.quiet)
    # StackConfig.warm_write_units: each table's and index's warm throughput
    # (duetime.capacity.warm_throughput), bought once: no part of the fixed cost a month; `duetime plan`'s
    # midnight takes it as each one's capacity.
    warm_write_units: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_WARM_WRITE_UNITS))

    @property
    def alarm_metrics(self) -> int:
        return self.alarm_metrics_besides_pollers + self.alarm_metrics_per_poller_group * self.poller_groups


QUIET = QuietTimings()
QUIET_LOOK_QUERIES_PER_PARTITION = 1 + 2.5  # the reap index, and 2-3 minute buckets of a 90 s horizon


def resting_invocation_seconds(stack: StackDefaults) -> float:
    """Seconds an idle invocation of a resting group runs (module docstring)."""
    return min(stack.poller_run_seconds, QUIET.settle.total_seconds() + 1.5)


def poller_invocation_seconds(stack: StackDefaults, timings: LeaseTimings) -> float:
    """Seconds one poller invocation of an idle installation runs in steady state; never longer than its
    run. Resting groups: ``resting_invocation_seconds``. Otherwise: It hands over at the
    next whole second at least ``handover_lead`` after it offers (on average half a second past it) and
    returns then. Early handover (the default): it offers once the next invocation, started a tick after
    it, has registered (its second lease read, ``standby_poll`` in) and the holder has renewed (on average
    half of ``renew_every`` later). Hot standby: it offers once it starts retiring, ``retire_before``
    before its run ends."""
    if stack.poller_rests_when_quiet:
        return resting_invocation_seconds(stack)
    if stack.poller_hot_standby:
        handover = stack.poller_run_seconds - timings.retire_before + timings.handover_lead + 0.5
    else:
        tick = 60 / stack.poller_ticks_per_minute
        handover = tick + timings.standby_poll + timings.renew_every / 2 + timings.handover_lead + 0.5
    return min(stack.poller_run_seconds, handover)


def invocations_alive(stack: StackDefaults, timings: LeaseTimings) -> float:
    """Poller invocations of one group alive at an average instant (one holds the lease, the rest stand
    by)."""
    return poller_invocation_seconds(stack, timings) * stack.poller_ticks_per_minute / 60


def poller_lambda_month(stack: StackDefaults, timings: LeaseTimings) -> dict[str, float]:
    """Invocations, GB-seconds and their dollars a month for every group's poller."""
    invocations = stack.poller_groups * stack.poller_ticks_per_minute * MINUTES_PER_DAY * DAYS_PER_MONTH
    gb_seconds = invocations * poller_invocation_seconds(stack, timings) * stack.poller_memory_mb / 1024
    return {
        "invocations": invocations,
        "gb_seconds": gb_seconds,
        "usd_duration": gb_seconds * PRICES_USD["lambda_gb_second_arm64"],
        "usd_requests": invocations * PRICES_USD["lambda_request"],
    }


def idle_dynamodb_per_second(
    partitions: int, stack: StackDefaults, timings: LeaseTimings, settle_s: float
) -> dict[str, dict[str, float]]:
    """Requests, read units and write units a second an idle installation spends, by what spends them
    (see the module's docstring). ``settle_s``: how long a past minute's bucket is still read."""
    if stack.poller_rests_when_quiet:
        return _resting_dynamodb_per_second(partitions, stack, settle_s)
    sweeps = 1 / stack.sweep_interval_s
    groups = stack.poller_groups
    alive = invocations_alive(stack, timings)
    ticks = stack.poller_ticks_per_minute / 60  # handovers (and invocation starts) a second, per group
    due_queries = partitions * (1 + settle_s / 60) * sweeps
    reap_queries = partitions * sweeps / RECOVER_EVERY_SWEEPS
    preload_queries = (
        partitions * (alive * stack.poller_ticks_per_minute + stack.poller_ticks_per_minute) / 60
    )
    # Early handover: at each handover the holder counts the coming minute's rows (``Poller.busy``), one
    # Query per partition of its group (empty when idle); with a hot standby it never asks.
    busy_counts = 0.0 if stack.poller_hot_standby else partitions * ticks
    # Fan-out: launch_lead before each minute a holder counts that minute's rows, a Query per partition of
    # its group (duetime.scheduling.fan_out; empty when idle): at most once a minute, as here (a resting
    # holder counts only when it serves then).
    fan_out_counts = partitions / 60 if stack.poller_fan_out else 0.0
    deadline_queries = partitions / DEADLINE_CHECK_SECONDS
    notify_queries = groups * sweeps / RECOVER_EVERY_SWEEPS  # each reap pass of each group's holder
    lease_reads = groups * ((alive - 1) / timings.standby_poll + HANDOVER_READS * ticks)
    lease_writes = groups * (1 / timings.renew_every + HANDOVER_WRITES * ticks)
    eventual, consistent, write = EVENTUALLY_CONSISTENT_READ_UNITS, CONSISTENT_READ_UNITS, SMALL_WRITE_UNITS
    return {
        "marks_read": _marks_read(partitions, groups, ticks),
        "due_index_queries": _reads(due_queries, eventual),
        "reap_index_queries": _reads(reap_queries, eventual),
        "preload_queries": _reads(preload_queries, eventual),
        "busy_counts": _reads(busy_counts, eventual),
        "fan_out_counts": _reads(fan_out_counts, eventual),
        "deadline_watch_queries": _reads(deadline_queries, eventual),
        "notification_queries": _reads(notify_queries, eventual),
        "lease_reads": _reads(lease_reads, consistent),
        "lease_writes": {"requests": lease_writes, "read_units": 0.0, "write_units": lease_writes * write},
        "mark_writes": _mark_writes(partitions),
    }


def _reads(requests: float, units: float) -> dict[str, float]:
    """``requests`` reads a second of ``units`` read units each."""
    return {"requests": requests, "read_units": requests * units, "write_units": 0.0}


def _marks_read(partitions: int, groups: int, reigns_per_second: float) -> dict[str, float]:
    """The holders read their partitions' low-water marks once a reign (one BatchGetItem a group), and keep
    them as they move them (``duetime.scheduling.low_water``)."""
    per_group = math.ceil(partitions / groups)
    return {
        "requests": groups * math.ceil(per_group / BATCH_GET_KEYS) * reigns_per_second,
        "read_units": partitions * EVENTUALLY_CONSISTENT_READ_UNITS * reigns_per_second,
        "write_units": 0.0,
    }


def _mark_writes(partitions: int) -> dict[str, float]:
    """Each partition's mark moves once a minute, as its last minute's bucket settles."""
    return {
        "requests": partitions / 60,
        "read_units": 0.0,
        "write_units": partitions / 60 * SMALL_WRITE_UNITS,
    }


def _resting_dynamodb_per_second(
    partitions: int, stack: StackDefaults, settle_s: float
) -> dict[str, dict[str, float]]:
    """``idle_dynamodb_per_second`` for resting groups: one short invocation a tick a group, whose sweeps
    and recovery run as a holder's do, plus the look ahead and four lease calls (read and take the free
    lease, read the wake count, give it back)."""
    groups = stack.poller_groups
    ticks = stack.poller_ticks_per_minute / 60  # invocations a second, per group
    seconds = resting_invocation_seconds(stack)
    sweeps = max(1.0, seconds / stack.sweep_interval_s) * ticks  # per group, a second
    due_queries = partitions * (1 + settle_s / 60) * sweeps
    reap_queries = partitions * ticks  # the first sweep of each invocation recovers
    look_queries = partitions * QUIET_LOOK_QUERIES_PER_PARTITION * ticks
    preload_queries = partitions * ticks  # the current minute, loaded as the invocation starts
    lease_reads, lease_writes = groups * 2 * ticks, groups * 2 * ticks
    eventual, consistent, write = EVENTUALLY_CONSISTENT_READ_UNITS, CONSISTENT_READ_UNITS, SMALL_WRITE_UNITS

    return {
        "marks_read": _marks_read(partitions, groups, ticks),
        "due_index_queries": _reads(due_queries, eventual),
        "reap_index_queries": _reads(reap_queries, eventual),
        "quiet_look_queries": _reads(look_queries, eventual),
        # Fan-out's count of the coming minute (duetime.scheduling.fan_out), when the invocation serves within
        # launch_lead of it: at most once a tick, as here.
        "fan_out_counts": _reads(partitions * ticks if stack.poller_fan_out else 0.0, eventual),
        "deadline_watch_queries": _reads(partitions * ticks, eventual),  # each invocation's first pass
        "notification_queries": _reads(groups * ticks, eventual),
        "preload_queries": _reads(preload_queries, eventual),
        "lease_reads": _reads(lease_reads, consistent),
        "lease_writes": {"requests": lease_writes, "read_units": 0.0, "write_units": lease_writes * write},
        "mark_writes": _mark_writes(partitions),
    }


def totals(parts: dict[str, dict[str, float]]) -> dict[str, float]:
    """The parts of ``idle_dynamodb_per_second`` added up."""
    return {
        key: sum(part[key] for part in parts.values()) for key in ("requests", "read_units", "write_units")
    }


def provisioned_concurrency_month(stack: StackDefaults, peak_minutes_per_day: float) -> dict[str, float]:
    """Dollars a month of the worker's provisioned concurrency: ``peak_workers`` for ``peak_minutes_per_day``
    and the baseline for the rest of each day."""
    gb = stack.worker_memory_mb / 1024
    price = PRICES_USD["lambda_provisioned_concurrency_gb_second_arm64"]
    peak_s = peak_minutes_per_day * 60 * DAYS_PER_MONTH
    rest_s = (MINUTES_PER_DAY - peak_minutes_per_day) * 60 * DAYS_PER_MONTH
    return {
        "usd_peak": stack.peak_workers * gb * peak_s * price,
        "usd_baseline": stack.baseline_provisioned_workers * gb * rest_s * price,
    }


def prescaler_month(partitions: int, stack: StackDefaults) -> dict[str, float]:
    """The prescaler (``duetime.scheduling.prescale``, ``forecast_scaling``): an invocation every
    ``prescaler_interval_minutes`` counting the due index (a Query per partition and minute of the look-ahead,
    the current one included: 0.5 read unit each when empty), one GetProvisionedConcurrencyConfig and one
    GetQueueAttributes, an X-Ray trace. At idle it never changes the provisioned workers."""
    if not stack.forecast_scaling:
        return {"invocations": 0.0, "usd_lambda": 0.0, "count_queries_per_second": 0.0, "usd_reads": 0.0}
    invocations = MINUTES_PER_DAY * DAYS_PER_MONTH / stack.prescaler_interval_minutes
    gb_seconds = invocations * stack.prescaler_invocation_seconds * stack.prescaler_memory_mb / 1024
    queries = partitions * (stack.prescale_lookahead_minutes + 1) * invocations / SECONDS_PER_MONTH
    return {
        "invocations": invocations,
        "usd_lambda": gb_seconds * PRICES_USD["lambda_gb_second_arm64"]
        + invocations
        * (PRICES_USD["lambda_request"] + PRICES_USD["xray_trace_recorded"] + PRICES_USD["sqs_request"]),
        "count_queries_per_second": queries,
        "usd_reads": queries
        * EVENTUALLY_CONSISTENT_READ_UNITS
        * SECONDS_PER_MONTH
        * PRICES_USD["dynamodb_read_request_unit"],
    }


def reconciler_month(partitions: int, stack: StackDefaults) -> dict[str, float]:
    """The reconciler at rest (``StackDefaults.reconciler_*``): its Lambda (duration, requests, traces), its
    reads (two empty Queries and a mark a partition, eventually consistent) and its report's write."""
    invocations = MINUTES_PER_DAY * DAYS_PER_MONTH / stack.reconciler_interval_minutes
    gb_seconds = invocations * stack.reconciler_invocation_seconds * stack.reconciler_memory_mb / 1024
    read_units = invocations * partitions * 3 * EVENTUALLY_CONSISTENT_READ_UNITS
    return {
        "invocations": invocations,
        "usd_lambda": gb_seconds * PRICES_USD["lambda_gb_second_arm64"]
        + invocations * (PRICES_USD["lambda_request"] + PRICES_USD["xray_trace_recorded"]),
        "usd_dynamodb": read_units * PRICES_USD["dynamodb_read_request_unit"]
        + invocations * PRICES_USD["dynamodb_write_request_unit"],
        "usd_metrics": stack.reconciler_custom_metrics * PRICES_USD["cloudwatch_custom_metric_month"],
    }


def fixed_monthly_cost(
    partitions: int, stack: StackDefaults | None = None, without: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """``monthly_fixed_usd`` (dollars a month of an installation with no runs), ``monthly_fixed_parts``
    (the dollars of each part; they add up to the total) and ``fixed_cost_quantities`` (what each part
    counts: GB-seconds, units a second, invocations, ...). ``without``: parts of the idle DynamoDB traffic
    (``idle_dynamodb_per_second``'s names) left out, to price a design that no longer makes them."""
    stack = stack or StackDefaults()
    timings = LeaseTimings(hot_standby=stack.poller_hot_standby)
    settle_s = PollerConfig(partitions=[]).bucket_settle.total_seconds()
    pollers = poller_lambda_month(stack, timings)
    dynamodb = {
        name: part
        for name, part in idle_dynamodb_per_second(partitions, stack, timings, settle_s).items()
        if name not in without
    }
    idle = totals(dynamodb)
    # Forecast scaling provisions nothing on a day without a busy minute; the schedule, its window every day.
    peak_minutes = 0.0 if stack.forecast_scaling else stack.prescale_minutes_per_day
    provisioned = provisioned_concurrency_month(stack, peak_minutes)
    prescaler = prescaler_month(partitions, stack)
    receives_per_month = stack.event_source_long_polls * SECONDS_PER_MONTH / stack.long_poll_seconds
    parts = _fixed_parts(stack, pollers, idle, provisioned, prescaler, receives_per_month)
    reconciler = reconciler_month(partitions, stack)
    parts |= {
        "reconciler_lambda": reconciler["usd_lambda"],
        "reconciler_dynamodb": reconciler["usd_dynamodb"],
        "reconciler_custom_metrics": reconciler["usd_metrics"],
    }
    return {
        "monthly_fixed_usd": round(sum(parts.values()), 2),
        "monthly_fixed_parts": {name: round(usd, 2) for name, usd in parts.items()},
        "fixed_cost_quantities": {
            "stack": asdict(stack),
            "poller_invocation_seconds": poller_invocation_seconds(stack, timings),
            "poller_invocations_alive_per_group": round(invocations_alive(stack, timings), 3),
            "poller_invocations_per_month": pollers["invocations"],
            "poller_gb_seconds_per_month": round(pollers["gb_seconds"]),
            "idle_dynamodb_per_second": {
                name: {key: round(value, 3) for key, value in part.items()} for name, part in dynamodb.items()
            },
            "idle_read_units_per_second": round(idle["read_units"], 2),
            "idle_write_units_per_second": round(idle["write_units"], 2),
            "idle_dynamodb_requests_per_second": round(idle["requests"], 2),
            "provisioned_gb_seconds_per_month": _provisioned_gb_seconds(stack, peak_minutes),
            "alarm_metrics": stack.alarm_metrics,
            "sqs_idle_receives_per_month": receives_per_month,
            "prescaler_invocations_per_month": prescaler["invocations"],
            "prescaler_count_queries_per_second": round(prescaler["count_queries_per_second"], 3),
            "reconciler_invocations_per_month": reconciler["invocations"],
        },
    }


def _fixed_parts(
    stack: StackDefaults,
    pollers: Mapping[str, float],
    idle: Mapping[str, float],
    provisioned: Mapping[str, float],
    prescaler: Mapping[str, float],
    receives_per_month: float,
) -> dict[str, float]:
    """The fixed monthly cost by part, in USD (unrounded)."""
    return {
        "pollers_lambda_duration": pollers["usd_duration"],
        "pollers_lambda_requests": pollers["usd_requests"],
        "sweeps_dynamodb_reads": idle["read_units"]
        * SECONDS_PER_MONTH
        * PRICES_USD["dynamodb_read_request_unit"],
        "sweeps_dynamodb_writes": idle["write_units"]
        * SECONDS_PER_MONTH
        * PRICES_USD["dynamodb_write_request_unit"],
        "provisioned_concurrency_peak": provisioned["usd_peak"],
        "provisioned_concurrency_baseline": provisioned["usd_baseline"],
        "dashboard": stack.dashboards * PRICES_USD["cloudwatch_dashboard_month"],
        "alarms": stack.alarm_metrics * PRICES_USD["cloudwatch_alarm_metric_month"],
        "poller_custom_metrics": stack.poller_custom_metrics * PRICES_USD["cloudwatch_custom_metric_month"],
        "poller_xray_traces": pollers["invocations"] * PRICES_USD["xray_trace_recorded"],
        "sqs_idle_receives": receives_per_month * PRICES_USD["sqs_request"],
        "prescaler_lambda": prescaler["usd_lambda"],
        "prescaler_dynamodb_reads": prescaler["usd_reads"],
        "event_pollers_minimum": stack.worker_min_pollers
        * SECONDS_PER_MONTH
        / 3600
        * PRICES_USD["lambda_sqs_event_poller_hour"],
    }


def _provisioned_gb_seconds(stack: StackDefaults, peak_minutes: float) -> int:
    """The workers' provisioned concurrency a month, in GB-seconds: the peak's window and the baseline."""
    return round(
        (
            stack.peak_workers * peak_minutes
            + stack.baseline_provisioned_workers * (MINUTES_PER_DAY - peak_minutes)
        )
        * 60
        * DAYS_PER_MONTH
        * stack.worker_memory_mb
        / 1024
    )


@dataclass(frozen=True)
class Lever:
    """A change to the installation that would cut its fixed cost: the stack it leaves (``stack``) and the
    idle DynamoDB traffic it removes (``drops``, names of ``idle_dynamodb_per_second``'s parts)."""

    name: str
    what: str
    stack: dict[str, Any]
    drops: frozenset[str] = frozenset()


LEVERS = (
    Lever(
        "sweeps_skip_empty_partitions",
        "sweeps skip partitions whose minute preload came back empty and whose mark is at the current minute "
        "(a writer filing a row for the current minute flags its partition)",
        {},
        frozenset({"due_index_queries"}),
    ),
    Lever(
        "reap_only_partitions_with_runs",
        "the reap index is read only for partitions with runs in flight",
        {},
        frozenset({"reap_index_queries"}),
    ),
    Lever(
        "one_poller_group_at_low_load",
        "one poller group for all 64 partitions while the /v1/load forecast shows no spike (4 at the peak)",
        {"poller_groups": 1},
    ),
    Lever(
        "pollers_of_128_mb_at_low_load",
        "128 MB pollers while no spike is forecast (512 MB for the peak's claims), once the sweep levers "
        "above have made an idle sweep cheap in CPU too (`duetime bench idle` measures its CPU)",
        {"poller_memory_mb": 128},
    ),
    Lever(
        "quiet_observability",
        "no poller metrics at idle, the dashboard optional",
        {"poller_custom_metrics": 0, "dashboards": 0},
    ),
)


def lever_savings(partitions: int, stack: StackDefaults | None = None) -> list[dict[str, Any]]:
    """Each lever's estimated saving a month, applied one after the other in ``LEVERS``' order (each saving
    is counted after the levers before it, so they add up), with the fixed cost left after each."""
    stack = stack or StackDefaults()
    dropped: frozenset[str] = frozenset()
    before = fixed_monthly_cost(partitions, stack)["monthly_fixed_usd"]
    savings = []
    for lever in LEVERS:
        stack = replace(stack, **lever.stack)
        dropped |= lever.drops
        after = fixed_monthly_cost(partitions, stack, dropped)["monthly_fixed_usd"]
        savings.append(
            {
                "lever": lever.name,
                "what": lever.what,
                "saves_usd": round(before - after, 2),
                "leaves_usd": after,
            }
        )
        before = after
    return savings
