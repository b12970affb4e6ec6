"""The one retry helper (``adapters/retrying.py``): exponential backoff with full jitter, capped, a bounded
number of attempts, the sleep and the random source injected (nothing here waits)."""

from __future__ import annotations

import random

import pytest
from tenacity import RetryError

from duetime.adapters.retrying import UNPROCESSED, Backoff, resend, retrying


class Highest(random.Random):
    """A random source that always draws the top of the range: each wait is its ceiling."""

    def uniform(self, a: float, b: float) -> float:
        return b


class Flaky:
    """Raises ``error`` on its first ``failures`` calls, then returns ``"done"``."""

    def __init__(self, failures: int, error: type[Exception] = TimeoutError) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error(f"failure {self.calls}")
        return "done"


def test_the_ceiling_doubles_from_the_base_up_to_the_cap() -> None:
    backoff = Backoff(attempts=10, base_seconds=0.1, cap_seconds=1.0)
    assert [backoff.ceiling(n) for n in range(1, 7)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert backoff.ceiling(10_000) == 1.0  # an unbounded loop's ceiling stays finite


def test_each_wait_is_full_jitter_between_zero_and_its_ceiling() -> None:
    backoff = Backoff(attempts=None, base_seconds=0.1, cap_seconds=0.5)
    rng = random.Random(7)
    for retry in range(1, 12):
        waits = [backoff.delay(retry, rng) for _ in range(200)]
        assert all(0 <= wait <= backoff.ceiling(retry) for wait in waits)
        assert min(waits) < backoff.ceiling(retry) / 10  # full jitter reaches down to 0, not half
    assert max(backoff.delay(8, rng) for _ in range(200)) > 0.45  # ... and up to the cap


def test_a_call_that_fails_then_succeeds_is_retried_after_the_capped_waits() -> None:
    pauses: list[float] = []
    flaky = Flaky(failures=4)
    backoff = Backoff(attempts=6, base_seconds=0.05, cap_seconds=0.3)
    answer = retrying(backoff, retry_on=TimeoutError, sleep=pauses.append, rng=Highest())(flaky)
    assert answer == "done"
    assert flaky.calls == 5
    assert pauses == [0.05, 0.1, 0.2, 0.3]  # each the ceiling (Highest), the last one capped


def test_the_last_error_is_raised_itself_once_the_attempts_are_spent() -> None:
    pauses: list[float] = []
    flaky = Flaky(failures=10)
    with pytest.raises(TimeoutError, match="failure 3") as raised:
        retrying(Backoff(3, 0.01, 1.0), retry_on=TimeoutError, sleep=pauses.append)(flaky)
    assert not isinstance(raised.value, RetryError)
    assert flaky.calls == 3 and len(pauses) == 2


def test_an_error_not_named_is_raised_at_once() -> None:
    pauses: list[float] = []
    flaky = Flaky(failures=1, error=ValueError)
    with pytest.raises(ValueError):
        retrying(Backoff(5, 0.01, 1.0), retry_on=TimeoutError, sleep=pauses.append)(flaky)
    assert flaky.calls == 1 and pauses == []


def test_a_value_retry_if_accepts_is_tried_again_and_the_last_returned_when_the_attempts_run_out() -> None:
    answers = iter(["busy", "busy", "busy", "busy"])
    pauses: list[float] = []
    last = retrying(Backoff(3, 0.01, 1.0), retry_if=lambda a: a == "busy", sleep=pauses.append)(
        lambda: next(answers)
    )
    assert last == "busy" and len(pauses) == 2
    assert next(answers) == "busy"  # the fourth was never asked for


def test_resend_sends_what_is_left_until_nothing_is() -> None:
    sent: list[list[int]] = []
    pauses: list[float] = []

    def send(batch: list[int]) -> list[int]:
        sent.append(batch)
        return batch[1:]  # one goes each time

    left = resend(send, [1, 2, 3], Backoff(None, 0.05, 1.0), sleep=pauses.append, rng=Highest())
    assert left == []
    assert sent == [[1, 2, 3], [2, 3], [3]]
    assert pauses == [0.05, 0.1]


def test_resend_gives_back_what_was_left_when_the_attempts_run_out() -> None:
    sent: list[list[int]] = []
    pauses: list[float] = []

    def send(batch: list[int]) -> list[int]:
        sent.append(batch)
        return batch  # nothing ever goes

    left = resend(send, [1, 2], Backoff(4, 0.05, 0.1), sleep=pauses.append, rng=Highest())
    assert left == [1, 2]
    assert len(sent) == 4
    assert pauses == [0.05, 0.1, 0.1]


def test_resend_makes_one_call_and_no_wait_when_all_goes_at_once() -> None:
    pauses: list[float] = []
    assert resend(lambda batch: {}, {"t": ["k"]}, UNPROCESSED, sleep=pauses.append) == {}
    assert pauses == []


def test_resend_raises_an_error_of_send_at_once() -> None:
    calls: list[int] = []

    def send(batch: list[int]) -> list[int]:
        calls.append(1)
        raise ConnectionResetError("reset")

    with pytest.raises(ConnectionResetError):
        resend(send, [1], Backoff(5, 0.01, 1.0), sleep=lambda _: None)
    assert len(calls) == 1


def test_a_seeded_random_source_gives_the_same_waits() -> None:
    def waits(seed: int) -> list[float]:
        pauses: list[float] = []
        resend(lambda batch: batch, [1], Backoff(6, 0.05, 1.0), sleep=pauses.append, rng=random.Random(seed))
        return pauses

    assert waits(3) == waits(3) != waits(4)
    assert len(waits(3)) == 5


def test_unprocessed_items_back_off_from_50_ms_up_to_2_s_and_never_give_up() -> None:
    assert UNPROCESSED.attempts is None
    assert UNPROCESSED.ceiling(1) == 0.05 and UNPROCESSED.ceiling(20) == 2.0
