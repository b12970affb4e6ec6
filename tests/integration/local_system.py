"""``duetime local`` as a user runs it: a subprocess, its one ready line, Ctrl-C to stop."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from duetime.adapters.dynamodb.catalog import DynamoCatalog
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.dynamodb.tables import TableNames

from .conftest import new_clients

READY = re.compile(r"^duetime local ready: api=(\S+) token=(\S+)$")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LocalSystem:
    process: subprocess.Popen[str]
    url: str
    token: str
    secret: str
    output: list[str] = field(default_factory=list)

    def stop(self) -> int:
        self.process.send_signal(signal.SIGINT)  # Ctrl-C
        return self.process.wait(timeout=60)


def isolated(prefix: str) -> dict[str, str]:
    """Settings that give a ``duetime local`` its own tables and queue in the shared emulators."""
    return {
        "DUETIME_JOBS_TABLE": f"{prefix}-jobs",
        "DUETIME_RUNS_TABLE": f"{prefix}-runs",
        "DUETIME_CONTROL_TABLE": f"{prefix}-control",
        "DUETIME_RUN_QUEUE_NAME": prefix,
    }


def start_local(env_overrides: dict[str, str] | None = None, interrupt_ignored: bool = False) -> LocalSystem:
    """``interrupt_ignored``: started as a shell without job control starts a background command, with
    Ctrl-C (SIGINT) ignored, which the process inherits."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env_overrides or {})}
    process = subprocess.Popen(
        [sys.executable, "-m", "duetime.cli", "local", "--port", str(free_port())],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if interrupt_ignored else None,
    )
    lines: list[str] = []
    ready = threading.Event()
    found: dict[str, str] = {}

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            line = line.rstrip("\n")
            lines.append(line)
            if line.startswith("dev team signing secret: "):
                found["secret"] = line.split(": ", 1)[1]
            match = READY.match(line)
            if match:
                found["url"], found["token"] = match.groups()
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + 120
    while not ready.wait(0.2):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError("duetime local did not get ready:\n" + "\n".join(lines))
    return LocalSystem(process, found["url"], found["token"], found["secret"], lines)


def lift_the_api_rate(prefix: str, team_id: str) -> None:
    """For a test that is not a team's client (the fuzzer, a burst of requests at once): its team may make as
    many requests as it likes, so every request reaches routing and validation instead of a 429 (the rate
    has tests of its own: test_rate_limits.py)."""
    dynamodb = new_clients()[0]
    names = TableNames(f"{prefix}-jobs", f"{prefix}-runs", f"{prefix}-control")
    team = DynamoCatalog(dynamodb, names).get_team(team_id)
    assert team is not None
    lifted = team.model_copy(update={"api_rate_per_second": 10_000, "api_burst": 100_000})
    DynamoStore(dynamodb, names).put_team(lifted)


def wait_until(
    predicate: Callable[[], Any],
    timeout: float,
    said: list[str],
    interval: float = 0.25,
    state: Callable[[], Any] | None = None,
) -> Any:
    """``predicate``'s first truthy value within ``timeout`` s; else fail, with the last lines of what
    ``duetime local`` ``said`` and, given ``state``, what it returns then (e.g. the job the API shows)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    seen = f"; then: {state()!r}" if state is not None else ""
    raise AssertionError(f"not within {timeout:.0f} s{seen}; duetime local said:\n" + "\n".join(said[-60:]))
