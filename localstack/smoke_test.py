"""Smoke test of a deployed stack (LocalStack with Docker, or AWS): team -> job over the API -> a run.

python localstack/smoke_test.py cdk.out/localstack-outputs.json
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import UTC, datetime, timedelta

from duetime.client import DuetimeClient
from duetime.ids import make_run_id
from duetime.settings import Settings
from duetime.wiring import make_job_service, make_store


def main(outputs_file: str) -> int:
    with open(outputs_file) as handle:
        outputs = next(iter(json.load(handle).values()))
    api_url = outputs["ApiUrl"].rstrip("/")
    settings = Settings(
        jobs_table=outputs["JobsTable"],
        runs_table=outputs["RunsTable"],
        control_table=outputs["ControlTable"],
        run_queue_url=outputs["RunQueueUrl"],
    )
    service = make_job_service(settings, make_store(settings))
    _, token = service.create_team(f"smoke-{int(time.time())}")
    client = DuetimeClient(api_url, token)
    at = (datetime.now(UTC) + timedelta(seconds=20)).replace(microsecond=0)
    job = client.request(
        "POST",
        "/v1/jobs",
        {
            "name": "smoke",
            "schedule": {"at": at.isoformat()},
            "exact": True,
            "target": {"type": "http", "url": f"{api_url}/healthz", "method": "GET"},
        },
    )
    run_id = make_run_id(job["id"], at)
    print(f"job {job['id']} created for {at.isoformat()}; waiting for {run_id}")
    deadline = time.monotonic() + float(os.environ.get("SMOKE_TIMEOUT", "180"))
    while time.monotonic() < deadline:
        runs = client.request("GET", client.job_path(job["id"], "runs"))["runs"]
        if runs and runs[0]["status"] in ("succeeded", "failed", "dead"):
            print(json.dumps(runs[0], indent=2))
            return 0 if runs[0]["status"] == "succeeded" else 1
        time.sleep(3)
    print("no finished run in time", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
