"""Each team's API rate in the control table: ``ApiRateLimiter`` on DynamoDB.

One item per team, ``("ratelimit#<team>", "ratelimit")``, holding ``tat``: the team's theoretical arrival time
(``duetime.domain.rate_limit``), whole microseconds since the epoch, and a ``ttl`` that lets DynamoDB drop the
item a day after the bucket is idle again (a missing item is an idle bucket, so nothing changes when it goes).

A request is decided by a conditional UpdateItem, with no read before it: the write for the state the bucket
is expected in (condition ``API_RATE_IDLE`` or ``API_RATE_WITHIN_BURST``). When the condition fails,
DynamoDB hands back the item (``ReturnValuesOnConditionCheckFailure``), which tells the state it is really
in: full, and the request is refused with that TAT's wait, or started by another request, and the second
write (``API_RATE_WITHIN_BURST``) decides. TAT only moves forward, so that second write fails only on a full
bucket: at most two writes per request, no retry loop, and concurrent API Lambdas never allow together more
than the rule does. The within-burst write adds the interval in place (``tat = tat + :interval``), so
concurrent requests inside a burst do not race each other at all.

Which write goes first is guessed from the last TAT this process saw for the team: the real TAT is at least
that, so if it is still ahead of now the bucket is not idle. A Lambda environment serving a burst thus makes
one write per request, and so does one serving a team's occasional requests.
"""

from __future__ import annotations

import math
from datetime import datetime

from duetime.adapters.dynamodb import conditions as c
from duetime.adapters.dynamodb.codec import Item, number_attribute
from duetime.adapters.dynamodb.team_counters import TeamCounter, counter_key
from duetime.domain.models import Team
from duetime.domain.rate_limit import ALLOWED, MICROS_PER_SECOND, Bucket, Decision, RateRule, micros

BUCKET_TTL_SECONDS = 86_400  # how long an idle bucket's item is kept (DynamoDB deletes it some time after)


def rate_limit_key(team_id: str) -> Item:
    return counter_key(DynamoRateLimiter.kind, team_id)


class DynamoRateLimiter(TeamCounter):
    """Implements ``duetime.domain.rate_limit.ApiRateLimiter``: a team's bucket is an item in the control
    table (``_seen``: team -> the latest TAT this process wrote or was shown, a guess)."""

    kind = "ratelimit"

    def take(self, team: Team, now: datetime) -> Decision:
        rule = RateRule.of(team)
        now_us = micros(now)
        seen = self._seen.get(team.team_id)
        state = Bucket.WITHIN_BURST if seen is not None and seen > now_us else Bucket.IDLE
        for _ in range(3):  # two in fact: TAT only moves forward (the third would need the item deleted)
            written, tat = self._write(team.team_id, rule, state, now_us)
            if tat is not None:
                self._seen[team.team_id] = tat
            if written:
                return ALLOWED
            state = rule.bucket(tat, now_us)
            if state is Bucket.FULL:
                assert tat is not None
                return rule.refused(tat, now_us)
        return Decision(False, 1)  # pragma: no cover - the bucket went back and forth: refuse, to be safe

    def _write(self, team_id: str, rule: RateRule, state: Bucket, now_us: int) -> tuple[bool, int | None]:
        """The write for ``state``: (True, the new TAT) when its condition held, else (False, the TAT the
        item holds, None for no item)."""
        ttl = math.ceil(rule.expires_at_us(now_us) / MICROS_PER_SECOND) + BUCKET_TTL_SECONDS
        values: Item = {":now": number_attribute(now_us), ":ttl": number_attribute(ttl)}
        if state is Bucket.IDLE:
            update, condition = "SET tat = :next, #ttl = :ttl", c.API_RATE_IDLE
            values[":next"] = number_attribute(now_us + rule.interval_us)
        else:
            update, condition = "SET tat = tat + :interval, #ttl = :ttl", c.API_RATE_WITHIN_BURST
            values[":interval"] = number_attribute(rule.interval_us)
            values[":last_allowed"] = number_attribute(rule.last_allowed_tat(now_us))
        written, item = self.update(team_id, update, condition, {"#ttl": "ttl"}, values)
        return written, int(item["tat"]["N"]) if "tat" in item else None
