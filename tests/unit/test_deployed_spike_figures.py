"""The deployed-stack spike bench's modes and figures (``duetime_bench.deployed_spike``), without a stack."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from duetime.domain.timeutil import iso_z
from duetime_bench.deployed import TargetCall, function_kind
from duetime_bench.deployed_spike import poller_environment, spike_figures

DUE = datetime(2026, 12, 3, 0, 0, tzinfo=UTC)
STACK_VARIABLES = {
    "DUETIME_PARTITIONS": "0-15",
    "DUETIME_POLLER_HELPER_FUNCTION": "Duetime-PollerHelper",
    "DUETIME_JOBS_TABLE": "jobs",
}


def call(run_id: str, late: float) -> TargetCall:
    return TargetCall(run_id, iso_z(DUE), DUE.timestamp() + late)


def test_the_fan_out_mode_lowers_the_holders_rows_and_keeps_the_helper() -> None:
    variables = poller_environment(STACK_VARIABLES, "fan_out", 300)
    assert variables == {**STACK_VARIABLES, "DUETIME_FAN_OUT_HOLDER_ROWS": "300"}


def test_the_alone_mode_takes_the_helper_away_and_leaves_the_rest_as_the_stack_set_it() -> None:
    variables = poller_environment({**STACK_VARIABLES, "DUETIME_FAN_OUT_HOLDER_ROWS": "300"}, "alone", 300)
    assert variables == {"DUETIME_PARTITIONS": "0-15", "DUETIME_JOBS_TABLE": "jobs"}


def test_fan_out_on_a_stack_deployed_without_helpers_is_refused_and_an_unknown_mode_too() -> None:
    without = {k: v for k, v in STACK_VARIABLES.items() if k != "DUETIME_POLLER_HELPER_FUNCTION"}
    with pytest.raises(RuntimeError, match="poller_fan_out=false"):
        poller_environment(without, "fan_out", 300)
    with pytest.raises(ValueError, match="unknown mode 'both'"):
        poller_environment(STACK_VARIABLES, "both", 300)


def test_the_helper_function_is_told_from_the_group_pollers_by_its_logical_id() -> None:
    assert function_kind("PollersPollerHelperFunctionC05B0F9F") == "helper"
    assert function_kind("PollersPoller0to15Function05514EE6") == "poller"


def test_figures_count_lost_and_repeated_runs_and_time_the_last_claim_and_start() -> None:
    planned = dict.fromkeys(["a", "b", "c"], DUE)
    calls = [call("a", 0.2), call("b", 1.5), call("a", 3.0), call("c", 4.0), call("other", 0.1)]
    claimed = {"a": DUE, "b": DUE + timedelta(seconds=1), "c": DUE + timedelta(seconds=2)}
    figures = spike_figures(planned, calls, claimed, DUE)
    assert (figures["lost"], figures["repeated"], figures["runs_started"]) == (0, 1, 3)
    assert figures["seconds_to_all_claimed"] == 2.0
    assert figures["seconds_to_all_started"] == 4.0
    assert figures["starts_per_s"] == 0.75
    assert figures["unexpected_calls"] == 1


def test_a_lost_run_leaves_no_time_to_all_started_rather_than_a_flattering_one() -> None:
    planned = dict.fromkeys(["a", "b"], DUE)
    figures = spike_figures(planned, [call("a", 0.5)], {"a": DUE}, DUE)
    assert figures["lost"] == 1
    assert figures["seconds_to_all_started"] is None and figures["starts_per_s"] is None
    assert figures["seconds_to_all_claimed"] is None  # a run row is missing
