"""Claims paced to what the tables take: a claimer's claims a second, held under its share of the tables'
write capacity.

A busy minute's claimers (a group's holder and its helpers, ``duetime.scheduling.fan_out``) together claim
faster than DynamoDB's tables take the writes unless paced: each claim writes about a unit to the jobs table,
two to its due index, one to the runs table and its reap index, and one to the control table (the team's slot
groups), and a new on-demand table takes 4,000 units a second until it is warmed (the stack pre-warms
what the seed's midnight asks: ``warm_write_units``). Past that, writes are throttled and retried by the
SDK: the claims land late anyway, and each retry is a request more. So a claimer holds its claims to
``claims_per_second``: a bucket of a tenth of a second's claims, refilled on the injected clock, that the
poller loop takes from before each claim call (a preloaded fire or a sweep) and waits on when it is empty;
the rates are set at ``PACE_HEADROOM`` (90%) of what the tables take, so a second's claims stay under it.

The stack gives each group its share of the tables' capacity (``DUETIME_CLAIMS_PER_SECOND``, the group's
claims a second); a holder keeps the share of its own rows and gives each helper the share of its slice's
(``HelperAssignment.claims_per_second``), so that all of a minute's claimers end together.
"""

from __future__ import annotations

from datetime import datetime, timedelta

# The bucket holds this much of a second's claims: in any one second a claimer makes at most 1.1 times its
# rate, so the rates are set at PACE_HEADROOM of what the tables take.
BURST_SECONDS = 0.1
PACE_HEADROOM = 0.9


class ClaimPace:
    """A bucket of ``BURST_SECONDS`` of ``claims_per_second`` claims (at least one), refilled as time
    passes."""

    def __init__(self, claims_per_second: float, now: datetime) -> None:
        if claims_per_second <= 0:
            raise ValueError(f"claims_per_second must be more than 0, not {claims_per_second}")
        self.rate = claims_per_second
        self._tokens = self._cap()
        self._at = now

    def _cap(self) -> float:
        return max(1.0, self.rate * BURST_SECONDS)

    def allowance(self, now: datetime) -> int:
        """The claims that may be made at ``now`` (whole claims; 0: wait until ``next_claim_at``)."""
        self._refill(now)
        return int(self._tokens + 1e-9)

    def spend(self, claims: int, now: datetime) -> None:
        """``claims`` were made at ``now`` (a call may make fewer than it was allowed; never more)."""
        self._refill(now)
        self._tokens -= claims

    def next_claim_at(self, now: datetime) -> datetime:
        """When the bucket next holds a whole claim."""
        self._refill(now)
        if self._tokens + 1e-9 >= 1:
            return now
        # At least a millisecond on: a clock's instants are microseconds, and a wait rounded to none would
        # spin the loop without refilling the bucket.
        return now + max(timedelta(milliseconds=1), timedelta(seconds=(1 - self._tokens) / self.rate))

    def _refill(self, now: datetime) -> None:
        if now > self._at:
            elapsed = (now - self._at).total_seconds()
            self._tokens = min(self._cap(), self._tokens + elapsed * self.rate)
            self._at = now
