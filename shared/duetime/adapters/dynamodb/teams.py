"""Teams on DynamoDB: their settings and their concurrency slots, one at a time (``TeamStore``)."""

from __future__ import annotations

import random
from datetime import datetime

from duetime.adapters.dynamodb import conditions as c
from duetime.adapters.dynamodb.codec import Item, number_attribute, string_attribute, time_attribute
from duetime.adapters.dynamodb.conditional import conditional_write
from duetime.adapters.dynamodb.reads import read_team, team_key
from duetime.adapters.dynamodb.worker_batches import (
    SLOTS_PER_ITEM,
    WorkerBatches,
    slot_groups_to_search,
    slot_key,
)
from duetime.domain.models import Team


class DynamoTeams(WorkerBatches):
    """``TeamStore``'s single-slot forms (mixed into ``DynamoStore``; batches: ``worker_batches.py``)."""

    def get_team(self, team_id: str) -> Team | None:
        return read_team(self.client, self.names, team_id)

    def put_team(self, team: Team) -> None:
        """Create or update a team's settings (its job counts are left alone; its revision goes up)."""
        self.client.update_item(
            TableName=self.names.control,
            Key=team_key(team.team_id),
            UpdateExpression="SET team = :team ADD revision :one",
            ExpressionAttributeValues={
                ":team": string_attribute(team.model_dump_json()),
                ":one": number_attribute(1),
            },
        )

    def acquire_slot(self, team: Team, run_id: str, now: datetime, lease_until: datetime) -> int | None:
        # A random first guess costs one write when the team is far from its cap; after a miss, read a few
        # groups of slots (one query each, groups in random order) and try their free ones.
        first = random.randrange(team.max_concurrency)
        if self._take_slot(team.team_id, first, run_id, now, lease_until):
            return first
        for group in slot_groups_to_search(team.max_concurrency):
            for slot in self._free_slots(team, group, now):
                if slot != first and self._take_slot(team.team_id, slot, run_id, now, lease_until):
                    return slot
        return None

    def _slot_write(self, team_id: str, slot: int, update: str, condition: str, values: Item) -> bool:
        """One conditional write to a slot item; False when its condition says the slot is not ours."""
        written = conditional_write(
            self.client.update_item,
            TableName=self.names.control,
            Key=slot_key(team_id, slot),
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeValues=values,
        )
        return written is not None

    def _take_slot(self, team_id: str, slot: int, run_id: str, now: datetime, lease_until: datetime) -> bool:
        k = slot % SLOTS_PER_ITEM
        values = {
            f":run_{k}": string_attribute(run_id),
            ":until": time_attribute(lease_until),
            ":now": time_attribute(now),
        }
        update = f"SET holder_{k} = :run_{k}, until_{k} = :until"
        return self._slot_write(team_id, slot, update, c.SLOT_FREE.for_slots([k]).expression, values)

    def _free_slots(self, team: Team, group: int, now: datetime) -> list[int]:
        """The free slots of one group, shuffled (one consistent Query of its partition key)."""
        free = self.slot_group_state(team, group, now)[0]
        random.shuffle(free)
        return free

    def extend_slot(self, team_id: str, slot: int, run_id: str, lease_until: datetime) -> bool:
        k = slot % SLOTS_PER_ITEM
        values = {f":run_{k}": string_attribute(run_id), ":until": time_attribute(lease_until)}
        update = f"SET until_{k} = :until"
        return self._slot_write(team_id, slot, update, c.SLOT_HELD.for_slots([k]).expression, values)

    def release_slot(self, team_id: str, slot: int, run_id: str) -> None:
        k = slot % SLOTS_PER_ITEM
        update = f"REMOVE holder_{k}, until_{k}"
        condition = c.SLOT_HELD.for_slots([k]).expression
        self._slot_write(team_id, slot, update, condition, {f":run_{k}": string_attribute(run_id)})
