"""The API counts every authenticated /v1 request against its team's rate: over it, 429 with ``Retry-After``
and the error shape, before routing. Public paths and requests without a valid token are not counted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from duetime.api import app as api
from duetime.api.service import JobService, hash_token
from duetime.domain.clock import ManualClock
from duetime.domain.models import Team
from duetime.domain.rate_limit import InMemoryRateLimiter
from duetime.domain.tokens import ApiToken

from ..lambda_support import LambdaContext, load_handler

TEAMS = {
    "slow": Team(team_id="slow", api_rate_per_second=0.5, api_burst=3),
    "other": Team(team_id="other", api_rate_per_second=0.5, api_burst=3),
}
CLOCK = ManualClock(datetime(2026, 12, 1, tzinfo=UTC))


class Catalog:
    """Each team's one token (``dt_<team>``), as the authorizer vouches for it and the api function checks."""

    def token_record(self, token_hash: str) -> ApiToken | None:
        teams = {hash_token(f"dt_{team}"): team for team in TEAMS}
        return ApiToken(token_hash, teams[token_hash], 0) if token_hash in teams else None

    def get_team(self, team_id: str) -> Team | None:
        return TEAMS.get(team_id)


@pytest.fixture
def limiter() -> Iterator[InMemoryRateLimiter]:
    unused: Any = None
    catalog: Any = Catalog()
    service = JobService(catalog, unused, unused, CLOCK)
    limiter = InMemoryRateLimiter()
    api.use_service(lambda: service)
    api.use_rate_limiter(lambda: limiter)
    yield limiter
    api.use_service(None)  # type: ignore[arg-type]
    api.use_rate_limiter(None)


def call(method: str, path: str, team: str | None = "slow", token: str | None = None) -> dict[str, Any]:
    """A request as API Gateway passes it on: ``team`` is the one the TeamAuthorizer vouched for, and its
    token (``dt_<team>``) comes along unless ``token`` names another."""
    token = token or (f"dt_{team}" if team else None)
    context: dict[str, Any] = {"requestId": "r", "stage": "v1"}
    if team:
        context["authorizer"] = {"team_id": team}
    event = {
        "httpMethod": method,
        "path": path,
        "resource": path,
        "headers": {"Authorization": f"Bearer {token}"} if token else {},
        "requestContext": context,
        "queryStringParameters": None,
        "body": None,
        "isBase64Encoded": False,
    }
    response: dict[str, Any] = load_handler("api").handler(event, LambdaContext())
    return response


@pytest.mark.usefixtures("limiter")
def test_over_its_rate_a_team_gets_429_with_retry_after_and_the_error_shape() -> None:
    # PUT /v1/jobs answers 405 after authentication: a request that needs no store to be counted.
    assert [call("PUT", "/v1/jobs")["statusCode"] for _ in range(3)] == [405, 405, 405]
    refused = call("PUT", "/v1/jobs")
    assert refused["statusCode"] == 429
    assert refused["multiValueHeaders"] == {"Content-Type": ["application/json"], "Retry-After": ["2"]}
    error = json.loads(refused["body"])["error"]
    assert error["code"] == "rate_limited"
    assert error["message"] == (
        "too many requests: team slow may make 0.5 requests a second (3 at once); try again in 2 s"
    )
    CLOCK.advance(1.5)
    assert call("GET", "/v1/nowhere")["multiValueHeaders"]["Retry-After"] == ["1"]
    CLOCK.advance(0.5)
    assert call("PUT", "/v1/jobs")["statusCode"] == 405  # waited as told
    assert call("PUT", "/v1/jobs", team="other")["statusCode"] == 405  # another team: its own bucket


@pytest.mark.usefixtures("limiter")
def test_public_paths_and_requests_without_a_valid_token_are_not_counted() -> None:
    for _ in range(10):
        assert call("GET", "/healthz")["statusCode"] == 200
        assert call("GET", "/v1/openapi.json")["statusCode"] == 200
        assert call("GET", "/v1/jobs", team=None, token="dt_nobody")["statusCode"] == 401
        assert call("GET", "/v1/jobs", team=None)["statusCode"] == 401
    assert [call("PUT", "/v1/jobs")["statusCode"] for _ in range(4)] == [405, 405, 405, 429]


def test_the_document_lists_429_with_retry_after_on_every_operation_that_takes_a_token() -> None:
    document = json.loads(api.openapi_document())
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if "security" not in operation:  # a public operation (healthz, this document)
                assert "429" not in operation["responses"], (method, path)
                continue
            assert [set(s) for s in operation["security"]] == [{"bearerAuth"}], (method, path)
            limited = operation["responses"]["429"]
            assert "API rate" in limited["description"]
            assert limited["headers"]["Retry-After"]["schema"] == {"type": "integer", "minimum": 1}
