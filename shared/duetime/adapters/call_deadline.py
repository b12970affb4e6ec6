"""A wall-clock deadline over a whole HTTP call: connect, TLS handshake, request, headers and body.

urllib3's timeouts bound each socket operation, not the call: a target that sends a header line or a body
byte every 1.5 s never lets one read wait 2 s, and held a call with a 2 s timeout for as long as it kept
trickling (18 s for twelve header lines, 25 s for a status line sent a byte at a time; a body of 1,024 bytes
so sent would take 25 minutes). ``Timeout(total=...)`` does not help: it bounds the connect and sets the
read timeout to what is left, and every read still waits that long afresh.

Here one thread (``Deadlines``) watches every call in flight, every caller's: at a call's deadline it shuts
its connection's socket down (``shutdown(SHUT_RDWR)``), and whatever read or write the call is blocked in
returns at once (an end of stream, or an error). The call is then reported as a timeout whatever that read
made of it (``Guard.expired``), and its connection is closed, never given back to the pool.

How a call's socket is found: the caller marks the thread it calls in with the call's ``Guard``
(``Deadlines.guard``), and the pools the caller's ``PoolManager`` makes (``watch_pools``) make connections
that hand their socket to the guard of the thread they work in: a new connection as soon as its TCP
connection is made (so its TLS handshake is inside the deadline too), a pooled one when a request is sent
on it. The guard keeps a duplicate of the socket's descriptor, so it can shut the connection down even when
TLS wrapping has detached the socket object it was given, and never touches a descriptor number the process
has since reused for something else.

A guard that ends (``Guard.end``) before its deadline is disarmed for good: the watch thread never shuts
down a connection that has gone back to the pool for another call.
"""

from __future__ import annotations

import heapq
import itertools
import os
import socket
import threading
import time
from typing import Any

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

_current = threading.local()  # .guard: the Guard of the call this thread is making, if any


class Guard:
    """One call's deadline and the sockets it has used; ``expired`` once the deadline shut them down.

    Entered (``with``), it is the guard of the thread's call until the block ends, when it is disarmed.
    """

    __slots__ = ("_descriptors", "_lock", "ended", "expired")

    def __init__(self) -> None:
        self.expired = False
        self.ended = False
        self._lock = threading.Lock()
        self._descriptors: dict[int, int] = {}  # a watched socket's descriptor -> our duplicate of it

    def __enter__(self) -> Guard:
        _current.guard = self
        return self

    def __exit__(self, *exc_info: object) -> None:
        _current.guard = None
        self.end()

    def watch(self, sock: socket.socket) -> None:
        """Shut ``sock`` down at the deadline (at once if it has passed), unless the guard has ended."""
        fileno = sock.fileno()
        if fileno < 0 or fileno in self._descriptors:  # closed; or a TLS socket seen at connect already
            return
        duplicate = os.dup(fileno)
        with self._lock:
            if not self.ended:
                self._descriptors[fileno] = duplicate
                if self.expired:
                    _shut_down(duplicate)
                return
        os.close(duplicate)

    def expire(self) -> None:
        """The deadline has come: shut every socket the call used down, unless the call has ended."""
        with self._lock:
            if self.ended:
                return
            self.expired = True
            for duplicate in self._descriptors.values():
                _shut_down(duplicate)

    def end(self) -> bool:
        """Disarm the guard (the watch thread will not touch its sockets again); True if it had expired."""
        with self._lock:
            self.ended = True
            duplicates, self._descriptors = list(self._descriptors.values()), {}
        for duplicate in duplicates:
            os.close(duplicate)  # our descriptor only: the connection stays open unless it was shut down
        return self.expired


class Deadlines:
    """The thread that ends calls at their deadlines (``DEADLINES``: one for the process, every caller's).

    It runs while calls are watched: started by the first ``guard``, it ends once no guard is left in
    its heap (a new one starts it again). Calls that end in time only leave their entry in the heap: the
    thread pops them, without touching them, when it next wakes, which is at the earliest deadline of a
    call it saw still running.
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        """Empty, and no thread (also in a child process after ``fork``, which does not inherit threads)."""
        self._changed = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, Guard]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def guard(self, deadline: float) -> Guard:
        """A guard for the call this thread makes inside ``with`` it, on a pool of ``watch_pools``'s."""
        guard = Guard()
        with self._changed:
            heapq.heappush(self._heap, (deadline, next(self._order), guard))
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="call-deadlines", daemon=True)
                self._thread.start()
            elif self._heap[0][2] is guard:
                self._changed.notify()
        return guard

    @property
    def watching(self) -> bool:
        """Whether the thread is running."""
        with self._changed:
            return self._thread is not None

    def _watch(self) -> None:
        while True:
            due: list[Guard] = []
            with self._changed:
                now = time.monotonic()
                while self._heap and (self._heap[0][2].ended or self._heap[0][0] <= now):
                    due.append(heapq.heappop(self._heap)[2])
                if not due:
                    if not self._heap:
                        self._thread = None
                        return
                    self._changed.wait(self._heap[0][0] - now)
                    continue
            for guard in due:
                guard.expire()  # an ended guard ignores it


DEADLINES = Deadlines()
os.register_at_fork(after_in_child=DEADLINES._reset)


def watch_pools(pool: urllib3.PoolManager) -> urllib3.PoolManager:
    """``pool``, making from now on connection pools whose connections hand their sockets to the guard of
    the thread they work in (``Deadlines.guard``)."""
    pool.pool_classes_by_scheme = {"http": _WatchedHTTPPool, "https": _WatchedHTTPSPool}
    return pool


def _watch_in_this_thread(sock: socket.socket) -> None:
    guard: Guard | None = getattr(_current, "guard", None)
    if guard is not None:
        guard.watch(sock)


class _Watched:
    """Hands a connection's socket to this thread's guard: a new one once connected (before TLS), a pooled
    one when a request is sent on it."""

    sock: socket.socket | None

    def _new_conn(self) -> socket.socket:
        sock: socket.socket = super()._new_conn()  # type: ignore[misc]
        _watch_in_this_thread(sock)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        if self.sock is not None:
            _watch_in_this_thread(self.sock)
        super().request(*args, **kwargs)  # type: ignore[misc]


class _WatchedHTTPConnection(_Watched, HTTPConnection):
    pass


class _WatchedHTTPSConnection(_Watched, HTTPSConnection):
    pass


class _WatchedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


def _shut_down(descriptor: int) -> None:
    """Shut the connection ``descriptor`` (our duplicate) refers to down, for every descriptor of it."""
    sock = socket.socket(fileno=descriptor)
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already shut down, or the peer has gone
        pass
    finally:
        sock.detach()  # the descriptor stays ours, closed by Guard.end
