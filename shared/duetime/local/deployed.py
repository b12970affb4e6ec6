"""The stack deployed into LocalStack (``make deploy-local``): its outputs, its API's loopback URL, its
first team, and the moment it can take a job.

LocalStack answers an API Gateway stage on ``https://<api id>.execute-api.localhost.localstack.cloud:<port>/
<stage>/``, a name that needs DNS (none here); the same stage is served on the loopback address as
``http://127.0.0.1:<port>/restapis/<api id>/<stage>/_user_request_/`` (LocalStack's documented form), which
is what duetime's clients and the jobs' targets use.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from duetime.adapters.aws.clients import new_client
from duetime.adapters.aws.sqs import SqsRunQueue
from duetime.adapters.dynamodb.catalog import DynamoCatalog
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.dynamodb.tables import TableNames
from duetime.api.service import JobService
from duetime.client import ApiFailure, DuetimeClient
from duetime.domain.clock import SystemClock
from duetime.domain.errors import Conflict
from duetime.wiring import run_budget, written_format

STACK = "Duetime"
_API_HOST = re.compile(r"^(?P<api>[a-z0-9]+)\.execute-api\.")


@dataclass(frozen=True)
class DeployedStack:
    endpoint: str  # LocalStack's own URL, e.g. http://127.0.0.1:4610
    api_url: str  # the REST API's stage on the loopback address
    jobs_table: str
    runs_table: str
    control_table: str
    queue_url: str
    alerts_topic: str

    @classmethod
    def from_outputs(cls, path: Path, endpoint: str) -> DeployedStack:
        """The stack ``cdklocal deploy --outputs-file path`` wrote."""
        outputs: dict[str, str] = json.loads(path.read_text())[STACK]
        return cls(
            endpoint=endpoint.rstrip("/"),
            api_url=loopback_api_url(outputs["ApiUrl"], endpoint),
            jobs_table=outputs["JobsTable"],
            runs_table=outputs["RunsTable"],
            control_table=outputs["ControlTable"],
            queue_url=outputs["RunQueueUrl"],
            alerts_topic=outputs["AlertsTopic"],
        )

    def environment(self) -> dict[str, str]:
        """Variables that point duetime's settings and clients at this stack."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "DUETIME_JOBS_TABLE": self.jobs_table,
            "DUETIME_RUNS_TABLE": self.runs_table,
            "DUETIME_CONTROL_TABLE": self.control_table,
            "DUETIME_RUN_QUEUE_URL": self.queue_url,
            "DUETIME_ALERTS_TOPIC_ARN": self.alerts_topic,
        }


def loopback_api_url(api_url: str, endpoint: str) -> str:
    """``https://<id>.execute-api.localhost.localstack.cloud:4610/v1-stage/`` ->
    ``http://127.0.0.1:4610/restapis/<id>/v1-stage/_user_request_``."""
    parts = urlsplit(api_url)
    match = _API_HOST.match(parts.hostname or "")
    stage = parts.path.strip("/")
    if match is None or not stage or "/" in stage:
        raise ValueError(f"not a LocalStack API Gateway stage URL: {api_url!r}")
    return f"{endpoint.rstrip('/')}/restapis/{match['api']}/{stage}/_user_request_"


def stack_service(stack: DeployedStack, allow_private_targets: bool = False) -> JobService:
    """The API's logic on the stack's tables and queue, in this process (no API Gateway in between);
    ``allow_private_targets`` as the stack's API function has it on LocalStack."""
    names = TableNames(stack.jobs_table, stack.runs_table, stack.control_table)
    dynamodb = new_client("dynamodb", stack.endpoint)
    stored_format = written_format(dynamodb, names)
    queue = SqsRunQueue(new_client("sqs", stack.endpoint), stack.queue_url, write_format=stored_format)
    catalog = DynamoCatalog(dynamodb, names, write_format=stored_format)
    return JobService(
        catalog,
        DynamoStore(dynamodb, names, write_format=stored_format),
        queue,
        SystemClock(),
        allow_private_targets=allow_private_targets,
        run_budget=run_budget(catalog),
    )


def team_token(
    stack: DeployedStack, team_id: str, exact_quota: int = 1000, max_concurrency: int = 50
) -> tuple[str, str | None]:
    """(token, signing secret) for ``team_id`` in the stack's control table: a new team, or a new token
    for a team an earlier deploy created (its secret is not shown again: None)."""
    service = stack_service(stack)
    try:
        team, token = service.create_team(team_id, max_concurrency=max_concurrency, exact_quota=exact_quota)
        return token, team.signing_secret
    except Conflict:
        return service.issue_token(team_id), None


def wait_until_jobs_can_be_created(url: str, token: str, timeout: float = 120.0) -> float:
    """Create (and delete) a paused probe job through the API until it works; the seconds it took."""
    client = DuetimeClient(url, token, timeout=30)
    probe: dict[str, Any] = {
        "name": "deploy-local probe",
        "schedule": {"rate": "1 day"},
        "target": {"url": f"{url}/healthz", "method": "GET"},
        "paused": True,
    }
    started = time.monotonic()
    while True:
        try:
            job = client.request("POST", "/v1/jobs", probe)
            client.request("DELETE", client.job_path(job["id"]))
            return time.monotonic() - started
        except ApiFailure:
            if time.monotonic() - started > timeout:
                raise
            time.sleep(1)
