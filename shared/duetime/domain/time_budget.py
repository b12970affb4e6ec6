"""A time budget for pure-Python work that has no place of its own to stop: a library's loop that yields
nothing while it runs (``dateutil.rrule`` walking year after year to 9999 for a rule that never matches).

``within(seconds)`` runs its block on the calling thread with an alarm on another: once the budget is spent,
the alarm raises ``OverBudget`` in the calling thread (CPython's ``PyThreadState_SetAsyncExc``), which the
interpreter delivers between two bytecodes, in the middle of whatever loop is running. The block runs at full
speed (a profile hook that looked at the clock on every call slowed it three to four times). ``OverBudget`` is
a ``BaseException``, as a cancellation is, so a library's ``except Exception`` does not swallow it.

The alarm cannot reach the block once it has ended: the end and the alarm take one lock, and an exception the
alarm set but the thread had not yet raised is withdrawn. A block that runs one long C call is not
interrupted until the call returns.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class OverBudget(BaseException):
    """The block ran past its budget (a ``BaseException``, so that ``except Exception`` lets it through)."""


@contextmanager
def within(seconds: float) -> Iterator[None]:
    """Run the block for at most about ``seconds``: past it, ``OverBudget`` is raised inside the block."""
    import ctypes

    target = ctypes.c_ulong(threading.get_ident())
    lock = threading.Lock()
    state = {"ended": False, "fired": False}

    def alarm() -> None:
        with lock:
            if not state["ended"]:
                state["fired"] = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(target, ctypes.py_object(OverBudget))

    timer = threading.Timer(seconds, alarm)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            state["ended"] = True
            if state["fired"]:  # raised already, or about to be: withdrawn so it cannot land after the block
                ctypes.pythonapi.PyThreadState_SetAsyncExc(target, None)
        timer.cancel()
    if state["fired"]:
        raise OverBudget
