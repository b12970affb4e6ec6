"""Each team's budget of runs made on request in the control table: ``RunBudget`` on DynamoDB.

One item per team, ``("runbudget#<team>", "runbudget")``, holding ``minute`` (the minute it counts, whole
minutes since the epoch on the store's clock, ``duetime.domain.run_budget``), ``runs`` (the runs triggers and
backfills created in it) and a ``ttl`` that lets DynamoDB drop it a day after that minute (a missing item is
an empty budget, so nothing changes when it goes).

A spend is decided by a conditional UpdateItem, with no read before it: the write for the state the budget is
expected in, ``RUN_BUDGET_STALE`` (start the minute over with this spend's runs) or ``RUN_BUDGET_HAS_ROOM``
(add them in place). When the condition fails, DynamoDB hands back the item
(``ReturnValuesOnConditionCheckFailure``), which tells the state it is really in: spent, and the spend is
refused, or the other state, whose write then decides. The minute only moves forward, so at most three
writes (a budget guessed current that was stale, and another Lambda starting the minute meanwhile), no retry
loop, and concurrent API Lambdas never count more than ``runs_per_minute`` into one minute between them.

Which write goes first is guessed from the last minute this process saw for the team: a team's first spend
of a minute starts it, its later ones add to it.
"""

from __future__ import annotations

from datetime import datetime

from duetime.adapters.dynamodb import conditions as c
from duetime.adapters.dynamodb.codec import Item, number_attribute
from duetime.adapters.dynamodb.team_counters import TeamCounter, counter_key
from duetime.domain.models import Team
from duetime.domain.run_budget import BudgetRule, Spend, minute_of

BUDGET_TTL_SECONDS = 86_400  # how long a budget's item is kept after its minute (DynamoDB deletes it later)
NAMES = {"#minute": "minute", "#runs": "runs"}


def run_budget_key(team_id: str) -> Item:
    return counter_key(DynamoRunBudget.kind, team_id)


class DynamoRunBudget(TeamCounter):
    """Implements ``duetime.domain.run_budget.RunBudget``: a team's budget is an item in the control table
    (``_seen``: team -> the latest minute this process counted in or was shown, a guess)."""

    kind = "runbudget"

    def spend(self, team: Team, runs: int, now: datetime) -> Spend:
        rule = BudgetRule.of(team)
        minute = minute_of(now)
        if runs > rule.runs_per_minute:  # never fits: refused without a write (a stale write would set it)
            return rule.refused(minute, 0, now)
        stale = self._seen.get(team.team_id, minute - 1) < minute
        for _ in range(3):  # the minute only moves forward: each state is left at most once
            written, held = self._write(team.team_id, rule, stale, minute, runs)
            if held is not None:
                self._seen[team.team_id] = held[0]
            if written:
                assert held is not None
                return Spend(True, held[0], rule.runs_per_minute - held[1])
            stale = held is None or held[0] < minute
            if not stale:
                assert held is not None
                if held[1] > rule.most_held(runs):
                    return rule.refused(held[0], held[1], now)
        return rule.refused(minute, rule.runs_per_minute, now)  # pragma: no cover - refuse, to be safe

    def give_back(self, team: Team, spent: Spend, runs: int) -> None:
        if runs > 0:  # RUN_BUDGET_STILL_IN failing is a lost race: that minute is over, nothing to give back
            values = {":minute": number_attribute(spent.minute), ":runs": number_attribute(runs)}
            self.update(team.team_id, "SET #runs = #runs - :runs", c.RUN_BUDGET_STILL_IN, NAMES, values)

    def _write(
        self, team_id: str, rule: BudgetRule, stale: bool, minute: int, runs: int
    ) -> tuple[bool, tuple[int, int] | None]:
        """The write for a ``stale`` budget (else one with room): (True, (minute, runs) after it) when its
        condition held, else (False, the (minute, runs) the item holds, None for no item)."""
        values: Item = {":minute": number_attribute(minute), ":runs": number_attribute(runs)}
        if stale:
            ttl = (minute + 1) * 60 + BUDGET_TTL_SECONDS
            update, condition = "SET #minute = :minute, #runs = :runs, #ttl = :ttl", c.RUN_BUDGET_STALE
            values[":ttl"] = number_attribute(ttl)
            names = {**NAMES, "#ttl": "ttl"}
        else:
            update, condition = "SET #runs = #runs + :runs", c.RUN_BUDGET_HAS_ROOM
            values[":most_held"] = number_attribute(rule.most_held(runs))
            names = NAMES
        written, item = self.update(team_id, update, condition, names, values)
        return written, (int(item["minute"]["N"]), int(item["runs"]["N"])) if "minute" in item else None
