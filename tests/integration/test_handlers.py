"""The Lambda handlers, called as Lambda calls them, against the emulators."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from duetime import wiring
from duetime.domain.models import RunStatus

from ..lambda_support import LambdaContext, load_handler
from .conftest import Stack


@pytest.fixture
def deployed(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    for key, value in {
        "DUETIME_JOBS_TABLE": stack.names.jobs,
        "DUETIME_RUNS_TABLE": stack.names.runs,
        "DUETIME_CONTROL_TABLE": stack.names.control,
        "DUETIME_RUN_QUEUE_URL": stack.queue_url,
        "DUETIME_ALLOW_PRIVATE_TARGETS": "true",  # the test's target listens on 127.0.0.1
    }.items():
        monkeypatch.setenv(key, value)
    forget_wiring()
    yield stack
    forget_wiring()


def forget_wiring() -> None:
    """Drop every object ``wiring`` made and kept (settings, services, stores on the tables of a test that
    ended) and stop its clocks' probes, so the next handler call wires itself to the current environment."""
    wiring.forget()


def sqs_event(bodies: list[str]) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": f"m{i}",
                "receiptHandle": f"r{i}",
                "body": body,
                "attributes": {},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:0:q",
                "awsRegion": "us-east-1",
            }
            for i, body in enumerate(bodies)
        ]
    }


def test_poller_and_worker_handlers_run_a_job_end_to_end(deployed: Stack, target, capsys) -> None:
    job = deployed.job_due_now("team-a", target.url)
    result = load_handler("poller").handler(
        {"detail-type": "Scheduled Event", "detail": {"partitions": "0-63", "run_seconds": 3}},
        LambdaContext(),
    )
    # Alone, the invocation took the group's free lease, swept, and gave the lease back before its end.
    assert result["ticks"] >= 1 and result["errors"] == 0 and result["partitions"] == list(range(64))
    assert result["group"] == "0-63" and 0 < result["held_seconds"] <= 3
    assert deployed.store.read_poller_lease("0-63").holder is None
    bodies = [json.dumps({"run_id": m.run_id, "attempt": m.attempt}) for m in deployed.messages()]
    assert len(bodies) == 1

    response = load_handler("worker").handler(sqs_event([*bodies, "not a run message"]), LambdaContext())
    assert response == {"batchItemFailures": [{"itemIdentifier": "m1"}]}  # only the malformed record fails
    run = deployed.store.get_run(json.loads(bodies[0])["run_id"])
    assert run is not None and run.status is RunStatus.SUCCEEDED and run.job_id == job.id
    metrics = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    names = {m["Name"] for doc in metrics for d in doc["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]}
    assert {"RunsClaimed", "RunsSucceeded", "RunsStarted", "StartLateness"} <= names
    # Counted once, whichever claimed it: the minute preload (at its second) or the sweep.
    claimed = [v for doc in metrics for v in _values(doc.get("RunsClaimed", []))]
    assert sum(claimed) == 1, claimed


def _values(value: float | list[float]) -> list[float]:
    return value if isinstance(value, list) else [value]


def test_the_team_authorizer_allows_a_good_token_for_the_whole_api_and_refuses_others(
    deployed: Stack,
) -> None:
    from duetime.adapters.dynamodb.catalog import DynamoCatalog
    from duetime.api.service import JobService
    from duetime.wiring import run_budget

    catalog = DynamoCatalog(deployed.dynamodb, deployed.names)
    service = JobService(
        catalog, deployed.store, deployed.queue, deployed.clock, run_budget=run_budget(catalog)
    )
    _, token = service.create_team("gamma")
    authorizer = load_handler("authorizer")
    method_arn = "arn:aws:execute-api:us-east-1:123456789012:abc123/v1-stage/GET/v1/jobs"
    policy = authorizer.handler(
        {"type": "TOKEN", "authorizationToken": f"Bearer {token}", "methodArn": method_arn}, LambdaContext()
    )
    from duetime.api.team_admin import hash_token
    from duetime.domain.job_history import token_id

    # The token's id, name and scope ride along (the api function checks the token again on each request).
    context = {
        "team_id": "gamma",
        "token_id": token_id(hash_token(token)),
        "token_name": "admin",
        "scope": "admin",
    }
    assert policy["principalId"] == "gamma" and policy["context"] == context
    assert policy["policyDocument"]["Statement"] == [
        {
            "Action": "execute-api:Invoke",
            "Effect": "Allow",
            "Resource": "arn:aws:execute-api:us-east-1:123456789012:abc123/v1-stage/*/*",
        }
    ]
    with pytest.raises(Exception, match=r"^Unauthorized$"):
        authorizer.handler(
            {"type": "TOKEN", "authorizationToken": "Bearer dt_nope", "methodArn": method_arn},
            LambdaContext(),
        )

    # Behind the authorizer, the api handler takes the request if its token is the vouched team's.
    event = {
        "httpMethod": "GET",
        "path": "/v1/jobs",
        "resource": "/v1/{proxy+}",
        "headers": {"Authorization": f"Bearer {token}"},
        "requestContext": {"requestId": "r", "stage": "v1-stage", "authorizer": {"team_id": "gamma"}},
        "queryStringParameters": None,
        "body": None,
        "isBase64Encoded": False,
    }
    response = load_handler("api").handler(event, LambdaContext())
    assert response["statusCode"] == 200 and json.loads(response["body"]) == {"jobs": [], "next_cursor": None}
