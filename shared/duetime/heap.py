"""The process's long-lived objects, set aside from the garbage collector's full passes.

A poller's or worker's process holds, once wired, a few hundred thousand objects that live as long as it
does (the SDK's service models and endpoint rules above all). CPython's full (generation 2) collection
walks every tracked object; a midnight claim allocates enough to trigger one every few thousand runs, and
each walked all of them: two such passes were 14% of a 2,000-run claim's CPU (``duetime bench runcpu``).
``gc.freeze`` moves what is alive at that moment to the permanent generation, which no collection walks;
what the invocations allocate afterwards is collected as before.
"""

from __future__ import annotations

import gc


def settle_heap() -> None:
    """Collect once, then freeze what survived. Called once a process, after wiring (the handlers' cold
    start, and the benches that stand for them); later calls freeze what was wired since."""
    gc.collect()
    gc.freeze()
