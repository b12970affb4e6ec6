"""Warming a worker before a minute that holds runs, so the first run after a quiet spell does not wait for a
cold start.

A worker that has not run for a while has no execution environment left: the first run's call then waits
for a cold start (on AWS under a second for the worker's Python; 2-4 s for a process on a loaded 2-core
emulator host), and an exact job due at the start of that minute starts late. The poller that holds a group
loads the coming minute's due rows 10 s ahead (``MinutePreload``); when that minute holds any, it asks for a
worker to be warmed: an asynchronous invocation of the worker with ``{"duetime_warmup": true}``, which the
worker answers at once without reading its queue. The environment it started (or found) then takes the
minute's first batch.

At most one warm-up per group per minute, and only for minutes with runs: a few cents a month at most.
It warms one environment, not many: the midnight spike's workers are provisioned ahead (the stack's
scheduled scaling), not warmed here.
"""

from __future__ import annotations

from collections.abc import Callable

from duetime.ports.functions import WorkerWarmer
from duetime.scheduling.preload import FireReport


def is_warmup(event: object) -> bool:
    """Whether a worker invocation is a warm-up (not an SQS batch)."""
    return isinstance(event, dict) and event.get("duetime_warmup") is True


def warm_before_loaded_minutes(
    warmer: WorkerWarmer, on_error: Callable[[Exception], None]
) -> Callable[[FireReport], None]:
    """An ``on_fire`` observer: warm a worker once per minute in which the holder loaded due rows (the
    first page of a minute that holds any; the minute is read a page at a time)."""
    warmed: set[str] = set()

    def observe(report: FireReport) -> None:
        if report.loaded_rows and report.loaded_bucket not in warmed:
            if len(warmed) > 4:
                warmed.clear()
            warmed.add(report.loaded_bucket or "")
            try:
                warmer.warm()
            except Exception as exc:  # best effort: the minute's runs go ahead, perhaps on a cold start
                on_error(exc)

    return observe
