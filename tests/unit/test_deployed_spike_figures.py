"""The deployed-stack spike bench's modes and figures (``duetime_bench.deployed_spike``), without a stack."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from duetime.domain.timeutil import iso_z
from duetime.scheduling.fan_out import (
    HELPER_INVOCATION_LOG,
    POLLER_INVOCATION_LOG,
    FanOutSetting,
)
from duetime_bench.deployed import TargetCall, function_kind
from duetime_bench.deployed_spike import (
    HelperInvocation,
    ModeNotInEffect,
    ModeWindow,
    PollerInvocation,
    check_mode,
    helper_invocations,
    mode_evidence,
    poller_environment,
    poller_invocations,
    rows_by_group,
    spike_figures,
)

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


# --- proof that a mode ran as labelled ---------------------------------------------------------------------

GROUPS = ["0-15", "16-31"]
ROWS = {"0-15": 800, "16-31": 700}  # each group's minute: more than the holder claims alone
ON, OFF = FanOutSetting(helpers=True, holder_rows=300), FanOutSetting(helpers=False)
FAN_OUT_WINDOW = ModeWindow(DUE.timestamp() - 200, DUE.timestamp() + 30)
ALONE_WINDOW = ModeWindow(DUE.timestamp() + 200, DUE.timestamp() + 430)
ALONE_DUE = DUE + timedelta(minutes=7)


def at(seconds: float) -> float:
    """An instant ``seconds`` from the fan_out mode's due second (epoch seconds)."""
    return DUE.timestamp() + seconds


def pollers(setting: FanOutSetting, *seconds: float) -> list[PollerInvocation]:
    """One invocation of each group at each of ``seconds``, with ``setting``."""
    return [PollerInvocation(at(s), setting, group) for s in seconds for group in GROUPS]


def helpers(count: int, seconds: float = -30, minute: datetime = DUE) -> list[HelperInvocation]:
    return [HelperInvocation(at(seconds), (2 * i, 2 * i + 1), minute) for i in range(count)]


def evidence(
    window: ModeWindow, poller_list: list[PollerInvocation], helper_list: list[HelperInvocation]
) -> dict[str, Any]:
    return mode_evidence(window, DUE if window is FAN_OUT_WINDOW else ALONE_DUE, poller_list, helper_list)


def logged(message: str, when: datetime, **fields: Any) -> str:
    """A line as Powertools writes it."""
    stamp = when.strftime("%Y-%m-%d %H:%M:%S,") + f"{when.microsecond // 1000:03d}+0000"
    return json.dumps({"level": "INFO", "message": message, "timestamp": stamp, **fields})


def test_the_invocations_are_read_from_their_own_lines_with_the_instant_each_was_logged() -> None:
    when = DUE - timedelta(seconds=30, milliseconds=-250)
    messages = [
        "START RequestId: r1 Version: $LATEST",
        logged(POLLER_INVOCATION_LOG, when, fan_out={"helpers": True, "holder_rows": 300}, group="0-15"),
        logged("cold start", when),
        logged(HELPER_INVOCATION_LOG, when, helper={"partitions": [2, 3], "minute": iso_z(DUE)}),
        "REPORT RequestId: r1\tDuration: 9.1 ms",
    ]
    assert poller_invocations(messages) == [PollerInvocation(when.timestamp(), ON, "0-15")]
    assert helper_invocations(messages) == [HelperInvocation(when.timestamp(), (2, 3), DUE)]


def test_a_fan_out_mode_whose_pollers_logged_fan_out_on_and_started_helpers_is_accepted() -> None:
    figures = evidence(FAN_OUT_WINDOW, pollers(ON, -150, -90, -30), helpers(10))
    check_mode("fan_out", figures, GROUPS, ROWS, 300)
    assert figures["poller_invocations"] == {"fan_out_on": 6, "fan_out_off": 0}
    assert figures["helpers_invoked"] == 10 and figures["poller_holder_rows"] == [300]
    assert figures["helpers_started_in_their_minute"] == 0  # launched 30 s ahead, they started in time


def test_helpers_that_started_only_once_their_minute_had_begun_are_counted_apart() -> None:
    """LocalStack runs a function's asynchronous invocations 6 at a time on this machine: the rest wait."""
    figures = evidence(FAN_OUT_WINDOW, pollers(ON, -90), helpers(6) + helpers(4, seconds=25))
    assert (figures["helpers_invoked"], figures["helpers_started_in_their_minute"]) == (10, 4)


def test_an_alone_mode_whose_pollers_logged_fan_out_off_and_started_no_helper_is_accepted() -> None:
    check_mode("alone", evidence(ALONE_WINDOW, pollers(OFF, 250, 310), []), GROUPS, ROWS, 300)


