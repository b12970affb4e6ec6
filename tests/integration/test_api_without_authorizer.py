"""Authentication without a Lambda authorizer: LocalStack community never runs API Gateway authorizers (and a
``localstack=true`` stack has none), so requests reach the api function with no ``requestContext.authorizer``
and it checks the bearer token itself, against the catalog. Events are shaped as API Gateway's proxy
integration sends them to ``/v1/{proxy+}``; the tables are on DynamoDB Local."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pytest

from duetime.api import app as api
from duetime.api.service import JobService

from ..lambda_support import LambdaContext
from .api_support import HANDLER, JOB


@dataclass
class Answer:
    status: int
    body: Any


def gateway(
    method: str,
    path: str,
    authorization: str | None = None,
    authorizer: dict[str, Any] | None = None,
    body: Any = None,
) -> Answer:
    headers = {"Content-Type": "application/json", "Host": "abc123.execute-api.localhost.localstack.cloud"}
    if authorization is not None:
        headers["Authorization"] = authorization
    context: dict[str, Any] = {
        "requestId": "r",
        "stage": "v1-stage",
        "resourcePath": "/v1/{proxy+}",
        "httpMethod": method,
        "path": f"/v1-stage{path}",
        "identity": {"sourceIp": "203.0.113.9"},
    }
    if authorizer is not None:  # only API Gateway writes it, after its authorizer ran
        context["authorizer"] = authorizer
    event = {
        "resource": "/v1/{proxy+}",
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": {"proxy": path.removeprefix("/v1/")},
        "stageVariables": None,
        "requestContext": context,
        "body": json.dumps(body) if body is not None else None,
        "isBase64Encoded": False,
    }
    response = HANDLER.handler(event, LambdaContext())
    text = response.get("body") or ""
    return Answer(response["statusCode"], json.loads(text) if text else None)


def bearer(token: str) -> str:
    return f"Bearer {token}"


def private_operations(job_id: str, run_id: str) -> list[tuple[str, str]]:
    """Every operation the OpenAPI document says needs a token, with real ids in its path."""
    document = json.loads(api.openapi_document())
    ids = {
        "job_id": job_id,
        "run_id": run_id,
        "token_id": "tok_0123456789ab",
        "name": "fr",
        "key": "k",
        "area": "a",
    }
    return [
        (method.upper(), re.sub(r"\{(\w+)\}", lambda m: ids[m.group(1)], path))
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if operation.get("security")
    ]


NOT_A_VALID_TOKEN = [None, "", "Bearer ", "Basic YWxwaGE=", "Bearer dt_nope", "{token}", "Bearer {token}x"]


@pytest.mark.parametrize("authorization", NOT_A_VALID_TOKEN)
def test_without_authorizer_every_operation_refuses_a_request_without_a_valid_token(
    service: JobService, authorization: str | None
) -> None:
    _, token = service.create_team("alpha")
    job = gateway("POST", "/v1/jobs", bearer(token), body=JOB).body
    run = gateway("POST", f"/v1/jobs/{job['id']}/trigger", bearer(token)).body
    operations = private_operations(job["id"], run["run_id"])
    assert len(operations) == 38  # the fire ledger's two among them
    assert ("GET", "/v1/audit") in operations
    header = authorization.format(token=token) if authorization is not None else None
    for method, path in [*operations, ("DELETE", "/v1/no-such-route"), ("PUT", "/v1/jobs")]:
        answer = gateway(method, path, header, body=JOB if method in ("POST", "PATCH") else None)
        assert answer.status == 401, (method, path, answer)
        assert answer.body["error"]["code"] == "unauthorized"
        assert job["id"] not in json.dumps(answer.body)
    # Nothing was changed, paused, triggered or deleted.
    assert gateway("GET", f"/v1/jobs/{job['id']}", bearer(token)).body == job
    runs = gateway("GET", f"/v1/jobs/{job['id']}/runs", bearer(token)).body["runs"]
    assert [r["run_id"] for r in runs] == [run["run_id"]]


def test_without_authorizer_a_valid_token_reaches_its_own_team_s_data_only(service: JobService) -> None:
    _, alpha = service.create_team("alpha")
    _, beta = service.create_team("beta")
    created = gateway("POST", "/v1/jobs", bearer(alpha), body=JOB)
    assert created.status == 201, created.body
    job_id = created.body["id"]
    assert [j["id"] for j in gateway("GET", "/v1/jobs", bearer(alpha)).body["jobs"]] == [job_id]
    assert gateway("GET", "/v1/jobs", bearer(beta)).body["jobs"] == []
    for method in ("GET", "DELETE"):
        assert gateway(method, f"/v1/jobs/{job_id}", bearer(beta)).status == 404  # as if it did not exist
    assert gateway("GET", f"/v1/jobs/{job_id}", bearer(alpha)).body == created.body


def test_behind_an_authorizer_the_token_is_checked_again_and_must_be_the_vouched_teams(
    service: JobService,
) -> None:
    _, alpha = service.create_team("alpha")
    _, beta = service.create_team("beta")
    job_id = gateway("POST", "/v1/jobs", bearer(alpha), body=JOB).body["id"]
    vouched = {"principalId": "alpha", "team_id": "alpha", "integrationLatency": 4}
    listed = gateway("GET", "/v1/jobs", bearer(alpha), authorizer=vouched)
    assert listed.status == 200 and [j["id"] for j in listed.body["jobs"]] == [job_id]
    # The authorizer's cached Allow is not enough: without the token, or with another team's, 401.
    assert gateway("GET", "/v1/jobs", None, authorizer=vouched).status == 401
    assert gateway("GET", "/v1/jobs", bearer(beta), authorizer=vouched).status == 401
    # A token revoked after the authorizer cached its Allow is refused at once.
    spare = gateway("POST", "/v1/tokens", bearer(alpha), body={"name": "spare", "scope": "read"}).body
    assert gateway("GET", "/v1/jobs", bearer(spare["token"]), authorizer=vouched).status == 200
    assert gateway("DELETE", f"/v1/tokens/{spare['token_id']}", bearer(alpha)).status == 204
    assert gateway("GET", "/v1/jobs", bearer(spare["token"]), authorizer=vouched).status == 401
    # An authorizer context that names no team is no authorizer: the token decides.
    assert gateway("GET", "/v1/jobs", None, authorizer={"principalId": "alpha"}).status == 401
    assert gateway("GET", "/v1/jobs", bearer(alpha), authorizer={}).status == 200
