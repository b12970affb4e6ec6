"""`duetime bench idle`: the groups it serves, the rule that starts invocations, and its figures."""

from __future__ import annotations

import threading

import pytest

from duetime_bench.idle import Invocation, idle_figures, partition_groups, schedule_rule


def test_the_groups_cover_every_partition_once() -> None:
    groups = partition_groups(4)
    assert [len(g) for g in groups] == [16, 16, 16, 16]
    assert sorted(p for g in groups for p in g) == list(range(64))
    assert partition_groups(1) == [list(range(64))]
    assert sorted(p for g in partition_groups(3) for p in g) == list(range(64))


def test_the_rule_invokes_at_once_then_at_its_second_of_each_minute() -> None:
    stop = threading.Event()
    now = [1_000.0]  # 16:40 past the epoch: second 40 of a minute
    started: list[float] = []

    def wait(seconds: float) -> bool:
        now[0] += seconds
        return len(started) >= 3

    stop.wait = wait  # type: ignore[method-assign]
    schedule_rule(lambda: started.append(now[0]), stop, second_of_minute=10.0, wall_clock=lambda: now[0])
    assert started == [1_000.0, 1_030.0, 1_090.0]  # at once, then :10 of the next minutes


def test_the_figures_count_only_steady_invocations_that_ended_on_their_own() -> None:
    usage = {
        "dynamodb_requests": 1200,
        "read_units": 900.0,
        "write_units": 30.0,
        "local_read_units": 400.0,
        "local_write_units": 30.0,
        "by_operation": {"dynamodb:Query": 1000},
    }
    invocations = [
        Invocation(0, -50.0, 5.0),  # each group's first: started at once by its rule, not steady
        Invocation(1, -40.0, 5.0),
        Invocation(2, -30.0, 5.0),
        Invocation(3, -20.0, 5.0),
        Invocation(0, 0.0, 125.0),
        Invocation(1, 10.0, 136.0),
        Invocation(2, 20.0, 30.0, stopped=True),  # cut short by the bench's end
        Invocation(3, 40.0),  # still running
    ]
    figures = idle_figures(
        usage, 10.0, 2.0, invocations, groups=4, run_seconds=135.0, hot_standby=True, rest=False
    )
    assert figures["invocations_ended"] == 2 and figures["invocation_seconds_mean"] == pytest.approx(125.5)
    assert figures["read_units_per_s"] == 90.0 and figures["write_units_per_s"] == 3.0
    assert figures["dynamodb_requests_per_s"] == 120.0 and figures["poller_cpu_seconds_per_second"] == 0.2
    assert figures["model_invocation_seconds"] == 125.5 and figures["model_read_units_per_s"] > 0
    early = idle_figures(usage, 10.0, 2.0, invocations, groups=4, run_seconds=135.0, rest=False)
    assert early["model_invocation_seconds"] == 64.0 and not early["hot_standby"]
    resting = idle_figures(usage, 10.0, 2.0, invocations, groups=4, run_seconds=135.0)
    assert resting["model_invocation_seconds"] == 3.5 and resting["rests_when_quiet"]
