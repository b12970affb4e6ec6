"""Each team's API rate (``duetime.domain.rate_limit``): a burst at once, then the rate; the refusal says how
long to wait; refused requests change nothing. The rule on a manual clock, and the in-memory limiter."""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime, timedelta

import pytest

from duetime.domain.clock import ManualClock
from duetime.domain.models import Team
from duetime.domain.rate_limit import MICROS_PER_SECOND, Decision, InMemoryRateLimiter, RateRule, micros

START = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)


def team(rate: float = 20.0, burst: int = 40, team_id: str = "alpha") -> Team:
    return Team(team_id=team_id, api_rate_per_second=rate, api_burst=burst)


def allowed(limiter: InMemoryRateLimiter, who: Team, clock: ManualClock, requests: int) -> int:
    return sum(limiter.take(who, clock.now()).allowed for _ in range(requests))


def test_an_idle_team_gets_its_burst_at_once_then_one_request_per_interval() -> None:
    limiter, clock, alpha = InMemoryRateLimiter(), ManualClock(START), team(rate=20, burst=40)
    assert allowed(limiter, alpha, clock, 40) == 40
    assert limiter.take(alpha, clock.now()) == Decision(False, 1)
    clock.advance(0.05)  # one interval: one more request
    assert allowed(limiter, alpha, clock, 5) == 1
    clock.advance(1)  # a second: twenty more
    assert allowed(limiter, alpha, clock, 100) == 20
    for _ in range(200):  # steady at the rate: every request one interval after the last is allowed
        clock.advance(0.05)
        assert limiter.take(alpha, clock.now()).allowed


def test_a_team_that_stops_gets_its_whole_burst_back_after_burst_intervals() -> None:
    limiter, clock, alpha = InMemoryRateLimiter(), ManualClock(START), team(rate=20, burst=40)
    assert allowed(limiter, alpha, clock, 100) == 40
    clock.advance(1.95)
    assert allowed(limiter, alpha, clock, 100) == 39
    clock.advance(2)
    assert allowed(limiter, alpha, clock, 100) == 40


def test_refused_requests_change_nothing() -> None:
    limiter, clock, alpha = InMemoryRateLimiter(), ManualClock(START), team(rate=2, burst=3)
    assert allowed(limiter, alpha, clock, 3) == 3
    assert allowed(limiter, alpha, clock, 1000) == 0  # hammering while refused
    clock.advance(0.5)  # one interval after the burst, as if nobody had hammered
    assert allowed(limiter, alpha, clock, 10) == 1


@pytest.mark.parametrize(
    ("rate", "burst", "waits", "retry_after"),
    [
        (20, 40, [0], 1),  # 50 ms to wait: whole seconds, at least one
        (0.5, 1, [0], 2),  # one request every two seconds
        (0.5, 1, [0.5], 2),  # 1.5 s left: rounded up
        (0.5, 1, [1.7], 1),  # 0.3 s left
        (0.1, 3, [0], 10),  # the fourth request of a burst of three, at one every ten seconds
        (0.1, 3, [4], 6),
        (0.1, 3, [4, 5.5], 1),  # 0.5 s left
    ],
)
def test_a_refusal_says_how_many_whole_seconds_to_wait(
    rate: float, burst: int, waits: list[float], retry_after: int
) -> None:
    limiter, clock, alpha = InMemoryRateLimiter(), ManualClock(START), team(rate, burst)
    assert allowed(limiter, alpha, clock, burst) == burst
    for wait in waits:
        clock.advance(wait)
        decision = limiter.take(alpha, clock.now())
    assert decision == Decision(False, retry_after)


@pytest.mark.parametrize(("rate", "burst"), [(20, 40), (0.5, 1), (0.1, 3), (3, 2), (7.7, 5)])
def test_waiting_exactly_the_exact_wait_is_enough(rate: float, burst: int) -> None:
    """Retry-After rounds the wait up; the exact wait is what the rule computes before rounding."""
    rule = RateRule.of(team(rate, burst))
    tat = None
    now = micros(START)
    for _ in range(burst):
        decision, tat = rule.take(tat, now)
        assert decision.allowed
    assert tat is not None
    wait_us = tat - rule.last_allowed_tat(now)
    assert not rule.take(tat, now + wait_us - 1)[0].allowed
    assert rule.take(tat, now + wait_us)[0].allowed
    assert rule.refused(tat, now).retry_after_seconds == max(1, -(-wait_us // MICROS_PER_SECOND))


@pytest.mark.parametrize(("rate", "burst"), [(20, 40), (3, 2), (0.3, 4), (7.7, 1), (1000, 10)])
def test_in_any_window_a_team_gets_at_most_burst_plus_rate_times_the_window(rate: float, burst: int) -> None:
    limiter, clock, alpha = InMemoryRateLimiter(), ManualClock(START), team(rate, burst)
    shuffle = random.Random(20261201)
    times: list[datetime] = []
    for _ in range(3000):  # bursts, pauses and trickles, at random
        clock.advance(shuffle.choice([0, 0, 0, 0.001, 0.01, 0.2, 1 / rate, 3 / rate]))
        if limiter.take(alpha, clock.now()).allowed:
            times.append(clock.now())
    assert len(times) > burst
    for first in range(len(times)):
        for last in range(first, min(len(times), first + burst + int(rate * 60) + 2)):
            window = (times[last] - times[first]).total_seconds()
            assert last - first + 1 <= burst + rate * window + 1e-9, (first, last, window)


def test_the_interval_is_rounded_up_so_rounding_never_lets_a_team_past_its_rate() -> None:
    for rate in (3, 0.3, 7.7, 0.1, 20, 9999.5):
        interval = RateRule.of(team(rate)).interval_us
        assert interval >= MICROS_PER_SECOND / rate > interval - 1


def test_teams_have_buckets_of_their_own() -> None:
    limiter, clock = InMemoryRateLimiter(), ManualClock(START)
    alpha, beta = team(burst=5, team_id="alpha"), team(burst=3, team_id="beta")
    assert allowed(limiter, alpha, clock, 50) == 5
    assert allowed(limiter, beta, clock, 50) == 3


def test_the_in_memory_limiter_allows_exactly_the_burst_to_many_threads_at_once() -> None:
    limiter, alpha = InMemoryRateLimiter(), team(rate=1, burst=25)
    now = START + timedelta(hours=1)
    counts: list[int] = []
    start = threading.Barrier(16)

    def hammer() -> None:
        start.wait()
        counts.append(sum(limiter.take(alpha, now).allowed for _ in range(100)))

    threads = [threading.Thread(target=hammer) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(counts) == 25
