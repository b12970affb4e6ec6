"""The slots a process freed lately, which its next batch of the same team guesses before reading a group."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from duetime.adapters.dynamodb.worker_batches import FREED_SLOT_GUESS_WINDOW, FreedSlots

FREED_AT = datetime(2026, 12, 7, 0, 0, tzinfo=UTC)


def test_the_newest_freed_slots_are_handed_out_first_and_each_once() -> None:
    freed = FreedSlots()
    freed.remember("team-a", [3, 4], FREED_AT)
    freed.remember("team-a", [7, 8], FREED_AT + timedelta(seconds=1))

    assert freed.hand_out("team-a", 3, FREED_AT + timedelta(seconds=2), below=50) == [8, 7, 4]
    assert freed.hand_out("team-a", 3, FREED_AT + timedelta(seconds=2), below=50) == [3]
    assert freed.hand_out("team-a", 3, FREED_AT + timedelta(seconds=2), below=50) == []


def test_a_teams_freed_slots_are_its_own() -> None:
    freed = FreedSlots()
    freed.remember("team-a", [1], FREED_AT)
    assert freed.hand_out("team-b", 5, FREED_AT, below=50) == []
    assert freed.hand_out("team-a", 5, FREED_AT, below=50) == [1]


def test_a_slot_freed_longer_ago_than_the_window_is_not_guessed() -> None:
    freed = FreedSlots()
    freed.remember("team-a", [1, 2], FREED_AT)
    later = FREED_AT + FREED_SLOT_GUESS_WINDOW + timedelta(seconds=1)
    assert freed.hand_out("team-a", 5, later, below=50) == []


def test_a_slot_at_or_over_the_teams_cap_now_is_not_guessed() -> None:
    """A cap lowered since the slot was freed: the slots over it are no longer the team's to take."""
    freed = FreedSlots()
    freed.remember("team-a", [2, 9, 12], FREED_AT)
    assert freed.hand_out("team-a", 5, FREED_AT, below=10) == [9, 2]


def test_a_slot_freed_twice_is_handed_out_once() -> None:
    """A batch naming one slot twice would be refused as a whole (``by_item``)."""
    freed = FreedSlots()
    freed.remember("team-a", [5], FREED_AT)
    freed.remember("team-a", [5], FREED_AT + timedelta(seconds=1))
    assert freed.hand_out("team-a", 5, FREED_AT + timedelta(seconds=1), below=50) == [5]


def test_only_so_many_slots_are_remembered_a_team() -> None:
    freed = FreedSlots(remembered=3)
    freed.remember("team-a", range(10), FREED_AT)
    assert freed.hand_out("team-a", 10, FREED_AT, below=50) == [9, 8, 7]
