"""The chaos run's checks: the cap counts the calls duetime waited for, not calls it had given up on (past
their timeout, or cancelled); a cancelled run stays cancelled and is not called again."""

from __future__ import annotations

from types import SimpleNamespace

from duetime.domain.models import RunStatus
from duetime.local.demo_target import Call
from duetime_bench.chaos import (
    LEASE_S,
    Cancel,
    call_timeout,
    cancel_violations,
    max_in_flight_while_waited,
    overlapping_runs,
)


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


def keyed(received: float, answered: float, run_id: str, attempt: int = 1) -> Call:
    made = call(received, answered)
    made.headers.update({"idempotency-key": run_id, "x-duetime-attempt": str(attempt)})
    return made


def test_a_cancelled_runs_call_no_longer_counts_against_the_cap_once_cancelled() -> None:
    cancelled = keyed(0.0, 5.0, "job@1")  # cancelled at 1 s; the target still answered at 5 s
    others = [keyed(2.0, 3.0, "job@2"), keyed(2.5, 3.5, "job@3")]
    assert max_in_flight_while_waited([cancelled, *others], call_timeout) == {"team-a": 3}
    assert max_in_flight_while_waited([cancelled, *others], call_timeout, {"job@1": 1.0}) == {"team-a": 2}


def test_a_cancelled_run_must_stay_cancelled_and_never_be_called_again() -> None:
    cancels = {"job@1": Cancel(10.0, RunStatus.RUNNING, 1)}
    runs = {"job@1": SimpleNamespace(status=RunStatus.CANCELLED)}
    within_its_lease = [keyed(9.0, 12.0, "job@1"), keyed(11.0, 12.0, "job@1")]
    assert cancel_violations(runs, within_its_lease, cancels) == []  # type: ignore[arg-type]
    later_attempt = [keyed(11.0, 12.0, "job@1", attempt=2)]
    past_a_lease = [keyed(10.0 + LEASE_S + 1, 17.0, "job@1")]
    assert cancel_violations(runs, later_attempt, cancels)  # type: ignore[arg-type]
    assert cancel_violations(runs, past_a_lease, cancels)  # type: ignore[arg-type]
    recorded = {"job@1": SimpleNamespace(status=RunStatus.SUCCEEDED)}
    assert cancel_violations(recorded, [], cancels)  # type: ignore[arg-type]


def test_calls_of_two_runs_of_an_overlap_job_at_once_are_found() -> None:
    first, second = keyed(0.0, 2.0, "job@1"), keyed(1.0, 3.0, "job@2")
    assert overlapping_runs([first, second], {"job"}, call_timeout) == [("job@1", "job@2")]
    assert overlapping_runs([first, second], {"other"}, call_timeout) == []  # an allow job may overlap
    retried = keyed(1.0, 3.0, "job@1", attempt=2)  # the same run again (a lapsed lease): not an overlap
    assert overlapping_runs([first, retried, keyed(3.0, 4.0, "job@2")], {"job"}, call_timeout) == []
    assert overlapping_runs([first, second], {"job"}, call_timeout, {"job@1": 0.5}) == []  # given up


def test_an_attempt_given_up_for_a_later_one_stops_counting_when_the_later_one_is_called() -> None:
    stalled = keyed(0.0, 62.0, "job@1")  # its worker paused past its lease; the target answered at 62 s
    retried = keyed(10.0, 20.0, "job@1", attempt=2)  # the reaper's next attempt, done at 20 s
    after = keyed(25.0, 40.0, "job@2")  # the job's next run: the first one had finished (attempt 2)
    assert overlapping_runs([stalled, retried, after], {"job"}, call_timeout) == []
    assert overlapping_runs([stalled, after], {"job"}, call_timeout) == [("job@1", "job@2")]


def test_a_stalled_attempt_stops_counting_against_the_cap_when_its_run_is_called_again() -> None:
    stalled = call(0.0, 62.0, "sleep=62&overlap=skip")  # a 70 s timeout; its worker paused past its lease
    stalled.headers.update({"idempotency-key": "job@1", "x-duetime-attempt": "1"})
    assert call_timeout(stalled) == 70.0
    again = keyed(61.0, 63.0, "job@1", attempt=2)  # the reaper gave the run on: its lease and slot lapsed
    other = keyed(61.5, 62.5, "job@2")
    assert max_in_flight_while_waited([stalled, again, other], call_timeout) == {"team-a": 2}
    never_retried = keyed(61.0, 63.0, "job@3")  # another run: the stalled call still counts against it
    assert max_in_flight_while_waited([stalled, never_retried, other], call_timeout) == {"team-a": 3}
