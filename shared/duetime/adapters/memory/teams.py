"""The twin's teams and their concurrency slots (``TeamStore``).

A slot is ``(team, number)`` with a holder and an expiry, kept once made (freeing it removes the holder,
as the DynamoDB store's slot items stay). A slot may be taken when it has no holder, its holder's lease
passed (its expiry ``< now``, to the second) or the same run holds it (SLOT_FREE); only its holder
extends or frees it (SLOT_HELD). Unlike ``DynamoStore``, which guesses a random slot and then searches a
few groups of 25, the twin searches every slot below the cap, lowest first: ``None`` means the team is at
its cap, for any cap (the contract allows the DynamoDB store to say so a little early for caps over 100).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from duetime.adapters.memory.stored import Tables, distinct, to_second
from duetime.domain.models import Team


@dataclass(frozen=True)
class _Slot:
    holder: str | None
    expires_at: datetime | None


class MemoryTeams(Tables):
    """``TeamStore`` in memory (mixed into ``MemoryStore``)."""

    _teams: dict[str, Team]
    _slots: dict[tuple[str, int], _Slot]

    def get_team(self, team_id: str) -> Team | None:
        with self.lock:
            team = self._teams.get(team_id)
            return team.model_copy(deep=True) if team else None

    def put_team(self, team: Team) -> None:
        with self.lock:
            self._teams[team.team_id] = team.model_copy(deep=True)

    def _free(self, team_id: str, slot: int, run_id: str, now: datetime) -> bool:
        """SLOT_FREE: no holder, an expired holder, or ``run_id`` itself."""
        held = self._slots.get((team_id, slot))
        return (
            held is None
            or held.holder is None
            or held.holder == run_id
            or (held.expires_at is not None and held.expires_at < to_second(now))
        )

    def _held(self, team_id: str, slot: int, run_id: str) -> bool:
        """SLOT_HELD."""
        held = self._slots.get((team_id, slot))
        return held is not None and held.holder == run_id

    def acquire_slot(self, team: Team, run_id: str, now: datetime, lease_until: datetime) -> int | None:
        taken = self.acquire_slots(team, [run_id], now, lease_until)
        return taken.get(run_id)

    def acquire_slots(
        self, team: Team, run_ids: Sequence[str], now: datetime, lease_until: datetime
    ) -> dict[str, int]:
        taken: dict[str, int] = {}
        with self.lock:
            slots = iter(range(team.max_concurrency))
            for run_id in run_ids:
                for slot in slots:
                    if self._free(team.team_id, slot, run_id, now):
                        self._slots[team.team_id, slot] = _Slot(run_id, to_second(lease_until))
                        taken[run_id] = slot
                        break
        return taken

    def extend_slot(self, team_id: str, slot: int, run_id: str, lease_until: datetime) -> bool:
        with self.lock:
            if not self._held(team_id, slot, run_id):
                return False
            self._slots[team_id, slot] = _Slot(run_id, to_second(lease_until))
            return True

    def release_slot(self, team_id: str, slot: int, run_id: str) -> None:
        with self.lock:
            if self._held(team_id, slot, run_id):
                self._slots[team_id, slot] = _Slot(None, None)

    def extend_slots(self, team_id: str, slots: Mapping[str, int], lease_until: datetime) -> set[str]:
        distinct(list(slots.values()), "slot")
        return {
            run_id for run_id, slot in slots.items() if self.extend_slot(team_id, slot, run_id, lease_until)
        }

    def release_slots(self, team_id: str, slots: Mapping[str, int]) -> None:
        distinct(list(slots.values()), "slot")
        for run_id, slot in slots.items():
            self.release_slot(team_id, slot, run_id)
