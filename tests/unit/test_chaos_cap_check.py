"""The chaos run's cap check counts the calls duetime waited for, not calls it had given up on."""

from __future__ import annotations

from duetime.bench.chaos import call_timeout, max_in_flight_while_waited
from duetime.demo_target import Call


def call(received: float, answered: float, query: str = "") -> Call:
    params = dict(part.split("=") for part in f"group=team-a&{query}".strip("&").split("&"))
    return Call("/demo/target", params, "POST", {}, "", received, 200, answered_at=answered)


def test_a_call_past_its_timeout_no_longer_counts_against_the_cap() -> None:
    slow = call(0.0, 2.0, "sleep=2&slow_attempt=1")  # timed out at 1 s; the target answered at 2 s
    assert call_timeout(slow) == 1.0 and call_timeout(call(0, 1)) == 30.0
    later = [call(1.01, 1.5), call(1.02, 1.6)]  # the freed slot and the other one
    assert max_in_flight_while_waited([slow, *later], call_timeout) == {"team-a": 2}


def test_three_calls_duetime_waited_for_at_once_are_over_a_cap_of_two() -> None:
    calls = [call(0.0, 1.0), call(0.2, 1.2), call(0.9, 1.5)]
    assert max_in_flight_while_waited(calls, call_timeout) == {"team-a": 3}
    back_to_back = [call(0.0, 1.0), call(1.0, 2.0), call(0.5, 1.5)]  # one ends as the next starts
    assert max_in_flight_while_waited(back_to_back, call_timeout) == {"team-a": 2}
