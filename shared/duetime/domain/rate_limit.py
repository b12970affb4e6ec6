"""Each team's API rate: how many requests a team may make, decided per request (pure; clock injected).

A team may make ``api_burst`` requests at once and ``api_rate_per_second`` a second after that: in any window
of E seconds it gets at most ``burst + rate * E`` requests, whichever API Lambdas serve them. Over the rate, a
request is refused with 429 and ``Retry-After`` (``duetime.api.app``), and nothing is written.

The rule is GCRA, the generic cell rate algorithm: a token bucket kept as one instant, the team's *theoretical
arrival time* (TAT), the instant at which its requests so far would have ended had they come exactly one
*interval* (1 / rate) apart. A request at ``now`` finds the bucket

* **idle** when TAT is missing or not after ``now`` (a whole burst is free): allowed, TAT = now + interval;
* **within its burst** when ``now < TAT <= now + (burst - 1) * interval``: allowed, TAT += interval;
* **full** otherwise: refused, TAT unchanged; it would be allowed ``TAT - (now + (burst - 1) * interval)``
  later, which ``Retry-After`` gives rounded up to whole seconds (at least 1).

TAT only ever moves forward, so for one request (one ``now``) the three states come in that order and each
is left at most once: that is why the DynamoDB adapter (``adapters/dynamodb/rate_limits.py``) decides with
one conditional write per state and never loops. Refused requests change nothing, so a client that keeps
hammering while refused is not punished beyond the rate, and one that stops gets its burst back after
``burst * interval``.

Instants are whole microseconds since the epoch (exact arithmetic, nothing drifts), and the interval is
rounded up, so rounding never lets a team past its rate. ``now`` is the store's clock: every API Lambda
compares it with a TAT another one wrote.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from fractions import Fraction
from typing import Protocol

from duetime.domain.models import Team

MICROS_PER_SECOND = 1_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def micros(instant: datetime) -> int:
    """An aware instant as whole microseconds since the epoch."""
    return (instant - _EPOCH) // _MICROSECOND


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after_seconds: int = 0  # refused: whole seconds until a request would be allowed, at least 1


ALLOWED = Decision(True)


class Bucket(Enum):
    IDLE = "idle"
    WITHIN_BURST = "within_burst"
    FULL = "full"


@dataclass(frozen=True)
class RateRule:
    """One team's rate as GCRA sees it: the interval between requests and the burst."""

    interval_us: int
    burst: int

    @classmethod
    def of(cls, team: Team) -> RateRule:
        interval = math.ceil(Fraction(MICROS_PER_SECOND) / Fraction(team.api_rate_per_second))
        return cls(max(1, interval), team.api_burst)

    def last_allowed_tat(self, now_us: int) -> int:
        """The latest TAT at which a request at ``now_us`` is still allowed."""
        return now_us + (self.burst - 1) * self.interval_us

    def bucket(self, tat_us: int | None, now_us: int) -> Bucket:
        if tat_us is None or tat_us <= now_us:
            return Bucket.IDLE
        if tat_us <= self.last_allowed_tat(now_us):
            return Bucket.WITHIN_BURST
        return Bucket.FULL

    def take(self, tat_us: int | None, now_us: int) -> tuple[Decision, int | None]:
        """A request at ``now_us`` against TAT ``tat_us``: the decision and the new TAT (None: unchanged)."""
        state = self.bucket(tat_us, now_us)
        if state is Bucket.IDLE:
            return ALLOWED, now_us + self.interval_us
        assert tat_us is not None
        if state is Bucket.WITHIN_BURST:
            return ALLOWED, tat_us + self.interval_us
        return self.refused(tat_us, now_us), None

    def refused(self, tat_us: int, now_us: int) -> Decision:
        """The refusal of a request at ``now_us`` by a full bucket, with its whole-second wait."""
        wait_us = tat_us - self.last_allowed_tat(now_us)
        return Decision(False, max(1, -(-wait_us // MICROS_PER_SECOND)))

    def expires_at_us(self, now_us: int) -> int:
        """An instant after which the bucket is idle whatever was taken at ``now_us`` (TAT never passes
        ``now + burst * interval``): a stored bucket may be dropped after it."""
        return now_us + self.burst * self.interval_us


class ApiRateLimiter(Protocol):
    def take(self, team: Team, now: datetime) -> Decision:
        """Count one API request of ``team`` at ``now`` (the store's clock) against its rate and burst, or
        refuse it. A refused request changes nothing. Safe to call from many processes and threads at once:
        together they never allow more than ``burst + rate * elapsed``."""
        ...


class InMemoryRateLimiter:
    """``ApiRateLimiter`` in this process's memory, for tests (thread-safe)."""

    def __init__(self) -> None:
        self._tats: dict[str, int] = {}
        self._lock = threading.Lock()

    def take(self, team: Team, now: datetime) -> Decision:
        rule = RateRule.of(team)
        with self._lock:
            decision, tat = rule.take(self._tats.get(team.team_id), micros(now))
            if tat is not None:
                self._tats[team.team_id] = tat
        return decision
