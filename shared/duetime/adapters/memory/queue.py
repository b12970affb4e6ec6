"""``MemoryQueue``: the twin of the SQS run queue, on an injectable clock.

The sending side is ``RunQueue`` (``SqsRunQueue``); the receiving side is what ``SqsConsumer`` offers
(``receive``, ``delete``, ``change_visibility``), so ``duetime.local.system.EventSourceMapping`` can feed a
worker from it. As on SQS: a message sent with a delay becomes visible ``delay_seconds`` later (0 to 900); a
received message is invisible for the visibility timeout, then comes back with its receive count up by
one unless it was deleted; each receive gives a new receipt handle, and only the latest one deletes the
message or changes its visibility. Time is the clock's, so a ``ManualClock`` moves delays and timeouts.

Not modelled: duplicates (SQS is at least once; the twin delivers a message once per visibility
timeout), long polling (``wait_seconds`` is ignored: a receive never blocks), redrive to a dead-letter
queue, ordering (the twin hands out messages oldest visible first; of those visible from the same instant,
the one given that instant first), and message and batch size limits. Visible instants are kept in a heap
(stale entries skipped as they surface), so a receive does not sort the whole queue (the midnight
simulation's queue holds 500,000 runs).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime.domain.clock import Clock
from duetime.domain.models import MAX_SQS_DELAY_SECONDS
from duetime.ports import RunBacklog, RunMessage, RunQueue
from duetime.ports.queue import ReceivedMessage, decode, encode


@dataclass
class _Message:
    message_id: str
    body: str
    visible_at: datetime
    receive_count: int = 0
    receipt_handle: str | None = None


class MemoryQueue:
    """Implements ``duetime.ports.RunQueue``, and the consumer side of ``SqsConsumer``."""

    def __init__(self, clock: Clock, visibility_timeout: int = 90) -> None:
        self.clock = clock
        self.visibility_timeout = visibility_timeout
        self._lock = threading.Lock()
        self._messages: dict[str, _Message] = {}  # by message id, in the order sent
        self._ids = itertools.count(1)
        # (visible at, order given, message id) for each visibility given; stale once deleted or changed
        self._visible: list[tuple[datetime, int, str]] = []
        self._order = itertools.count()

    def _show_at(self, message: _Message) -> None:
        heapq.heappush(self._visible, (message.visible_at, next(self._order), message.message_id))

    def _current(self, entry: tuple[datetime, int, str]) -> _Message | None:
        """The message of a heap entry, if the entry is still its visibility (not deleted or changed)."""
        message = self._messages.get(entry[2])
        return message if message is not None and message.visible_at == entry[0] else None

    def send(self, messages: Sequence[RunMessage], delay_seconds: int = 0) -> None:
        if not 0 <= delay_seconds <= MAX_SQS_DELAY_SECONDS:
            raise ValueError(f"DelaySeconds must be 0 to {MAX_SQS_DELAY_SECONDS}, not {delay_seconds}")
        visible_at = self.clock.now() + timedelta(seconds=delay_seconds)
        with self._lock:
            for message in messages:
                message_id = f"m{next(self._ids)}"
                self._messages[message_id] = stored = _Message(message_id, encode(message), visible_at)
                self._show_at(stored)

    def receive(self, max_messages: int = 10, wait_seconds: int = 1) -> list[ReceivedMessage]:
        now = self.clock.now()
        received: list[ReceivedMessage] = []
        with self._lock:
            while self._visible and len(received) < max_messages and self._visible[0][0] <= now:
                message = self._current(heapq.heappop(self._visible))
                if message is None:
                    continue
                message.receive_count += 1
                message.receipt_handle = f"{message.message_id}#{next(self._ids)}"
                message.visible_at = now + timedelta(seconds=self.visibility_timeout)
                self._show_at(message)
                received.append(
                    ReceivedMessage(
                        message.message_id, message.receipt_handle, message.body, message.receive_count
                    )
                )
        return received

    def delete(self, receipt_handles: Sequence[str]) -> None:
        with self._lock:
            for handle in receipt_handles:
                message = self._message(handle)
                if message is not None:
                    del self._messages[message.message_id]

    def change_visibility(self, receipt_handle: str, seconds: int) -> None:
        with self._lock:
            message = self._message(receipt_handle)
            if message is not None:
                message.visible_at = self.clock.now() + timedelta(seconds=seconds)
                self._show_at(message)

    def next_visible(self) -> datetime | None:
        """When the next message is or becomes visible (None: the queue is empty)."""
        with self._lock:
            while self._visible:
                if self._current(self._visible[0]) is not None:
                    return self._visible[0][0]
                heapq.heappop(self._visible)
        return None

    def _message(self, receipt_handle: str) -> _Message | None:
        """The message ``receipt_handle`` was the latest receipt of (None: deleted, or received again)."""
        message = self._messages.get(receipt_handle.partition("#")[0])
        return message if message is not None and message.receipt_handle == receipt_handle else None

    def waiting_runs(self) -> int:
        """Messages visible now (``duetime.ports.RunBacklog``)."""
        now = self.clock.now()
        with self._lock:
            return sum(1 for message in self._messages.values() if message.visible_at <= now)

    def pending(self) -> list[RunMessage]:
        """Every message not yet deleted, visible or not, in the order sent (for tests to look at)."""
        with self._lock:
            return [decode(message.body) for message in self._messages.values()]


def _implements_the_port(queue: MemoryQueue) -> RunQueue:
    """Never called: mypy checks here that ``MemoryQueue`` keeps ``RunQueue``'s signature."""
    return queue


def _implements_the_backlog(queue: MemoryQueue) -> RunBacklog:
    """Never called: mypy checks here that ``MemoryQueue`` keeps ``RunBacklog``'s signature."""
    return queue
