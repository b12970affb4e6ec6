"""Each team's budget of runs made on request: how many runs triggers and backfills may create (pure; clock
injected).

A trigger creates one run and a backfill up to 1,000, into the run queue every team shares; the API rate
(``duetime.domain.rate_limit``) counts requests, not runs, so 20 backfills a second would be 20,000 runs. So a
team may create at most ``runs_per_minute`` runs (1,000 by default) in each minute of the store's clock,
triggers and backfills together; the schedule's own runs do not count (they are bounded by the team's jobs).

A request asks for all its runs at once, before it writes any: the budget either pays for them all or
refuses them all (429 ``rate_limited`` naming ``runs_per_minute``, ``Retry-After`` the wait until the next
minute), so nothing is ever half created. Runs asked for but not created (a backfilled time that already has
a run, a trigger that lost its id's race) are given back while the minute lasts, so retrying a backfill that
created nothing costs nothing.

The rule is a fixed window: a team's budget holds the minute it counts (whole minutes since the epoch) and
the runs counted in it. A spend at ``now`` finds it

* **stale** when it counts no minute or an earlier one: the minute starts over with this spend;
* **with room** when it counts this minute or a later one (another API Lambda's clock a little ahead: the
  spend is counted there, which is never more generous) and ``runs + asked <= runs_per_minute``: counted;
* **spent** otherwise: refused, nothing changed.

The minute only moves forward, so a spend passes each state at most once: the DynamoDB adapter
(``adapters/dynamodb/run_budgets.py``) decides with conditional writes and no loop. In any minute a team
creates at most ``runs_per_minute`` runs on request, and in any 60 seconds at most twice that (the end of one
minute and the start of the next), however many API Lambdas serve it.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from duetime.domain.models import Team
from duetime.domain.rate_limit import MICROS_PER_SECOND, micros

MICROS_PER_MINUTE = 60 * MICROS_PER_SECOND


def minute_of(now: datetime) -> int:
    """The minute ``now`` is in: whole minutes since the epoch."""
    return micros(now) // MICROS_PER_MINUTE


@dataclass(frozen=True)
class Spend:
    """A spend's outcome: ``allowed``, the ``minute`` it was counted in (allowed) or would have been, the
    runs ``left`` in that minute after it, and, refused, whole seconds until that minute is over."""

    allowed: bool
    minute: int
    left: int
    retry_after_seconds: int = 0


@dataclass(frozen=True)
class BudgetRule:
    """One team's budget as the fixed window sees it."""

    runs_per_minute: int

    @classmethod
    def of(cls, team: Team) -> BudgetRule:
        return cls(team.runs_per_minute)

    def most_held(self, asked: int) -> int:
        """The most runs a minute may already hold for a spend of ``asked`` runs to fit."""
        return self.runs_per_minute - asked

    def spend(self, held: tuple[int, int] | None, asked: int, now: datetime) -> tuple[Spend, tuple[int, int]]:
        """A spend of ``asked`` runs at ``now`` against the budget ``held`` ((minute, runs), None: none yet):
        its outcome and the budget after it (unchanged when refused)."""
        minute = minute_of(now)
        if held is None or held[0] < minute:  # stale: the minute starts over
            held = (minute, 0)
        counted, runs = held
        if runs <= self.most_held(asked):
            return Spend(True, counted, self.runs_per_minute - runs - asked), (counted, runs + asked)
        return self.refused(counted, runs, now), held

    def refused(self, minute: int, runs: int, now: datetime) -> Spend:
        """The refusal by a budget that counts ``runs`` in ``minute``: the wait until that minute is over."""
        wait_us = (minute + 1) * MICROS_PER_MINUTE - micros(now)
        retry = max(1, math.ceil(wait_us / MICROS_PER_SECOND))
        return Spend(False, minute, max(0, self.runs_per_minute - runs), retry)


class RunBudget(Protocol):
    def spend(self, team: Team, runs: int, now: datetime) -> Spend:
        """Count ``runs`` runs of ``team`` about to be created at ``now`` (the store's clock) against its
        ``runs_per_minute``, all of them or none (refused: nothing changes). Safe to call from many processes
        and threads at once: together they never count more than ``runs_per_minute`` in a minute."""
        ...

    def give_back(self, team: Team, spent: Spend, runs: int) -> None:
        """Return ``runs`` of those ``spent`` counted that were not created after all; nothing once the minute
        they were counted in is over (a lost race is normal: the next minute starts from zero anyway)."""
        ...


class InMemoryRunBudget:
    """``RunBudget`` in this process's memory, for tests and fakes (thread-safe)."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()

    def spend(self, team: Team, runs: int, now: datetime) -> Spend:
        with self._lock:
            spent, held = BudgetRule.of(team).spend(self._held.get(team.team_id), runs, now)
            self._held[team.team_id] = held
        return spent

    def give_back(self, team: Team, spent: Spend, runs: int) -> None:
        with self._lock:
            minute, held = self._held.get(team.team_id, (spent.minute, 0))
            if minute == spent.minute and held >= runs:
                self._held[team.team_id] = (minute, held - runs)
