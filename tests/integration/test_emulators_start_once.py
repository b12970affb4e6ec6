"""Two ``scripts/emulators.sh start`` at once start an emulator once: the second waits for the first and
reuses what it started (``locked_start``). Before the lock, both saw nothing answering and both started one
on the same port; the second's pid file replaced the first's, so a ``stop`` left a process running.

DynamoDB Local is started on a port of the test's own; LocalStack is the suite's (already answering, so
both invocations reuse it and neither stops it)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from .conftest import SQS_URL
from .processes import distinct_free_ports, listening, marked, marker_fixture, wait_until

# On the worker that runs duetime local's end-to-end module, one test after the other: each of these starts
# emulators of its own (emulators.sh takes one lock per emulator, whatever the port) and signals what it
# started; beside duetime local's tests on a loaded host, a make run waited past 600 s and a stop past 300 s.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("local-e2e")]

ROOT = Path(__file__).resolve().parents[2]
MARKER = "DUETIME_EMULATORS_START_ONCE_TEST"
START_SECONDS = 180


marker = marker_fixture(MARKER)  # whatever happens, nothing of ours is left running


@pytest.mark.timeout(START_SECONDS + 120)
def test_two_starts_at_once_start_dynamodb_local_once(marker: str) -> None:
    (ddb_port,) = distinct_free_ports(1)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")},
        "DUETIME_DDB_PORT": str(ddb_port),
        "DUETIME_LOCALSTACK_PORT": SQS_URL.rsplit(":", 1)[1],
        MARKER: marker,
    }
    script = str(ROOT / "scripts" / "emulators.sh")
    starts = [
        subprocess.Popen([script, "start"], env=env, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        for _ in range(2)
    ]
    try:
        logs = [start.communicate(timeout=START_SECONDS)[1] for start in starts]
        assert [start.returncode for start in starts] == [0, 0], logs
        said = "\n".join(logs)
        assert said.count(f"DynamoDB Local started on http://127.0.0.1:{ddb_port}") == 1, said
        assert said.count(f"DynamoDB Local already answers on http://127.0.0.1:{ddb_port} (reused)") == 1, (
            said
        )
        assert "LocalStack started" not in said, said  # the suite's, reused by both
        assert listening(ddb_port)
    finally:
        # Port 1 names a LocalStack nobody started (no pid file): the suite's is left alone.
        subprocess.run([script, "stop"], env={**env, "DUETIME_LOCALSTACK_PORT": "1"}, check=False)
    assert wait_until(lambda: not listening(ddb_port), 30), "DynamoDB Local outlived its stop"
    assert marked(MARKER, marker) == [], "a second DynamoDB Local was left running"
