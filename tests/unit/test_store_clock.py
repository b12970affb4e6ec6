"""The store clock's bounds, their ageing, and the probes that narrow them (a simulated server, no I/O)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

import pytest

from duetime.adapters.aws.store_clock import StoreClock


class SimulatedStore:
    """A server whose clock is ``offset`` seconds ahead of ours, answering after ``round_trip`` seconds."""

    def __init__(self, offset: float, round_trip: float = 0.004, start: float = 1_000_000.25) -> None:
        self.offset = offset
        self.round_trip = round_trip
        self.local = start
        self.calls = 0
        self.clock = StoreClock(None, local_time=lambda: self.local, sync=self.call)

    def call(self) -> None:
        sent = self.local
        served_at = sent + self.round_trip / 2 + self.offset  # server time while it handles the call
        self.local = sent + self.round_trip
        self.calls += 1
        self.clock.observe(math.floor(served_at), sent, self.local)

    def sleep(self, seconds: float) -> None:
        self.local += seconds


def test_calls_on_whole_seconds_leave_the_clock_half_a_second_off() -> None:
    store = SimulatedStore(offset=0.0)
    for _ in range(40):  # a poller waking at the start of every second
        store.sleep(1.0 - (store.local % 1.0) + 0.02)
        store.call()
    assert store.clock.uncertainty_seconds() == pytest.approx(0.5, abs=0.01)
    assert store.clock.offset_seconds() == pytest.approx(0.48, abs=0.01)  # the error probing removes


@pytest.mark.parametrize("offset", [0.0, 0.48, -0.31, 299.7, -300.2])
def test_probes_narrow_the_offset_to_the_round_trip_and_never_exclude_the_truth(offset: float) -> None:
    store = SimulatedStore(offset)
    for _ in range(5):
        store.sleep(1.0 - (store.local % 1.0) + 0.02)
        store.call()
    assert store.clock.refine(to_seconds=0.005, sleep=store.sleep)
    assert store.calls <= 5 + 12
    offset_seen = store.clock.offset_seconds()
    assert offset_seen is not None and abs(offset_seen - offset) <= 0.005
    low = offset_seen - (store.clock.uncertainty_seconds() or 0)
    high = offset_seen + (store.clock.uncertainty_seconds() or 0)
    assert low <= offset <= high


def test_old_bounds_widen_by_the_allowed_drift() -> None:
    store = SimulatedStore(offset=0.2)
    store.clock.refine(to_seconds=0.005, sleep=store.sleep)
    before = store.clock.uncertainty_seconds()
    assert before is not None
    store.sleep(1000.0)  # no calls for 1000 s: 100 ppm of drift either way
    assert store.clock.uncertainty_seconds() == pytest.approx(before + 0.1, abs=1e-6)


def test_a_jump_of_our_own_clock_resets_the_bounds_to_the_newest_response() -> None:
    store = SimulatedStore(offset=0.0)
    store.clock.refine(to_seconds=0.005, sleep=store.sleep)
    store.offset = -60.0  # an NTP step moved our clock a minute ahead
    store.call()
    offset_seen = store.clock.offset_seconds()
    assert offset_seen is not None and -61.0 <= offset_seen <= -59.0
    assert store.clock.refine(to_seconds=0.005, sleep=store.sleep)
    assert store.clock.offset_seconds() == pytest.approx(-60.0, abs=0.005)


def test_without_a_sync_call_the_clock_cannot_probe() -> None:
    assert StoreClock(None).refine() is False


def wait_for(condition: Callable[[], bool], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.005)
    return condition()


def probing_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "store-clock-probe")


def test_a_clock_told_to_stop_refining_ends_its_probe_thread_and_keeps_its_bounds() -> None:
    store = SimulatedStore(offset=0.3)
    before = probing_threads()
    store.clock.start_refining(every=0.01)
    assert probing_threads() == before + 1
    assert wait_for(lambda: store.calls > 0)  # it probed at once
    now = store.clock.now()

    store.clock.stop_refining()

    assert probing_threads() == before
    assert store.clock.now() == now  # the bounds it had: the local time has not moved


def test_now_never_goes_back_when_a_tighter_bound_moves_the_estimate_back() -> None:
    """A first response leaves the offset in [0, 1.01] s (the middle: 0.505 s ahead); a later one shows it
    is at most 0.1 s. Two reads in turn (a pause, then a resume) must still read in turn: the clock holds
    still until local time catches up with what it already said, then moves on from the better estimate."""
    local = [1000.0]
    clock = StoreClock(None, local_time=lambda: local[0])
    clock.observe(1000, sent=999.99, received=1000.0)
    before = clock.now()
    clock.observe(999, sent=999.9, received=999.9)  # the server's second turned after we sent this one

    assert clock.offset_seconds() == pytest.approx(0.05, abs=0.001)  # the estimate moved back 0.455 s
    assert clock.now() == before  # ... and the clock held still
    local[0] += 1.0
    assert clock.now().timestamp() == pytest.approx(1001.05, abs=0.001)
