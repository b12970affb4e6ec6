"""The store's clock: DynamoDB's own time, read from the ``Date`` header of its responses.

Lease decisions compare instants written by different machines, so they must all use one clock. Each
DynamoDB response says when the server sent it (1-second resolution). With the local send and receive
times of the request, each response bounds the offset between the server clock and ours:

    server - local  in  [Date - received, Date + 1 - sent]

Intersecting the bounds of recent responses narrows the estimate; ``now()`` is local time plus the middle
of the bounds. A worker whose own clock is minutes off still computes the store's time to about a second.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

_SENT = "duetime_sent_at"


class StoreClock:
    def __init__(
        self,
        client: Any,
        local_time: Callable[[], float] = time.time,
        sync: Callable[[], object] | None = None,
        window: int = 32,
    ) -> None:
        """``local_time`` is this machine's clock in epoch seconds (injectable to model skew); ``sync`` is
        a cheap store call made when no response has been seen yet."""
        self._local_time = local_time
        self._sync = sync
        self._bounds: deque[tuple[float, float]] = deque(maxlen=window)
        self._lock = threading.Lock()
        events = client.meta.events
        events.register("before-call.dynamodb", self._before_call)
        events.register("after-call.dynamodb", self._after_call)

    def _before_call(self, context: dict[str, Any], **_: Any) -> None:
        context[_SENT] = self._local_time()

    def _after_call(self, http_response: Any, context: dict[str, Any], **_: Any) -> None:
        received = self._local_time()
        header = http_response.headers.get("Date") if http_response is not None else None
        sent = context.get(_SENT)
        if not header or sent is None:
            return
        server = parsedate_to_datetime(header).timestamp()
        self.observe(server, sent, received)

    def observe(self, server_second: float, sent: float, received: float) -> None:
        """Record one response: server time was in [server_second, server_second + 1) while our clock
        read between ``sent`` and ``received``."""
        with self._lock:
            self._bounds.append((server_second - received, server_second + 1 - sent))

    def offset_seconds(self) -> float | None:
        with self._lock:
            if not self._bounds:
                return None
            low = max(b[0] for b in self._bounds)
            high = min(b[1] for b in self._bounds)
            if low > high:  # our clock jumped: trust only the newest response
                newest = self._bounds[-1]
                self._bounds.clear()
                self._bounds.append(newest)
                low, high = newest
            return (low + high) / 2

    def now(self) -> datetime:
        offset = self.offset_seconds()
        if offset is None and self._sync is not None:
            self._sync()
            offset = self.offset_seconds()
        if offset is None:
            raise RuntimeError("the store's clock is unknown: no DynamoDB response carried a Date header")
        return datetime.fromtimestamp(self._local_time(), UTC) + timedelta(seconds=offset)
