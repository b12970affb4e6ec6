"""``make run`` stopped by a signal other than Ctrl-C still stops what it started.

The test runs ``make run`` as a user would, on ports of its own (so the emulators the rest of the suite
uses on 8000 and 4566 are never touched), waits for ``duetime local ready``, signals it and checks that its
three ports are free again and that no process it started is left. Every process ``make run`` starts
inherits a marker in its environment, which is how the test finds them (LocalStack runs in a session of
its own, so process groups would miss it) and how it cleans up, killing only marked processes, whatever
the outcome.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from .processes import (
    command_line,
    describe,
    distinct_free_ports,
    listening,
    marked,
    marker_fixture,
    wait_until,
)

# On the worker that runs duetime local's end-to-end module, one test after the other: each of these starts
# emulators of its own (emulators.sh takes one lock per emulator, whatever the port) and signals what it
# started; beside duetime local's tests on a loaded host, a make run waited past 600 s and a stop past 300 s.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("local-e2e")]

ROOT = Path(__file__).resolve().parents[2]
RUN_DIR = Path(os.environ.get("DUETIME_CACHE") or ROOT / ".cache") / "run"  # scripts/emulators.sh's logs
MARKER = "DUETIME_MAKE_RUN_SIGNAL_TEST"
READY = re.compile(r"^duetime local ready: api=(\S+) token=\S+$")
STARTUP_SECONDS = 300  # LocalStack takes ~20 s on an idle machine; the suite is not idle
STOP_SECONDS = 120


def child_environment(marker: str, ddb_port: int, localstack_port: int) -> dict[str, str]:
    """The environment of a user's shell: no endpoints pointing at the suite's emulators, no outer make."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("AWS_ENDPOINT_URL")
        and name not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "DUETIME_URL", "DUETIME_TOKEN"}
    }
    env.update(
        {
            "DUETIME_DDB_PORT": str(ddb_port),
            "DUETIME_LOCALSTACK_PORT": str(localstack_port),
            "PYTHONUNBUFFERED": "1",
            MARKER: marker,
        }
    )
    return env


marker = marker_fixture(MARKER)  # whatever happens, nothing of ours is left running


def as_in_a_terminal() -> None:
    """Give ``make run`` HUP's default action, as a terminal's shell does, whatever the suite inherited.

    A signal ignored at exec stays ignored, and bash cannot trap one ignored on entry: under ``nohup`` (or
    a CI runner that ignores HUP) every process the suite starts would ignore the HUP this test sends, and
    ``make run`` would keep running, as a user who started it under ``nohup`` asked it to.
    """
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


@pytest.mark.timeout(STARTUP_SECONDS + 2 * STOP_SECONDS + 60)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_make_run_stops_duetime_and_its_emulators_on_a_signal(sig: signal.Signals, marker: str) -> None:
    """TERM goes to the make process alone, as ``kill <pid>``, a service manager or a CI runner sends it;
    GNU make passes TERM on to its recipe's process (and only TERM).

    HUP goes to the whole process group, as a terminal does when its window is closed (the kernel hangs up
    the foreground process group). GNU make does not pass HUP on: it expects the group to have it and waits
    for its children, so a HUP sent to make alone is not something a user's system sends.
    """
    ddb_port, localstack_port, api_port = distinct_free_ports(3)
    output: list[str] = []
    ready = threading.Event()
    make = subprocess.Popen(
        ["make", "--no-print-directory", "-C", str(ROOT), "run", f"RUN_ARGS=--port {api_port}"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=child_environment(marker, ddb_port, localstack_port),
        start_new_session=True,  # a process group of its own, led by make
        preexec_fn=as_in_a_terminal,  # before the reader thread starts: no other thread of ours runs yet
    )

    def read() -> None:
        assert make.stdout is not None
        for line in make.stdout:
            output.append(line.rstrip("\n"))
            match = READY.match(output[-1])
            if match and match.group(1) == f"http://127.0.0.1:{api_port}":
                ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def said() -> str:  # what make, the script and duetime said (tracebacks of an orphan can be long)
        notes = [line for line in output[:-20] if line.startswith(("emulators:", "make", "duetime local"))]
        return "\n".join([*notes, "...", *output[-20:]])

    deadline = time.monotonic() + STARTUP_SECONDS
    while not ready.wait(0.5):
        assert make.poll() is None, f"make run exited with {make.returncode} before it was ready:\n{said()}"
        assert time.monotonic() < deadline, f"make run was not ready in {STARTUP_SECONDS} s:\n{said()}"
    ports = {"DynamoDB Local": ddb_port, "LocalStack": localstack_port, "the API": api_port}
    assert all(listening(port) for port in ports.values()), said()
    started = marked(MARKER, marker)
    commands = " | ".join(command_line(pid) for pid in started)
    for program in ("make", "emulators.sh", "DynamoDBLocal.jar", "localstack.runtime.main", "duetime local"):
        assert program in commands, f"{program} not found among the processes make run started: {commands}"

    if sig == signal.SIGTERM:
        os.kill(make.pid, sig)
    else:
        os.killpg(make.pid, sig)
    try:
        make.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        pytest.fail(f"make run did not exit within {STOP_SECONDS} s of {sig.name}:\n{said()}")
    reader.join(timeout=10)

    def busy() -> list[str]:
        return [f"{name} on {port}" for name, port in ports.items() if listening(port)]

    assert wait_until(lambda: not busy(), STOP_SECONDS), f"after {sig.name}: {busy()} still up\n{said()}"
    assert wait_until(lambda: not marked(MARKER, marker), STOP_SECONDS), (
        f"left running after {sig.name}:\n{describe(marked(MARKER, marker))}\n"
        f"(all it started:\n{describe(started)})\n{said()}"
    )
    for name, port in (("dynamodb", ddb_port), ("localstack", localstack_port)):
        (RUN_DIR / f"{name}-{port}.log").unlink(missing_ok=True)  # kept only when the test fails
