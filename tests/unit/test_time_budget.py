"""``time_budget.within``: a block stopped where it runs once its time is spent, whatever it catches, and
never after it ended."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

from duetime.domain.time_budget import OverBudget, within


def test_the_budget_stops_a_loop_that_never_ends_even_one_that_swallows_exceptions() -> None:
    started = time.perf_counter()
    with pytest.raises(OverBudget), within(0.1):
        while True:
            with contextlib.suppress(Exception):  # a library's handler: OverBudget is not an Exception
                sum(range(100))
    assert time.perf_counter() - started < 1.0


def test_the_budget_never_fires_after_its_block() -> None:
    with within(0.05):
        total = sum(range(1000))
    time.sleep(0.2)  # the alarm's time has come and gone: nothing lands here
    assert total == 499_500


def test_a_budget_stops_its_own_thread_only() -> None:
    outcomes: dict[str, str] = {}

    def endless() -> None:
        try:
            with within(0.1):
                while True:
                    sum(range(100))
        except OverBudget:
            outcomes["endless"] = "stopped"

    def brief() -> None:
        with within(5):
            time.sleep(0.3)  # still running when the other thread's alarm goes off
        outcomes["brief"] = "done"

    threads = [threading.Thread(target=endless), threading.Thread(target=brief)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=5)
    assert outcomes == {"endless": "stopped", "brief": "done"}
