"""The store's clock: DynamoDB's own time, read from the ``Date`` header of its responses.

Lease decisions compare instants written by different machines, so they must all use one clock. Each
DynamoDB response says when the server sent it (1-second resolution). With the local send and receive
times of the request, each response bounds the offset between the server clock and ours:

    server - local  in  [Date - received, Date + 1 - sent]

The clock keeps the tightest lower and upper bound seen, each widened by the drift two clocks may have
accumulated since (``drift``, 100 ppm), and ``now()`` is local time plus the middle of the two.

Responses that always arrive at the same point of the second (a poller that wakes on whole seconds) leave
the bounds a whole second apart, and the middle can be half a second off: enough to start a midnight job
at 23:59:59.5. So the clock also *probes*: ``next_probe_at()`` is the local instant at which a cheap store
call straddles the server's second boundary as the bounds place it, and whichever second the response
names halves the interval. About eight probes bring it down to the round trip; ``refine()`` makes them,
and ``start_refining()`` keeps doing so in a daemon thread whenever drift has widened the bounds again.
A worker whose own clock is minutes off still computes the store's time to a few milliseconds.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

log = logging.getLogger(__name__)
_SENT = "duetime_sent_at"
DRIFT_PER_SECOND = 1e-4  # how fast two clocks may drift apart: old bounds widen by this much per second
REFINED_TO_SECONDS = 0.02  # probing stops once the offset is known to within this much either way
_Bound = tuple[float, float]  # (bound on server - local, local time it was observed)


class _RefiningStopped(Exception):
    """``stop_refining`` was called while the refining thread waited to probe."""


class StoreClock:
    def __init__(
        self,
        client: DynamoDBClient | None,
        local_time: Callable[[], float] = time.time,
        sync: Callable[[], object] | None = None,
        drift: float = DRIFT_PER_SECOND,
    ) -> None:
        """``local_time`` is this machine's clock in epoch seconds (injectable to model skew); ``sync`` is
        a cheap store call, made when no response has been seen yet and by the probes."""
        self._local_time = local_time
        self._sync = sync
        self._drift = drift
        self._low: _Bound | None = None
        self._high: _Bound | None = None
        self._lock = threading.Lock()
        # The latest instant ``now`` answered: two calls in turn (a pause, then a resume) must never read
        # as the other way round, so ``now`` holds still rather than go back as the estimate tightens.
        self._latest = datetime.min.replace(tzinfo=UTC)
        self._refiner: threading.Thread | None = None
        self._stop_refining = threading.Event()
        if client is not None:
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

    # --- bounds -------------------------------------------------------------------------------------------

    def _aged(self, bound: _Bound, at: float, sign: int) -> float:
        return bound[0] + sign * self._drift * abs(at - bound[1])

    def _bounds_at(self, at: float) -> tuple[float, float] | None:
        if self._low is None or self._high is None:
            return None
        return self._aged(self._low, at, -1), self._aged(self._high, at, +1)

    def observe(self, server_second: float, sent: float, received: float) -> None:
        """Record one response: server time was in [server_second, server_second + 1) while our clock
        read between ``sent`` and ``received``."""
        low: _Bound = (server_second - received, received)
        high: _Bound = (server_second + 1 - sent, received)
        with self._lock:
            if self._low is None or self._aged(self._low, received, -1) < low[0]:
                self._low = low
            if self._high is None or self._aged(self._high, received, +1) > high[0]:
                self._high = high
            bounds = self._bounds_at(received)
            if bounds is not None and bounds[0] > bounds[1]:  # our clock jumped: trust only this response
                self._low, self._high = low, high

    def offset_seconds(self) -> float | None:
        with self._lock:
            bounds = self._bounds_at(self._local_time())
        return None if bounds is None else (bounds[0] + bounds[1]) / 2

    def uncertainty_seconds(self) -> float | None:
        """How far ``now()`` may be from the store's time, either way (half the width of the bounds)."""
        with self._lock:
            bounds = self._bounds_at(self._local_time())
        return None if bounds is None else (bounds[1] - bounds[0]) / 2

    def now(self) -> datetime:
        offset = self.offset_seconds()
        if offset is None and self._sync is not None:
            self._sync()
            offset = self.offset_seconds()
        if offset is None:
            raise RuntimeError("the store's clock is unknown: no DynamoDB response carried a Date header")
        instant = datetime.fromtimestamp(self._local_time(), UTC) + timedelta(seconds=offset)
        with self._lock:  # never back: a tighter bound may move the middle back by up to half a second
            self._latest = instant = max(instant, self._latest)
        return instant

    # --- probing ------------------------------------------------------------------------------------------

    def next_probe_at(self) -> float | None:
        """The local instant at which, by the middle of the bounds, the server's clock turns a whole second:
        a call sent then gets a Date that says on which side of the middle the true offset lies."""
        local = self._local_time()
        with self._lock:
            bounds = self._bounds_at(local)
        if bounds is None:
            return None
        middle = (bounds[0] + bounds[1]) / 2
        return math.floor(local + middle) + 1 - middle

    def refine(
        self,
        to_seconds: float = REFINED_TO_SECONDS,
        max_probes: int = 12,
        sleep: Callable[[float], object] = time.sleep,
    ) -> bool:
        """Probe until the offset is known to within ``to_seconds`` (True) or ``max_probes`` calls were made.
        Each probe waits for its instant (under a second) and makes the ``sync`` call."""
        if self._sync is None:
            return False
        for _ in range(max_probes):
            uncertainty = self.uncertainty_seconds()
            if uncertainty is not None and uncertainty <= to_seconds:
                return True
            probe_at = self.next_probe_at()
            if probe_at is not None:
                sleep(max(0.0, probe_at - self._local_time()))
            self._sync()
        uncertainty = self.uncertainty_seconds()
        return uncertainty is not None and uncertainty <= to_seconds

    def start_refining(self, every: float = 30.0) -> None:
        """Keep the offset refined in a daemon thread: probe now, then check every ``every`` seconds (drift
        widens the bounds by 0.2 ms a second each side, so this costs a probe or two every few minutes)."""
        if self._refiner is not None or self._sync is None:
            return

        def keep_refined() -> None:
            while not self._stop_refining.is_set():
                try:
                    self.refine(sleep=self._wait_unless_stopped)
                except _RefiningStopped:
                    return
                except Exception:  # a failed probe is retried next round; the clock keeps working
                    log.warning("store clock probe failed", exc_info=True)
                self._stop_refining.wait(every)

        self._refiner = threading.Thread(target=keep_refined, name="store-clock-probe", daemon=True)
        self._refiner.start()

    def _wait_unless_stopped(self, seconds: float) -> None:
        """The refining thread's wait before a probe: cut short, and the probes given up, when stopped."""
        if self._stop_refining.wait(seconds):
            raise _RefiningStopped

    def stop_refining(self, timeout: float = 5.0) -> None:
        """End ``start_refining``'s thread (after a probe under way, if any); the clock keeps its bounds and
        its hooks. For whoever drops the clock while the process goes on (tests rewiring to new tables)."""
        self._stop_refining.set()
        if self._refiner is not None:
            self._refiner.join(timeout)