def test_helpers_whose_lines_were_stored_during_the_next_mode_count_for_the_mode_they_started_in() -> None:
    """The issue's mislabel: LocalStack stores a helper's lines when it ends, after its mode moved on."""
    started_in_fan_out = helpers(20, seconds=-30)  # stored at +60 s and later, the alone mode's time
    alone = evidence(ALONE_WINDOW, pollers(OFF, 250), started_in_fan_out)
    fan_out = evidence(FAN_OUT_WINDOW, pollers(ON, -90), started_in_fan_out)
    assert (fan_out["helpers_invoked"], alone["helpers_invoked"]) == (20, 0)


def test_an_alone_mode_whose_pollers_logged_fan_out_on_is_refused() -> None:
    """The pollers ran with the other mode's environment: its figures are not the alone mode's."""
    ran = [*pollers(OFF, 250), PollerInvocation(at(310), ON, "0-15")]
    with pytest.raises(
        ModeNotInEffect, match=r"alone mode did not take effect: 1 poller invocations .* fan-out on"
    ):
        check_mode("alone", evidence(ALONE_WINDOW, ran, []), GROUPS, ROWS, 300)


def test_a_fan_out_mode_whose_pollers_logged_fan_out_off_is_refused() -> None:
    with pytest.raises(
        ModeNotInEffect, match=r"fan_out mode did not take effect: 2 poller invocations .* off"
    ):
        check_mode("fan_out", evidence(FAN_OUT_WINDOW, pollers(OFF, -90), helpers(10)), GROUPS, ROWS, 300)


def test_a_fan_out_mode_whose_pollers_ran_with_other_holder_rows_is_refused() -> None:
    stack_default = FanOutSetting(helpers=True, holder_rows=5000)
    with pytest.raises(ModeNotInEffect, match=r"holder rows \[5000\], not 300"):
        check_mode("fan_out", evidence(FAN_OUT_WINDOW, pollers(stack_default, -90), []), GROUPS, ROWS, 300)


def test_a_fan_out_mode_in_which_no_helper_started_is_refused() -> None:
    with pytest.raises(ModeNotInEffect, match="no helper started, though a group's minute held 800 rows"):
        check_mode("fan_out", evidence(FAN_OUT_WINDOW, pollers(ON, -90), []), GROUPS, ROWS, 300)


def test_a_fan_out_mode_with_too_few_rows_for_any_helper_is_refused_with_what_to_change() -> None:
    few = {"0-15": 120, "16-31": 130}
    with pytest.raises(ModeNotInEffect, match=r"busiest 130.*more --jobs or fewer --holder-rows"):
        check_mode("fan_out", evidence(FAN_OUT_WINDOW, pollers(ON, -90), []), GROUPS, few, 300)


def test_an_alone_mode_in_which_a_helper_started_is_refused() -> None:
    late_helper = helpers(1, seconds=280, minute=ALONE_DUE)
    with pytest.raises(ModeNotInEffect, match="alone mode did not take effect: 1 helper invocations"):
        check_mode("alone", evidence(ALONE_WINDOW, pollers(OFF, 250), late_helper), GROUPS, ROWS, 300)


def test_a_mode_in_which_a_group_logged_no_invocation_is_refused() -> None:
    """Nothing shows what that group's holder ran with (LocalStack stores nothing of one it stopped)."""
    only_one_group = [PollerInvocation(at(250), OFF, "0-15")]
    with pytest.raises(ModeNotInEffect, match="no poller invocation of group 16-31"):
        check_mode("alone", evidence(ALONE_WINDOW, only_one_group, []), GROUPS, ROWS, 300)


def test_invocations_before_a_mode_s_window_are_not_its_own() -> None:
    """The previous mode's pollers, logged before the update took effect, are left out."""
    before_the_update = pollers(ON, 150)
    figures = evidence(ALONE_WINDOW, before_the_update + pollers(OFF, 250), [])
    assert figures["poller_invocations"] == {"fan_out_on": 0, "fan_out_off": 2}


def test_the_rows_of_each_group_are_counted_from_the_run_ids_partitions() -> None:
    from duetime.domain.ids import new_job_id, partition_of

    job_ids = [new_job_id() for _ in range(50)]
    counts = rows_by_group([f"{j}@{iso_z(DUE)}" for j in job_ids], ["0-31", "32-63"])
    assert counts == {
        "0-31": sum(partition_of(j) < 32 for j in job_ids),
        "32-63": sum(partition_of(j) >= 32 for j in job_ids),
    }


def test_the_command_fails_with_the_reason_rather_than_print_a_mode_that_did_not_take_effect(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from duetime.cli import main
    from duetime_bench import deployed_spike

    def refused(*args: Any) -> dict[str, Any]:
        raise ModeNotInEffect("the alone mode did not take effect: 20 helper invocations started")

    monkeypatch.setattr(deployed_spike, "run_deployed_spike", refused)
    assert main(["bench", "spike", "--deployed-local", "--jobs", "3000", "--json"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "ModeNotInEffect: the alone mode did not take effect: 20 helper" in err
