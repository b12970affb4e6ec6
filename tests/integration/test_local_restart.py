"""``duetime local`` keeps its tables on disk (DynamoDB Local's ``-dbPath``): a job created, and the run it
made, are still there after a Ctrl-C and a new ``duetime local``, which starts its own emulators on ports of
this test (the shared ones stay as they are) and stops them when it stops. About a minute (two LocalStack
starts)."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import urllib3

from duetime.local.system import EMULATORS_SCRIPT

from .local_system import LocalSystem, start_local, wait_until
from .processes import distinct_free_ports

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("local-restart")]
HTTP = urllib3.PoolManager()


def api(local: LocalSystem, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    answer = HTTP.request(
        method,
        local.url + path,
        body=json.dumps(body) if body is not None else None,
        headers={"Authorization": f"Bearer {local.token}", "Content-Type": "application/json"},
    )
    return answer.status, json.loads(answer.data) if answer.data else None


@pytest.mark.timeout(600)
def test_a_job_and_its_run_outlive_a_restart_of_duetime_local(tmp_path: Path) -> None:
    ddb, localstack = distinct_free_ports(2)
    env = {
        "DUETIME_DDB_PORT": str(ddb),
        "DUETIME_LOCALSTACK_PORT": str(localstack),
        "AWS_ENDPOINT_URL_DYNAMODB": f"http://127.0.0.1:{ddb}",
        **{
            f"AWS_ENDPOINT_URL_{service}": f"http://127.0.0.1:{localstack}"
            for service in ("SQS", "SNS", "EVENTBRIDGE", "SFN", "STS")
        },
        "DUETIME_DDB_DATA": str(tmp_path / "tables"),
    }
    try:
        first = start_local(env)
        try:
            # Far enough ahead for a cold API on a busy host (a job due within the second it is created in
            # is refused: test_service_on_memory's one-time tests).
            soon = (datetime.now(UTC) + timedelta(seconds=10)).replace(microsecond=0)
            body = {"name": "kept", "schedule": {"at": soon.isoformat()}, "exact": True}
            status, job = api(
                first, "POST", "/v1/jobs", {**body, "target": {"url": f"{first.url}/demo/target"}}
            )
            assert status == 201, job

            def ran() -> Any:
                runs = api(first, "GET", f"/v1/jobs/{job['id']}/runs")[1]["runs"]
                return [r for r in runs if r["status"] == "succeeded"]

            (run,) = wait_until(
                ran, 60, first.output, state=lambda: api(first, "GET", f"/v1/jobs/{job['id']}")
            )
        finally:
            assert first.stop() == 0, "\n".join(first.output[-20:])
        assert any(str(tmp_path / "tables") in line for line in first.output), first.output[-20:]

        second = start_local(env)  # its own emulators again, on the same ports and the same folder
        try:
            status, kept = api(second, "GET", f"/v1/jobs/{job['id']}")
            assert status == 200 and kept["name"] == "kept", kept
            status, shown = api(second, "GET", f"/v1/runs/{run['run_id']}")
            assert status == 200 and shown["status"] == "succeeded", shown
        finally:
            assert second.stop() == 0, "\n".join(second.output[-20:])
    finally:  # whatever happened, nothing of this test keeps running
        subprocess.run([str(EMULATORS_SCRIPT), "stop"], env={**os.environ, **env}, check=False)
