"""DynamoDB Local on cores of its own while a benchmark runs.

On AWS, DynamoDB is another fleet of machines: the workers' CPU never slows a claim down. On one small
machine the emulator, LocalStack, the poller and the worker processes all share the same cores, and the
Python processes starve the Java emulator (the claims then measure this machine's scheduler, not
duetime). For the length of a benchmark, ``emulator_on_own_cores`` pins every thread of the process
listening on DynamoDB Local's port to half of the cores, and this process (so the worker processes it
starts next) and the process listening on LocalStack's port to the other half; on leaving, every thread of
those processes gets its former CPU set back (a benchmark killed with SIGKILL cannot do that: the emulator
then stays on its cores until restarted, which costs it speed, never correctness). The bare-transaction
ceiling is measured inside the same split, so the ratio compares like with like.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlparse

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CoreSplit:
    emulator: frozenset[int]
    others: frozenset[int]

    def describe(self) -> str:
        return (
            f"DynamoDB Local on cpu {_cpus(self.emulator)}; "
            f"duetime, its workers and LocalStack on cpu {_cpus(self.others)}"
        )


def _cpus(cpus: frozenset[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus))


def split_cores(available: set[int]) -> CoreSplit | None:
    """The upper half of the available cores for the emulator (at least one), the rest for everything
    else (at least one); None when there is a single core to share."""
    ordered = sorted(available)
    if len(ordered) < 2:
        return None
    half = len(ordered) // 2
    return CoreSplit(emulator=frozenset(ordered[half:]), others=frozenset(ordered[:half]))


def listening_pid(port: int) -> int | None:
    """The process listening on a local TCP port, if this user may see it."""
    import psutil

    try:
        connections = psutil.net_connections(kind="tcp")
    except psutil.AccessDenied:  # some systems hide other processes' sockets
        return None
    for connection in connections:
        if connection.status == psutil.CONN_LISTEN and connection.laddr and connection.laddr.port == port:
            return connection.pid
    return None


def _thread_ids(pid: int) -> list[int]:
    """Every thread of ``pid`` and of its child processes (LocalStack may fork)."""
    import psutil

    process = psutil.Process(pid)
    ids: list[int] = []
    for member in [process, *process.children(recursive=True)]:
        try:
            ids.extend(thread.id for thread in member.threads())
        except psutil.NoSuchProcess:
            continue
    return ids


def _pin(pid: int, cpus: frozenset[int]) -> None:
    for tid in _thread_ids(pid):
        try:
            os.sched_setaffinity(tid, cpus)
        except ProcessLookupError:
            continue  # a thread that ended meanwhile


def _port(url: str | None) -> int | None:
    return urlparse(url).port if url else None


@contextmanager
def emulator_on_own_cores(dynamodb_url: str | None, localstack_url: str | None) -> Iterator[CoreSplit | None]:
    """Pin DynamoDB Local (found by the port of ``dynamodb_url``) to cores of its own for the block.
    Yields the split, or None when it could not be made (one core, the emulator not found, no permission);
    the benchmark then runs with everything sharing every core, and says so."""
    split = split_cores(os.sched_getaffinity(0))
    dynamodb_port, localstack_port = _port(dynamodb_url), _port(localstack_url)
    emulator = listening_pid(dynamodb_port) if split and dynamodb_port else None
    if split is None or emulator is None:
        log.warning("DynamoDB Local shares every core with the benchmark (no core split possible)")
        yield None
        return
    localstack = listening_pid(localstack_port) if localstack_port else None
    if localstack == emulator:  # DynamoDB served by LocalStack itself: nothing else to move away
        localstack = None
    pinned = {pid: os.sched_getaffinity(pid) for pid in (emulator, localstack, os.getpid()) if pid}
    try:
        _pin(emulator, split.emulator)
        if localstack:
            _pin(localstack, split.others)
        _pin(os.getpid(), split.others)
    except PermissionError:
        log.warning("not allowed to pin DynamoDB Local; it shares every core with the benchmark")
        for pid, cpus in pinned.items():
            _pin(pid, frozenset(cpus))
        yield None
        return
    try:
        yield split
    finally:
        for pid, cpus in pinned.items():
            _pin(pid, frozenset(cpus))
