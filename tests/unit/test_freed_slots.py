"""The slots a process freed lately, which its next batch of the same team takes before reading a group:
handed out by whole items, the fullest first, so a guessed batch writes as few slot items as a queried one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from duetime.adapters.dynamodb.worker_batches import FREED_SLOT_GUESS_WINDOW, FreedSlots

FREED_AT = datetime(2026, 12, 7, 0, 0, tzinfo=UTC)
SOON = FREED_AT + timedelta(seconds=2)


def test_the_fullest_items_are_handed_out_first_the_newest_among_equals_and_each_slot_once() -> None:
    freed = FreedSlots()
    freed.remember("team-a", [10, 11], FREED_AT)  # item 10: two slots
    freed.remember("team-a", [0, 1, 2, 3, 4], FREED_AT)  # item 0: all five
    freed.remember("team-a", [20, 21], FREED_AT + timedelta(seconds=1))  # item 20: two, newer

    assert freed.hand_out("team-a", 7, SOON, below=50) == [0, 1, 2, 3, 4, 20, 21]
    assert freed.hand_out("team-a", 2, SOON, below=50) == [10, 11]
    assert freed.hand_out("team-a", 1, SOON, below=50) == []


def test_none_are_handed_out_when_they_would_seat_fewer_runs_or_take_more_writes_than_a_read() -> None:
    """Seven runs fit in two items; three items of two slots would be a write more to take and to free."""
    freed = FreedSlots()
    freed.remember("team-a", [0, 1, 5, 6, 10, 11, 15], FREED_AT)
    assert freed.hand_out("team-a", 8, SOON, below=50) == []  # seven slots: fewer than asked
    assert freed.hand_out("team-a", 7, SOON, below=50) == []  # four items where two would do
    assert sorted(freed.hand_out("team-a", 2, SOON, below=50)) in ([0, 1], [5, 6], [10, 11])  # kept meanwhile


def test_slots_freed_in_several_waves_are_handed_out_as_their_item() -> None:
    freed = FreedSlots()
    freed.remember("team-a", [5, 6], FREED_AT)
    freed.remember("team-a", [12], FREED_AT)
    freed.remember("team-a", [7, 8, 9], FREED_AT + timedelta(seconds=1))
    assert freed.hand_out("team-a", 5, SOON, below=50) == [5, 6, 7, 8, 9]  # one item: one write


def test_a_teams_freed_slots_are_its_own() -> None:
    freed = FreedSlots()
    freed.remember("team-a", [1], FREED_AT)
    assert freed.hand_out("team-b", 1, FREED_AT, below=50) == []
    assert freed.hand_out("team-a", 1, FREED_AT, below=50) == [1]


def test_a_slot_freed_longer_ago_than_the_window_is_not_guessed() -> None:
    freed = FreedSlots()
    freed.remember("team-a", [1, 2], FREED_AT)
    later = FREED_AT + FREED_SLOT_GUESS_WINDOW + timedelta(seconds=1)
    assert freed.hand_out("team-a", 2, later, below=50) == []


def test_a_slot_at_or_over_the_teams_cap_now_is_not_guessed() -> None:
    """A cap lowered since the slot was freed: the slots over it are no longer the team's to take."""
    freed = FreedSlots()
    freed.remember("team-a", [5, 6, 7, 8, 9, 12], FREED_AT)
    assert freed.hand_out("team-a", 4, FREED_AT, below=8) == []  # three slots under the cap: 5, 6, 7
    assert freed.hand_out("team-a", 3, FREED_AT, below=8) == [5, 6, 7]


def test_a_slot_taken_otherwise_meanwhile_is_not_guessed() -> None:
    freed = FreedSlots()
    freed.remember("team-a", [3, 4], FREED_AT)
    freed.forget("team-a", [4])
    assert freed.hand_out("team-a", 2, FREED_AT, below=50) == []
    assert freed.hand_out("team-a", 1, FREED_AT, below=50) == [3]


def test_a_slot_freed_twice_is_handed_out_once() -> None:
    freed = FreedSlots()
    freed.remember("team-a", [5], FREED_AT)
    freed.remember("team-a", [5], FREED_AT + timedelta(seconds=1))
    assert freed.hand_out("team-a", 2, SOON, below=50) == []  # one slot, not two
    assert freed.hand_out("team-a", 1, SOON, below=50) == [5]


def test_only_so_many_items_are_remembered_a_team_the_oldest_forgotten() -> None:
    freed = FreedSlots(items=2)
    freed.remember("team-a", [0], FREED_AT)
    freed.remember("team-a", [5], FREED_AT)
    freed.remember("team-a", [10], FREED_AT)
    assert freed.hand_out("team-a", 1, FREED_AT, below=50) == [10]
    assert freed.hand_out("team-a", 1, FREED_AT, below=50) == [5]
    assert freed.hand_out("team-a", 1, FREED_AT, below=50) == []  # 0: forgotten
