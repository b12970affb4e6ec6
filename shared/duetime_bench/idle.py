"""`duetime bench idle`: what an installation with no jobs due spends, measured on the local stack.

Every partition group gets what the deployed stack gives it: an invocation of the real poller shift
(``PollerShift.serve``, the code the poller Lambda runs) started every minute at a second of its own, each
serving ``run_seconds``, overlapping and handing the group's lease over. After a warm-up long enough for
every group to have handed over once, it counts every DynamoDB request for ``minutes`` (``Ledger``: units
by AWS's billing rules) and times the invocations that ended on their own, then prints both beside the
model ``duetime plan`` prices (``duetime.capacity.fixed_cost``).

Here the invocations are threads of one process sharing one store clock; on AWS each runs in an
execution environment of its own, with its own clock (whose probes add a few reads a minute).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from duetime.capacity.fixed_cost import (
    SECONDS_PER_MONTH,
    StackDefaults,
    idle_dynamodb_per_second,
    poller_invocation_seconds,
    totals,
)
from duetime.capacity.prices import PRICES_AS_OF, PRICES_USD
from duetime.domain.ids import PARTITIONS
from duetime.scheduling.poller import PollerConfig
from duetime.scheduling.poller_lease import LeaseTimings, PollerShift, invocation_id
from duetime.scheduling.quiet import QuietTimings
from duetime_bench.harness import BenchStack


@dataclass
class Invocation:
    group: int
    started: float  # monotonic seconds
    ended: float | None = None
    stopped: bool = False  # ended because the bench stopped it, not on its own
    sweeps: int = 0
    handovers: int = 0
    takeovers: int = 0
    rested: bool = False


def partition_groups(groups: int, partitions: int = PARTITIONS) -> list[list[int]]:
    """``groups`` contiguous groups covering every partition once (the stack's default is 4 of 16)."""
    size = -(-partitions // groups)
    return [list(range(start, min(start + size, partitions))) for start in range(0, partitions, size)]


def serve_one(
    stack: BenchStack,
    group: int,
    partitions: list[int],
    run_seconds: float,
    stop: threading.Event,
    record: Callable[[Invocation], None],
    clock: Callable[[], float] = time.monotonic,
    hot_standby: bool = False,
    rest: bool = True,
) -> None:
    """One poller invocation: a fresh poller (as a new execution environment has) serving its group.
    ``rest``: it gives the lease back once the group is quiet (``duetime.scheduling.quiet``, the stack's
    default)."""
    invocation = Invocation(group, clock())
    record(invocation)
    timings = LeaseTimings(hot_standby=hot_standby)
    quiet = QuietTimings() if rest else None
    poller = stack.poller().for_partitions(partitions)
    shift = PollerShift(poller, stack.store, timings, 1.0, quiet=quiet)
    report = shift.serve(invocation_id("idle"), partitions, run_seconds, stop.wait, stop.is_set)
    invocation.ended = clock()
    invocation.stopped = stop.is_set()
    invocation.sweeps, invocation.handovers, invocation.takeovers = (
        report.sweeps,
        report.handovers,
        report.takeovers,
    )
    invocation.rested = report.rested


def schedule_rule(
    start_invocation: Callable[[], None],
    stop: threading.Event,
    second_of_minute: float,
    wall_clock: Callable[[], float] = time.time,
) -> None:
    """A ``rate(1 minute)`` rule: an invocation at once (the rule was just created), then one a minute at
    ``second_of_minute``, until ``stop``."""
    start_invocation()
    while True:
        now = wall_clock()
        at = now - now % 60 + second_of_minute
        at = at if at > now else at + 60
        if stop.wait(max(0.0, at - wall_clock())):
            return
        start_invocation()


def run_idle(
    minutes: float = 5.0,
    groups: int = 4,
    run_seconds: float = 135.0,
    seed: int = 11,
    hot_standby: bool = False,
    rest: bool = True,
) -> dict[str, Any]:
    """Measure ``minutes`` of an idle installation of ``groups`` poller groups (after a warm-up of
    ``run_seconds`` + 10 s) and return the figures beside the model's. ``hot_standby``: the pollers keep
    the next invocation waiting to the end of each run (``LeaseTimings.hot_standby``)."""
    stack = BenchStack.create()
    try:
        return _run_idle(stack, minutes, groups, run_seconds, random.Random(seed), hot_standby, rest)
    finally:
        stack.close()


def _run_idle(
    stack: BenchStack,
    minutes: float,
    groups: int,
    run_seconds: float,
    rng: random.Random,
    hot_standby: bool,
    rest: bool = True,
) -> dict[str, Any]:
    stack.write_jobs([], stack.clock.now())  # every partition's low-water mark, and no job at all
    stop = threading.Event()
    invocations: list[Invocation] = []
    threads: list[threading.Thread] = []
    lock = threading.Lock()

    def record(invocation: Invocation) -> None:
        with lock:
            invocations.append(invocation)

    def starter(group: int, partitions: list[int]) -> Callable[[], None]:
        def start() -> None:
            thread = threading.Thread(
                target=serve_one,
                args=(stack, group, partitions, run_seconds, stop, record, time.monotonic, hot_standby, rest),
                name=f"poller-{group}",
                daemon=True,
            )
            with lock:
                threads.append(thread)
            thread.start()

        return start

    rules = [
        threading.Thread(
            target=schedule_rule,
            args=(starter(g, partitions), stop, rng.uniform(0, 60)),
            name=f"rule-{g}",
            daemon=True,
        )
        for g, partitions in enumerate(partition_groups(groups))
    ]
    for rule in rules:
        rule.start()
    stop.wait(run_seconds + 10)  # warm-up: every group has handed over once, invocations overlap
    stack.ledger.reset()
    window_start, cpu_start = time.monotonic(), time.process_time()
    stop.wait(minutes * 60)
    usage = stack.ledger.snapshot()
    window = time.monotonic() - window_start
    cpu = time.process_time() - cpu_start
    stop.set()
    for thread in [*rules, *threads]:
        thread.join(timeout=30)
    return idle_figures(usage, window, cpu, invocations, groups, run_seconds, hot_standby, rest)


def _after_each_groups_first(invocations: list[Invocation]) -> list[Invocation]:
    """The invocations in start order, without each group's first."""
    seen: set[int] = set()
    later = []
    for invocation in sorted(invocations, key=lambda i: i.started):
        if invocation.group in seen:
            later.append(invocation)
        seen.add(invocation.group)
    return later


def _steady_lengths(invocations: list[Invocation]) -> list[float]:
    """How long each invocation lasted that ended on its own, each group's first left out."""
    return [
        i.ended - i.started
        for i in _after_each_groups_first(invocations)
        if i.ended is not None and not i.stopped
    ]


def _invocation_figures(invocations: list[Invocation], ended: list[float]) -> dict[str, Any]:
    return {
        "invocations_rested": sum(i.rested for i in invocations),
        "invocations_ended": len(ended),
        "invocation_seconds_mean": round(sum(ended) / len(ended), 2) if ended else None,
        "invocation_seconds_min": round(min(ended), 2) if ended else None,
        "invocation_seconds_max": round(max(ended), 2) if ended else None,
    }


def idle_figures(
    usage: dict[str, Any],
    window_s: float,
    cpu_s: float,
    invocations: list[Invocation],
    groups: int,
    run_seconds: float,
    hot_standby: bool = False,
    rest: bool = True,
) -> dict[str, Any]:
    """Measured requests and units a second, invocation lengths and CPU, beside the model's figures for
    the same groups, run length and handover. Invocation lengths count the steady state: invocations that
    ended on their own, but not each group's first (its rule fires at once, at a second other than the
    rule's own, so the first hands over at whatever second the next one comes)."""
    ended = _steady_lengths(invocations)
    stack = StackDefaults(
        poller_groups=groups,
        poller_run_seconds=run_seconds,
        poller_hot_standby=hot_standby,
        poller_rests_when_quiet=rest,
    )
    timings = LeaseTimings(hot_standby=hot_standby)
    settle_s = PollerConfig(partitions=[]).bucket_settle.total_seconds()
    model = totals(idle_dynamodb_per_second(PARTITIONS, stack, timings, settle_s))
    read_units_s = usage["read_units"] / window_s
    write_units_s = usage["write_units"] / window_s
    return {
        "minutes_measured": round(window_s / 60, 2),
        "partitions": PARTITIONS,
        "poller_groups": groups,
        "run_seconds": run_seconds,
        "hot_standby": hot_standby,
        "rests_when_quiet": rest,
        **_invocation_figures(invocations, ended),
        "model_invocation_seconds": poller_invocation_seconds(stack, timings),
        "handovers": sum(i.handovers for i in invocations),
        "takeovers": sum(i.takeovers for i in invocations),
        "dynamodb_requests_per_s": round(usage["dynamodb_requests"] / window_s, 2),
        "model_dynamodb_requests_per_s": round(model["requests"], 2),
        "read_units_per_s": round(read_units_s, 2),
        "model_read_units_per_s": round(model["read_units"], 2),
        "write_units_per_s": round(write_units_s, 2),
        "model_write_units_per_s": round(model["write_units"], 2),
        "local_consumed_read_units_per_s": round(usage["local_read_units"] / window_s, 2),
        "local_consumed_write_units_per_s": round(usage["local_write_units"] / window_s, 2),
        "requests_per_s_by_operation": {
            op: round(n / window_s, 3) for op, n in sorted(usage["by_operation"].items())
        },
        "usd_per_month_reads": round(
            read_units_s * SECONDS_PER_MONTH * PRICES_USD["dynamodb_read_request_unit"], 2
        ),
        "usd_per_month_writes": round(
            write_units_s * SECONDS_PER_MONTH * PRICES_USD["dynamodb_write_request_unit"], 2
        ),
        "poller_cpu_seconds_per_second": round(cpu_s / window_s, 4),
        "prices_as_of": PRICES_AS_OF,
    }
