"""Processes a test starts and must find again: by a marker in their environment, by the port they hold."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .local_system import free_port


def marked(marker: str, value: str) -> list[int]:
    """Live processes whose environment carries ``marker=value``."""
    needle = f"{marker}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:  # gone, a zombie, or not ours
            continue
    return found


def marker_fixture(marker: str) -> Callable[[], Iterator[str]]:
    """A fixture giving a test a fresh value of ``marker`` to put in its processes' environment, and killing
    every process still carrying it when the test ends, whatever the outcome."""

    @pytest.fixture
    def fixture() -> Iterator[str]:
        value = uuid.uuid4().hex
        yield value
        for pid in marked(marker, value):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    return fixture


def command_line(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return "(gone)"


def describe(pids: list[int]) -> str:
    return "\n".join(f"{pid} {command_line(pid)}" for pid in pids)


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def wait_until(predicate: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return bool(predicate())


def wait_while_progressing(count: Callable[[], int], goal: int, stall_seconds: float) -> bool:
    """Wait until `count()` reaches `goal`, for as long as it keeps moving: False once it has not grown for
    `stall_seconds`. For tests that prove every item is handled, not how fast: on a loaded machine (two
    deployed stacks beside each other on two cores) the pace varies, while a stop is still a failure."""
    best, moved = count(), time.monotonic()
    while best < goal:
        if time.monotonic() - moved > stall_seconds:
            return False
        time.sleep(0.5)
        now = count()
        if now > best:
            best, moved = now, time.monotonic()
    return True


def distinct_free_ports(count: int) -> list[int]:
    ports: set[int] = set()
    while len(ports) < count:
        port = free_port()
        if port not in (8000, 4566, 8080):
            ports.add(port)
    return sorted(ports)
