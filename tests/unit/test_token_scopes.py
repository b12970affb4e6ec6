"""What each token scope may do: declared once by each route, enforced on the route the router matched,
stated in the OpenAPI document."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from duetime.api import app as api
from duetime.api import request_context
from duetime.api.access import scope_needed
from duetime.api.service import JobService, hash_token
from duetime.domain.errors import ApiError
from duetime.domain.models import Team
from duetime.domain.tokens import ApiToken, TokenScope

from ..lambda_support import api_request

READ, OPERATE, ADMIN = TokenScope.READ, TokenScope.OPERATE, TokenScope.ADMIN

# The spec, written out: every operation of the API and the scope it needs.
EXPECTED = {
    ("GET", "/v1/jobs"): READ,
    ("POST", "/v1/jobs"): ADMIN,
    ("GET", "/v1/jobs/{job_id}"): READ,
    ("PATCH", "/v1/jobs/{job_id}"): ADMIN,
    ("DELETE", "/v1/jobs/{job_id}"): ADMIN,
    ("GET", "/v1/jobs/by-key/{key}"): READ,
    ("PUT", "/v1/jobs/by-key/{key}"): ADMIN,
    ("DELETE", "/v1/jobs/by-key/{key}"): ADMIN,
    ("GET", "/v1/jobs/by-key/{area}/{key}"): READ,
    ("PUT", "/v1/jobs/by-key/{area}/{key}"): ADMIN,
    ("DELETE", "/v1/jobs/by-key/{area}/{key}"): ADMIN,
    ("POST", "/v1/jobs/{job_id}/pause"): OPERATE,
    ("POST", "/v1/jobs/{job_id}/resume"): OPERATE,
    ("POST", "/v1/jobs/{job_id}/trigger"): OPERATE,
    ("POST", "/v1/jobs/{job_id}/backfill"): OPERATE,
    ("GET", "/v1/jobs/{job_id}/runs"): READ,
    ("GET", "/v1/jobs/{job_id}/preview"): READ,
    ("GET", "/v1/jobs/{job_id}/history"): READ,
    ("GET", "/v1/jobs/{job_id}/fires"): READ,
    ("GET", "/v1/audit"): READ,
    ("GET", "/v1/jobs/{job_id}/signing-key"): ADMIN,
    ("GET", "/v1/runs/{run_id}"): READ,
    ("POST", "/v1/runs/{run_id}/retry"): OPERATE,
    ("POST", "/v1/runs/{run_id}/cancel"): OPERATE,
    ("GET", "/v1/team"): READ,
    ("PUT", "/v1/team/aws-role"): ADMIN,
    ("DELETE", "/v1/team/aws-role"): ADMIN,
    ("GET", "/v1/tokens"): ADMIN,
    ("POST", "/v1/tokens"): ADMIN,
    ("GET", "/v1/token"): READ,
    ("DELETE", "/v1/tokens/{token_id}"): ADMIN,
    ("GET", "/v1/load"): READ,
    ("POST", "/v1/calendars"): ADMIN,
    ("GET", "/v1/calendars"): READ,
    ("GET", "/v1/calendars/{name}"): READ,
    ("PUT", "/v1/calendars/{name}"): ADMIN,
    ("DELETE", "/v1/calendars/{name}"): ADMIN,
    ("GET", "/v1/calendars/{name}/history"): READ,
}


def enforced() -> dict[tuple[str, str], TokenScope | None]:
    """Each route of the app (as the router holds it) and the scope a request it matched needs."""
    return {(route.method, route.openapi_path): scope_needed(route) for route in api.app.routes()}


def private_operations() -> dict[tuple[str, str], dict[str, Any]]:
    document = json.loads(api.openapi_document())
    return {
        (method.upper(), path): operation
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if operation.get("security")
    }


def test_every_operation_of_the_api_has_its_scope_in_the_spec_above() -> None:
    assert set(private_operations()) == set(EXPECTED)


@pytest.mark.parametrize(("method", "path"), sorted(EXPECTED))
def test_the_scope_enforced_is_the_one_the_document_states(method: str, path: str) -> None:
    assert enforced()[method, path] is EXPECTED[method, path]
    assert private_operations()[method, path]["security"] == [{"bearerAuth": [str(EXPECTED[method, path])]}]


def test_every_route_is_in_the_spec_or_public() -> None:
    public = {route: scope for route, scope in enforced().items() if route not in EXPECTED}
    assert public == {
        ("GET", "/healthz"): None,
        ("GET", "/v1/openapi.json"): None,
        ("GET", "/console"): None,
        ("GET", "/console/{name}"): None,
    }


class _Route:
    def __init__(self, security: Any) -> None:
        self.security = security


@pytest.mark.parametrize(
    "security",
    [
        None,
        [{"bearerAuth": []}],
        [{"bearerAuth": ["root"]}],
        [{"apiKey": ["read"]}],
        [{"bearerAuth": ["read", "x"]}],
    ],
)
def test_a_route_that_declares_no_known_scope_needs_an_admin_token(security: Any) -> None:
    assert scope_needed(_Route(security)) is ADMIN  # type: ignore[arg-type]


def test_scopes_nest() -> None:
    assert ADMIN.allows(OPERATE) and ADMIN.allows(READ) and OPERATE.allows(READ)
    assert not READ.allows(OPERATE) and not OPERATE.allows(ADMIN) and not READ.allows(ADMIN)
    assert all(scope.allows(scope) for scope in TokenScope)


# --- through the api function: refused before routing and validation ----------------------------------------


class Catalog:
    """The two lookups authentication makes, for one team with a token of each scope."""

    def __init__(self) -> None:
        self.tokens = {hash_token(f"dt_{scope}"): scope for scope in TokenScope}

    def token_record(self, token_hash: str) -> ApiToken | None:
        scope = self.tokens.get(token_hash)
        return ApiToken(token_hash, "alpha", 0, name=f"{scope}-bot", scope=scope) if scope else None

    def get_team(self, team_id: str) -> Team | None:
        return Team(team_id=team_id) if team_id == "alpha" else None


class Limiter:
    def take(self, team: Team, now: Any) -> Any:
        return type("Decision", (), {"allowed": True, "retry_after_seconds": 0})()


class Clock:
    def now(self) -> Any:
        return None


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    unused: Any = None
    catalog: Any = Catalog()
    service = JobService(catalog, unused, unused, Clock())  # type: ignore[arg-type]
    monkeypatch.setattr(request_context, "_service_factory", lambda: service)
    monkeypatch.setattr(request_context, "_rate_limiter_factory", lambda: Limiter())
    api.service.cache_clear()
    api.rate_limiter.cache_clear()
    yield
    api.service.cache_clear()
    api.rate_limiter.cache_clear()


def request(method: str, path: str, token: str, body: str | None = None) -> dict[str, Any]:
    return api_request(method, path, token, body)


@pytest.mark.usefixtures("served")
@pytest.mark.parametrize(
    ("token", "method", "path", "needed"),
    [
        ("dt_read", "POST", "/v1/jobs/j-1/trigger", "operate"),
        ("dt_read", "POST", "/v1/runs/r-1/cancel", "operate"),
        ("dt_read", "GET", "/v1/jobs/j-1/signing-key", "admin"),
        ("dt_read", "GET", "/v1/tokens", "admin"),
        ("dt_operate", "POST", "/v1/jobs", "admin"),
        ("dt_operate", "DELETE", "/v1/jobs/j-1", "admin"),
        ("dt_operate", "PATCH", "/v1/jobs/j-1", "admin"),
        ("dt_operate", "PUT", "/v1/team/aws-role", "admin"),
        ("dt_operate", "POST", "/v1/tokens", "admin"),
        ("dt_operate", "DELETE", "/v1/tokens/tok_0123456789ab", "admin"),
        ("dt_operate", "POST", "/v1/calendars", "admin"),
        ("dt_operate", "PUT", "/v1/calendars/fr", "admin"),
        ("dt_operate", "DELETE", "/v1/calendars/fr", "admin"),
    ],
)
def test_a_token_is_refused_what_its_scope_does_not_allow_with_403_naming_the_scope_needed(
    token: str, method: str, path: str, needed: str
) -> None:
    # The body is not even JSON: the scope is checked first, so the answer tells nothing about the body.
    response = request(method, path, token, body="{not json" if method in {"POST", "PATCH", "PUT"} else None)
    assert response["statusCode"] == 403, response
    error = json.loads(response["body"])["error"]
    assert error["code"] == "forbidden" and error["field"] == "scope"
    have = token.removeprefix("dt_")
    assert f"has scope {have}" in error["message"] and f"needs {needed}" in error["message"]
    assert f"'{have}-bot'" in error["message"]


@pytest.mark.usefixtures("served")
@pytest.mark.parametrize("token", ["dt_read", "dt_operate", "dt_admin"])
def test_every_scope_may_ask_which_token_it_is(token: str) -> None:
    response = request("GET", "/v1/token", token)
    assert response["statusCode"] == 200, response
    shown = json.loads(response["body"])
    scope = token.removeprefix("dt_")
    assert shown["scope"] == scope and shown["name"] == f"{scope}-bot" and shown["in_use"] is True
    assert shown["token_id"] == f"tok_{hash_token(token)[:12]}" and token not in response["body"]


@pytest.mark.usefixtures("served")
@pytest.mark.parametrize(
    ("token", "body", "status"),
    [
        ("dt_operate", None, 201),
        ("dt_operate", "{}", 201),
        ("dt_operate", '{"body": null}', 201),
        ("dt_operate", '{"body": "rm -rf"}', 403),
        ("dt_operate", '{"body": {"amount": 1000000}}', 403),
        ("dt_operate", '{"body": ""}', 403),
        ("dt_admin", '{"body": "rm -rf"}', 201),
    ],
)
def test_a_trigger_with_a_body_of_its_own_needs_an_admin_token(
    monkeypatch: pytest.MonkeyPatch, token: str, body: str | None, status: int
) -> None:
    """An operate token runs a job as it is; a body in place of the job's changes what the job sends."""
    triggered: list[Any] = []

    def trigger(self: JobService, team: Team, job_id: str, request: Any = None) -> Any:
        triggered.append(request)
        raise _Triggered("triggered")

    monkeypatch.setattr(JobService, "trigger", trigger)
    response = request("POST", "/v1/jobs/j-1/trigger", token, body)
    assert response["statusCode"] == (299 if status == 201 else status), response
    if status == 403:
        error = json.loads(response["body"])["error"]
        assert error["code"] == "forbidden" and error["field"] == "body" and "needs admin" in error["message"]
        assert triggered == []
    else:
        assert len(triggered) == 1


class _Triggered(ApiError):
    status, code = 299, "triggered"
