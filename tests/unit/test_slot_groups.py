"""Which of a team's slot groups a worker reads when it looks for free slots."""

from __future__ import annotations

import random

from duetime.adapters.dynamodb.worker_batches import (
    SLOT_GROUPS_SEARCHED,
    SLOTS_PER_KEY,
    slot_groups_to_search,
)


def test_a_big_team_has_a_few_distinct_groups_searched_each_time_and_every_group_in_turn() -> None:
    random.seed(7)
    groups = 10_000 // SLOTS_PER_KEY
    seen: set[int] = set()
    for _ in range(2_000):
        searched = slot_groups_to_search(10_000)
        assert len(searched) == SLOT_GROUPS_SEARCHED == len(set(searched))
        assert all(0 <= group < groups for group in searched)
        seen.update(searched)
    assert seen == set(range(groups))  # no group is left out of the search


def test_a_team_with_fewer_groups_than_searched_has_all_of_them_searched() -> None:
    assert sorted(slot_groups_to_search(SLOTS_PER_KEY * 2)) == [0, 1]
    assert slot_groups_to_search(1) == [0]
