"""Teams as the poller and the worker see them: re-read at most once a minute (``ttl``).

So a change an operator makes (limits, a disabled team, a rotated signing secret) reaches every poller and
worker within ``ttl`` of being written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from duetime.domain.clock import Clock
from duetime.domain.models import Team
from duetime.ports import TeamStore

TEAM_CACHE_TTL = timedelta(seconds=60)


@dataclass
class TeamCache:
    """Teams change rarely; a worker re-reads one at most once a minute."""

    store: TeamStore
    clock: Clock
    ttl: timedelta = TEAM_CACHE_TTL
    _entries: dict[str, tuple[datetime, Team]] = field(default_factory=dict)

    def get(self, team_id: str) -> Team:
        now = self.clock.now()
        cached = self._entries.get(team_id)
        if cached and now - cached[0] < self.ttl:
            return cached[1]
        team = self.store.get_team(team_id) or Team(team_id=team_id)
        self._entries[team_id] = (now, team)
        return team

    def active(self, team_id: str) -> bool:
        """Whether the team's jobs may be claimed: not disabled (an unknown team counts as active; its
        jobs' runs fail on their own)."""
        return not self.get(team_id).disabled
