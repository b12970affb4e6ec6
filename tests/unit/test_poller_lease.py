"""The poller lease's life, on moto with a manual clock: invocations that overlap as EventBridge starts
them, one holder at any instant, handovers at whole seconds (early, as soon as the next invocation is
ready, or at the end of the run with a hot standby), a dead holder replaced, a paused one claiming nothing
when it wakes.

The invocations are stepped in turn every 100 ms of the manual clock, as their poller loops would step
them; at each whole second the test records which of them may claim (their ``window()``)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto import mock_aws

from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.dynamodb.tables import TableNames, create_tables
from duetime.scheduling.poller_lease import GroupLease, LeaseTimings, Role, group_label

T0 = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)
GROUP = "0-15"
STEP = timedelta(milliseconds=100)
TIMINGS = LeaseTimings()  # early handover: the default
HOT = LeaseTimings(hot_standby=True)


@pytest.fixture
def store() -> Iterator[DynamoStore]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_tables(client, TableNames())
        yield DynamoStore(client)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@dataclass
class Invocation:
    """One EventBridge invocation: it starts at ``start`` and runs ``run`` seconds, unless it dies (stops
    stepping for good) or pauses (stops stepping, then goes on)."""

    name: str
    start: datetime
    gate: GroupLease
    dies_at: datetime | None = None
    paused: tuple[datetime, datetime] | None = None

    def alive(self, now: datetime) -> bool:
        if now < self.start or self.gate.done or (self.dies_at is not None and now >= self.dies_at):
            return False
        return self.paused is None or not self.paused[0] <= now < self.paused[1]

    def claims(self, now: datetime) -> bool:
        window = self.gate.window()
        return self.alive(now) and window is not None and window.start <= now < window.end


def invocation(
    store: DynamoStore,
    name: str,
    start: float,
    run: float = 135,
    timings: LeaseTimings = TIMINGS,
    ready: Callable[[datetime], bool] = lambda now: True,
    busy: Callable[[], bool] = lambda: False,
    **kw: datetime,
) -> Invocation:
    gate = GroupLease(store, GROUP, name, at(start + run), timings, ready, busy)
    return Invocation(name, at(start), gate, **kw)


def every_minute(
    store: DynamoStore, count: int, first: float = 37, run: float = 135, timings: LeaseTimings = TIMINGS
) -> list[Invocation]:
    """EventBridge's ``rate(1 minute)``: an invocation every minute at about the same second (a few hundred
    milliseconds of jitter each time)."""
    return [
        invocation(store, f"inv{i}", first + 60 * i + (i * 0.37) % 0.9, run, timings) for i in range(count)
    ]


def assert_one_claimer_every_second(claimers: dict[datetime, list[str]], since: datetime) -> None:
    assert seconds_without(claimers, since) == []  # no second nobody claims...
    assert [s for s, names in claimers.items() if len(names) > 1] == []  # ...and none two claim


def simulate(invocations: list[Invocation], until: float) -> dict[datetime, list[str]]:
    """Step every live invocation each 100 ms up to ``until``; who may claim at each whole second."""
    claimers: dict[datetime, list[str]] = {}
    now = T0
    while now < at(until):
        for inv in invocations:
            if inv.alive(now):
                inv.gate.step(now)
        if now.microsecond == 0:
            claimers[now] = [inv.name for inv in invocations if inv.claims(now)]
        now += STEP
    return claimers


def seconds_without(claimers: dict[datetime, list[str]], after: datetime) -> list[datetime]:
    return [second for second, names in claimers.items() if second >= after and not names]


def test_partition_groups_are_named_by_their_ranges() -> None:
    assert group_label(range(16)) == "0-15"
    assert group_label([32, 33, 0, 1, 2, 7]) == "0-2,7,32-33"


def test_the_first_invocation_takes_the_free_lease_and_claims_at_once(store: DynamoStore) -> None:
    gate = GroupLease(store, GROUP, "a", at(135), TIMINGS)
    gate.step(at(0))
    window = gate.window()
    assert gate.role is Role.HOLDER and window is not None
    assert window.start == at(0) and window.end == at(TIMINGS.lease_seconds - 1) - timedelta(seconds=0.2)
    lease = store.read_poller_lease(GROUP)
    assert lease.holder == "a" and lease.term == 1 and lease.expires_at == at(TIMINGS.lease_seconds)


def test_with_a_hot_standby_invocations_hand_over_at_the_end_of_their_runs_at_whole_seconds(
    store: DynamoStore,
) -> None:
    invocations = every_minute(store, 6, timings=HOT)
    claimers = simulate(invocations, until=37 + 5 * 60 + 10)
    first = invocations[0].start.replace(microsecond=0) + timedelta(seconds=1)
    assert seconds_without(claimers, first) == []  # no second nobody claims...
    assert [s for s, names in claimers.items() if len(names) > 1] == []  # ...and none two claim
    reigns = sorted(((r, inv.name) for inv in invocations for r in inv.gate.reigns), key=lambda x: x[0].start)
    for (before, _), (after, name) in itertools.pairwise(reigns):
        assert after.start.microsecond == 0, name  # taken over at a whole second
        assert timedelta(0) < after.start - before.end <= timedelta(seconds=TIMINGS.stop_guard)
    # Each invocation after the first held about a minute, from about 65 s into its run: the one
    # before it handed over 12 s before its own 135 s run ended, and the next one was waiting by then.
    for inv in invocations[1:4]:
        (reign,) = inv.gate.reigns
        assert 64 <= (reign.start - inv.start).total_seconds() <= 67
        assert 58 <= (reign.end - reign.start).total_seconds() <= 61
        assert inv.gate.handovers == 1 and inv.gate.takeovers == 0
    assert store.read_poller_lease(GROUP).term == 5  # five holders, one after the other


def test_each_invocation_takes_over_once_ready_and_hands_over_to_the_next_so_it_lives_about_a_minute(
    store: DynamoStore,
) -> None:
    invocations = every_minute(store, 6)
    claimers = simulate(invocations, until=37 + 5 * 60 + 10)
    assert_one_claimer_every_second(
        claimers, invocations[0].start.replace(microsecond=0) + timedelta(seconds=1)
    )
    reigns = sorted(((r, inv.name) for inv in invocations for r in inv.gate.reigns), key=lambda x: x[0].start)
    for (before, _), (after, name) in itertools.pairwise(reigns):
        assert after.start.microsecond == 0, name  # taken over at a whole second
        assert timedelta(0) < after.start - before.end <= timedelta(seconds=TIMINGS.stop_guard)
    # The one before saw each invocation registered at its next renewal (every 2 s) and offered the lease
    # from a whole second 2 s on: each took over 2.5-5 s into its run, held until the next one was ready a
    # minute later, and was done a few seconds over a minute after it started (the hot standby's: 125 s).
    for before, inv in itertools.pairwise(invocations[:5]):
        (reign,) = inv.gate.reigns
        assert 2.5 <= (reign.start - inv.start).total_seconds() <= 5
        assert 58 <= (reign.end - reign.start).total_seconds() <= 62
        assert inv.gate.handovers == 1 and inv.gate.takeovers == 0
        assert before.gate.done
    assert invocations[4].gate.reigns[0].end - invocations[4].start <= timedelta(seconds=66)
    assert store.read_poller_lease(GROUP).term == 6  # six holders, one after the other


def test_a_busy_holder_keeps_the_next_invocation_waiting_until_the_end_of_its_run(store: DynamoStore) -> None:
    first = invocation(store, "first", 0, busy=lambda: True)
    second = invocation(store, "second", 60)
    claimers = simulate([first, second], until=130)
    assert_one_claimer_every_second(claimers, at(1))
    (reign,) = first.gate.reigns
    assert reign.end >= at(135 - TIMINGS.retire_before + TIMINGS.handover_lead) - timedelta(seconds=1)
    assert second.gate.role is Role.HOLDER and first.gate.handovers == 1


def test_the_next_invocation_registers_only_once_its_minute_is_loaded(store: DynamoStore) -> None:
    loaded_at = at(75)
    first = invocation(store, "first", 0)
    second = invocation(store, "second", 60, ready=lambda now: now >= loaded_at)
    claimers = simulate([first, second], until=90)
    assert_one_claimer_every_second(claimers, at(1))
    assert all(names == ["first"] for s, names in claimers.items() if s < loaded_at)
    (reign,) = first.gate.reigns
    assert (
        loaded_at + timedelta(seconds=TIMINGS.handover_lead) <= reign.end <= loaded_at + timedelta(seconds=5)
    )


def test_with_no_standby_a_dead_holder_is_replaced_when_the_next_invocation_starts(
    store: DynamoStore,
) -> None:
    invocations = every_minute(store, 3)
    dead, heir = invocations[1], invocations[2]
    dead.dies_at = dead.start + timedelta(seconds=30)  # mid-reign, without a word, nobody waiting
    claimers = simulate(invocations, until=37 + 2 * 60 + 30)
    unclaimed = seconds_without(claimers, invocations[0].start + timedelta(seconds=1))
    assert unclaimed and all(dead.dies_at <= s < heir.start + timedelta(seconds=1) for s in unclaimed)
    assert [s for s, names in claimers.items() if len(names) > 1] == []
    assert heir.gate.takeovers == 1 and heir.gate.role is Role.HOLDER  # the lease had long expired


def test_a_holder_that_dies_is_replaced_by_the_hot_standby_within_a_few_seconds(store: DynamoStore) -> None:
    invocations = every_minute(store, 3, timings=HOT)
    invocations[1].dies_at = at(37 + 60 + 90)  # mid-reign, without a word
    claimers = simulate(invocations, until=37 + 2 * 60 + 60)
    dead, heir = invocations[1], invocations[2]
    unclaimed = seconds_without(claimers, invocations[0].start + timedelta(seconds=1))
    assert unclaimed, "the dead holder's last seconds are nobody's until its lease expires"
    assert unclaimed[-1] - unclaimed[0] <= timedelta(seconds=TIMINGS.lease_seconds)
    assert all(dead.dies_at <= s for s in unclaimed)  # type: ignore[operator]
    assert [s for s, names in claimers.items() if len(names) > 1] == []
    assert heir.gate.takeovers == 1
    taken = heir.gate.reigns[0].start if heir.gate.reigns else heir.gate.window().start  # type: ignore[union-attr]
    assert taken - dead.dies_at <= timedelta(seconds=TIMINGS.lease_seconds + 1)  # type: ignore[operator]


def test_a_paused_holder_that_wakes_after_the_takeover_claims_nothing(store: DynamoStore) -> None:
    holder = invocation(store, "holder", 0, run=600, timings=HOT)
    standby = invocation(store, "standby", 1, run=600, timings=HOT)
    holder.paused = (at(10), at(30))
    claimers = simulate([holder, standby], until=30)
    assert standby.gate.role is Role.HOLDER and standby.gate.takeovers == 1
    assert all(names == ["standby"] for s, names in claimers.items() if s >= at(17))
    # Awake again at 30 s: before its first step its own view of its window has long closed...
    window = holder.gate.window()
    assert window is not None and window.end <= at(10 + TIMINGS.lease_seconds)
    # ...and the step finds the lease gone: it claims nothing and waits as the standby.
    holder.gate.step(at(30))
    assert holder.gate.window() is None and holder.gate.role is Role.STANDBY
    holder.gate.step(at(30.5))
    assert store.read_poller_lease(GROUP).successor == "holder"


def test_an_offer_nobody_accepts_is_withdrawn_and_the_holder_keeps_claiming(store: DynamoStore) -> None:
    holder = invocation(store, "holder", 0, run=100, timings=HOT)
    dead_standby = invocation(store, "dead", 1, run=200, timings=HOT, dies_at=at(5))  # registered, then died
    standby = invocation(store, "standby", 60, run=200, timings=HOT)
    claimers = simulate([holder, dead_standby, standby], until=110)
    assert seconds_without(claimers, at(1)) == []
    assert [s for s, names in claimers.items() if len(names) > 1] == []
    (reign,) = holder.gate.reigns
    assert reign.end > at(100 - TIMINGS.retire_before + TIMINGS.handover_lead)  # it held past its first offer
    assert holder.gate.handovers == 1 and standby.gate.role is Role.HOLDER


def test_a_holder_with_nobody_to_hand_over_to_gives_the_lease_back_and_the_next_takes_it_at_once(
    store: DynamoStore,
) -> None:
    alone = invocation(store, "alone", 0, run=40)
    late = invocation(store, "late", 45, run=40)
    claimers = simulate([alone, late], until=50)
    (reign,) = alone.gate.reigns
    assert alone.gate.done and reign.end == at(40 - TIMINGS.release_before - TIMINGS.stop_guard)
    assert store.read_poller_lease(GROUP).holder == "late"
    assert claimers[at(45)] == ["late"] and late.gate.takeovers == 0  # released, not expired


# --- the conditions themselves ---------------------------------------------------------------------------


def test_an_expired_lease_is_free_only_by_the_clock_of_whoever_takes_it(store: DynamoStore) -> None:
    assert store.acquire_poller_lease(GROUP, "a", at(0), at(6)) is not None
    assert store.acquire_poller_lease(GROUP, "b", at(5.999), at(12)) is None  # not expired yet
    assert store.renew_poller_lease(GROUP, "a", at(6.5), at(12)) is None  # expired: cannot be revived
    taken = store.acquire_poller_lease(GROUP, "b", at(6.001), at(12))
    assert taken is not None and taken.holder == "b" and taken.term == 2 and taken.since == at(6.001)
    assert store.release_poller_lease(GROUP, "a") is False  # not a's to give back


def test_acceptance_and_withdrawal_of_an_offer_exclude_each_other(store: DynamoStore) -> None:
    store.acquire_poller_lease(GROUP, "h", at(0), at(6))
    assert store.register_poller_successor(GROUP, "s") is not None
    assert store.register_poller_successor(GROUP, "other") is None  # one successor at a time
    assert store.offer_poller_lease(GROUP, "h", "other", at(3), at(1), at(7)) is None  # not registered
    offered = store.offer_poller_lease(GROUP, "h", "s", at(3), at(1), at(7))
    assert offered is not None and offered.handover_at == at(3)
    assert store.offer_poller_lease(GROUP, "h", "s", at(4), at(1), at(7)) is None  # one offer at a time
    assert store.withdraw_poller_offer(GROUP, "h", at(3)) is not None
    assert store.accept_poller_lease(GROUP, "s", "h", at(3), at(9)) is None  # too late: withdrawn

    store.register_poller_successor(GROUP, "s")
    store.offer_poller_lease(GROUP, "h", "s", at(5), at(3), at(9))
    taken = store.accept_poller_lease(GROUP, "s", "h", at(5), at(11))
    assert taken is not None and (taken.holder, taken.since, taken.term) == ("s", at(5), 2)
    assert taken.successor is None and taken.handover_at is None
    assert store.withdraw_poller_offer(GROUP, "h", at(5)) is None  # too late: accepted
    assert store.renew_poller_lease(GROUP, "h", at(4), at(10)) is None  # no longer h's


def test_a_standby_withdraws_only_its_own_registration(store: DynamoStore) -> None:
    store.acquire_poller_lease(GROUP, "h", at(0), at(6))
    store.register_poller_successor(GROUP, "s")
    assert store.withdraw_poller_successor(GROUP, "other") is False
    assert store.withdraw_poller_successor(GROUP, "s") is True
    assert store.read_poller_lease(GROUP).successor is None
    assert store.register_poller_successor(GROUP, "h") is None  # the holder is not its own successor


def test_a_woken_invocation_that_finds_a_holder_ends_without_standing_by(store: DynamoStore) -> None:
    """Several job writes may start several woken invocations at once: the one that takes the free lease
    holds it, and the others end at their next look instead of standing by for their whole run."""
    first = GroupLease(store, GROUP, "woken-1", at(135), TIMINGS, stand_by=False)
    second = GroupLease(store, GROUP, "woken-2", at(135), TIMINGS, stand_by=False)
    first.step(T0)
    second.step(T0)
    assert first.role is Role.HOLDER and second.done and not second.reigns
    lease = store.read_poller_lease(GROUP)
    assert lease.holder == "woken-1" and lease.successor is None  # nobody registered to stand by
    standby = GroupLease(store, GROUP, "ticked", at(135), TIMINGS)  # a rule's invocation stands by as ever
    standby.step(T0)
    assert standby.role is Role.STANDBY and not standby.done
