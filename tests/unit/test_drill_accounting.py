"""The upgrade drill's accounting (duetime_bench.drill.accounting): lost, repeated and late from the calls a
target recorded and the fires expected, over the drill and per phase."""

from __future__ import annotations

from duetime_bench.drill.accounting import (
    ExpectedFire,
    PhaseWindow,
    TargetCall,
    account,
    repeat_instant,
    tally,
)

T0 = 1_000_000.0


def fire(run: str, at: float, job: str = "cron") -> ExpectedFire:
    return ExpectedFire(run, job, T0 + at)


def call(run: str, at: float, attempt: int = 1, status: int = 200, replayed: bool = False) -> TargetCall:
    return TargetCall(run, attempt, status, T0 + at, replayed)


def test_a_fire_with_no_call_by_the_end_is_lost_and_one_called_late_is_not() -> None:
    expected = [fire("a@1", 0), fire("a@2", 60), fire("a@3", 120)]
    calls = [call("a@1", 0.4), call("a@3", 125)]
    result = tally(expected, calls, cutoff=T0 + 200)
    assert (result.due, result.called, result.lost) == (3, 2, ["a@2"])
    assert result.late_max_s == 5.0
    assert result.late_p50_s == 2.7


def test_fires_past_the_cut_off_are_not_expected_and_calls_for_runs_not_expected_are_counted_only() -> None:
    expected = [fire("a@1", 0), fire("a@2", 60)]
    calls = [call("a@1", 1), call("b@manual", 30)]
    result = tally(expected, calls, cutoff=T0 + 59)
    assert (result.due, result.lost, result.calls) == (1, [], 2)


def test_a_retry_after_a_failed_attempt_is_not_a_repeat_but_a_second_success_or_attempt_is() -> None:
    retried = [call("r", 0, 1, 503), call("r", 20, 2, 200)]
    assert repeat_instant(retried) == float("inf")
    again = [*retried, call("r", 90, 1, 200, replayed=True)]  # a worker replaced mid-call: attempt 1 again
    assert repeat_instant(again) == T0 + 90
    twice = [call("s", 0, 1, 200), call("s", 50, 2, 200)]  # called again after a success
    assert repeat_instant(twice) == T0 + 50
    unanswered = [call("u", 0, 1, 0), call("u", 65, 1, 200)]  # the first call's answer never recorded
    assert repeat_instant(unanswered) == T0 + 65


def test_each_phase_owns_the_fires_due_and_the_repeats_made_in_its_window() -> None:
    expected = [
        fire("a@1", 10, "cron"),  # old
        fire("a@2", 70, "cron"),  # upgrade: lost
        fire("slow@t", 65, "slow-triggered"),  # upgrade: called twice, the second in rollback
        fire("a@3", 130, "cron"),  # rollback
        fire("once@1", 140, "once"),  # rollback, late
    ]
    calls = [
        call("a@1", 10.2),
        call("slow@t", 66, 1, 200),
        call("slow@t", 125, 1, 200, replayed=True),
        call("a@3", 130.1),
        call("once@1", 152),
    ]
    phases = [PhaseWindow("old", T0, T0 + 60), PhaseWindow("upgrade", T0 + 60, T0 + 120)]
    phases.append(PhaseWindow("rollback", T0 + 120, float("inf")))
    figures = account(expected, calls, phases, cutoff=T0 + 180)
    overall = figures["overall"]
    assert (overall["due"], overall["lost"], overall["lost_runs"]) == (5, 1, ["a@2"])
    assert overall["repeated_runs"] == {"slow@t": 2}
    assert overall["late_max_s"] == 12.0
    old, upgrade, rollback = (figures["phases"][name] for name in ("old", "upgrade", "rollback"))
    assert (old["due"], old["lost"], old["repeated"], old["calls"]) == (1, 0, 0, 1)
    assert (upgrade["due"], upgrade["lost_runs"], upgrade["repeated"]) == (2, ["a@2"], 0)
    assert upgrade["due_by_job"] == {"cron": 1, "slow-triggered": 1}
    assert (rollback["due"], rollback["repeated_runs"], rollback["late_max_s"]) == (2, {"slow@t": 2}, 12.0)
    assert rollback["calls"] == 3
