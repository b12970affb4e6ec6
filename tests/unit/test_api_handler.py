import json
import re
from collections.abc import Iterator
from typing import Any
from zoneinfo import available_timezones

import pytest

from duetime.api import app as api
from duetime.api import request_context
from duetime.api.authorizer import request_caller
from duetime.api.service import JobService, hash_token
from duetime.domain.errors import Unauthorized
from duetime.domain.job_history import token_id
from duetime.domain.models import Team
from duetime.domain.tokens import ApiToken, TokenScope

from ..lambda_support import LambdaContext, load_handler


def api_event(path: str) -> dict[str, Any]:
    return {
        "httpMethod": "GET",
        "path": path,
        "resource": path,
        "headers": {},
        "requestContext": {"requestId": "r", "stage": "v1"},
        "queryStringParameters": None,
        "body": None,
        "isBase64Encoded": False,
    }


def test_api_health_route_answers_through_the_lambda_handler() -> None:
    response = load_handler("api").handler(api_event("/healthz"), LambdaContext())
    assert response["statusCode"] == 200 and json.loads(response["body"])["status"] == "ok"


def test_requests_without_a_token_are_401_in_the_error_shape() -> None:
    response = load_handler("api").handler(api_event("/v1/jobs"), LambdaContext())
    assert response["statusCode"] == 401
    assert json.loads(response["body"])["error"]["code"] == "unauthorized"


# --- who the request acts for: the authorizer's team, else the token checked here --------------------------


class Catalog:
    """The two lookups authentication makes: a token's hash, a team."""

    def __init__(self, teams: dict[str, str]) -> None:  # token -> team id
        self.tokens = {hash_token(token): team for token, team in teams.items()}

    def token_record(self, token_hash: str) -> ApiToken | None:
        return ApiToken(token_hash, self.tokens[token_hash], 0) if token_hash in self.tokens else None

    def get_team(self, team_id: str) -> Team | None:
        return Team(team_id=team_id) if team_id in self.tokens.values() else None


def team_service() -> JobService:
    """A service whose catalog knows two teams' tokens; authentication uses nothing else."""
    catalog: Any = Catalog({"dt_alpha": "alpha", "dt_beta": "beta"})
    unused: Any = None
    return JobService(catalog, unused, unused, unused)


SERVICE = team_service()


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(request_context, "_service_factory", lambda: SERVICE)
    api.service.cache_clear()
    yield
    api.service.cache_clear()


def gateway_event(authorizer: Any = None) -> dict[str, Any]:
    """The request context API Gateway sends to /v1/{proxy+}: ``authorizer`` only when an authorizer ran."""
    context: dict[str, Any] = {"requestId": "r", "stage": "v1-stage", "resourcePath": "/v1/{proxy+}"}
    return {"requestContext": context if authorizer is None else {**context, "authorizer": authorizer}}


NOT_A_VALID_TOKEN = [None, "", "Bearer", "Bearer  ", "Basic dt_alpha", "dt_alpha", "Bearer dt_al", "Bearer x"]
NO_VOUCHED_TEAM = [None, {}, {"principalId": "alpha"}, {"team_id": ""}, {"team_id": 7}, "x"]


@pytest.mark.parametrize("authorization", NOT_A_VALID_TOKEN)
@pytest.mark.parametrize("authorizer", [*NO_VOUCHED_TEAM, {"team_id": "alpha"}])
def test_a_request_without_a_valid_token_is_unauthorized_whatever_the_authorizer_said(
    authorization: str | None, authorizer: Any
) -> None:
    with pytest.raises(Unauthorized):
        request_caller(SERVICE, gateway_event(authorizer), authorization)


@pytest.mark.parametrize("authorizer", [None, {}, {"principalId": "x", "integrationLatency": 3}])
def test_a_valid_token_names_its_team_and_itself(authorizer: Any) -> None:
    assert request_caller(SERVICE, gateway_event(authorizer), "Bearer dt_alpha").team.team_id == "alpha"
    caller = request_caller(SERVICE, gateway_event(authorizer), "bearer  dt_beta ")
    assert caller.team.team_id == "beta" and caller.token.token_id == token_id(hash_token("dt_beta"))


def test_behind_the_authorizer_the_token_is_still_checked_and_must_be_the_vouched_teams() -> None:
    """The authorizer's cached Allow is not enough: a token revoked since (here: never known) is refused, and
    a vouched team that is not the token's is refused."""
    vouched = {"principalId": "beta", "team_id": "beta", "integrationLatency": 12}
    assert request_caller(SERVICE, gateway_event(vouched), "Bearer dt_beta").team.team_id == "beta"
    with pytest.raises(Unauthorized):
        request_caller(SERVICE, gateway_event(vouched), None)
    with pytest.raises(Unauthorized):
        request_caller(SERVICE, gateway_event(vouched), "Bearer dt_alpha")


def test_a_request_is_attributed_to_its_tokens_id_never_the_token() -> None:
    own_id = token_id(hash_token("dt_alpha"))
    assert own_id.startswith("tok_") and len(own_id) == 16 and "dt_alpha" not in own_id
    assert request_caller(SERVICE, gateway_event(None), "Bearer dt_alpha").token.token_id == own_id
    assert request_caller(SERVICE, gateway_event(None), "bearer  dt_alpha ").token.token_id == own_id


def test_a_token_from_before_names_and_scopes_is_an_admin_token() -> None:
    caller = request_caller(SERVICE, gateway_event(None), "Bearer dt_alpha")
    assert caller.token.scope is TokenScope.ADMIN and caller.token.name == "token"


@pytest.mark.usefixtures("served")
def test_the_api_handler_answers_401_to_a_gateway_request_without_authorizer_or_valid_token() -> None:
    for headers in ({}, {"Authorization": "Bearer dt_nope"}, {"Authorization": "Basic dt_alpha"}):
        event = {
            **api_event("/v1/jobs"),
            **gateway_event(),
            "resource": "/v1/{proxy+}",
            "pathParameters": {"proxy": "jobs"},
            "headers": headers,
        }
        response = load_handler("api").handler(event, LambdaContext())
        assert response["statusCode"] == 401, (headers, response)
        assert json.loads(response["body"])["error"]["code"] == "unauthorized"


def test_an_undeclared_method_on_a_public_path_is_405_with_allow() -> None:
    for method, path in (("TRACE", "/healthz"), ("POST", "/healthz"), ("DELETE", "/v1/openapi.json")):
        response = load_handler("api").handler({**api_event(path), "httpMethod": method}, LambdaContext())
        assert response["statusCode"] == 405, (method, path, response)
        assert response["multiValueHeaders"]["Allow"] == ["GET"]
        assert json.loads(response["body"])["error"]["code"] == "method_not_allowed"


def openapi() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(api.openapi_document())
    return document


def schema(name: str) -> dict[str, Any]:
    found: dict[str, Any] = openapi()["components"]["schemas"][name]
    return found


def test_the_document_declares_405_and_413_on_every_operation() -> None:
    for path, operations in openapi()["paths"].items():
        for method, operation in operations.items():
            assert {"405", "413"} <= set(operation["responses"]), (method, path)


def test_the_document_states_the_constraints_the_api_enforces() -> None:
    cron = schema("CronSchedule")["properties"]
    assert cron["cron"]["minLength"] == 1 and "pattern" in cron["cron"]
    assert "pattern" in cron["timezone"] and cron["timezone"]["maxLength"]
    assert "pattern" in schema("RateSchedule")["properties"]["rate"]
    target = schema("HttpTarget")["properties"]
    assert "pattern" in target["url"]
    assert target["headers"]["additionalProperties"] is False  # names must match the pattern
    [(name, value)] = target["headers"]["patternProperties"].items()
    assert re.search(name, "X-Api-Key") and not re.search(name, "X\nB") and "pattern" in value
    assert "***" in target["headers"]["description"]  # the redaction rule
    load = openapi()["paths"]["/v1/load"]["get"]
    assert "after" in load["description"] and "24 hours" in load["description"]


def test_what_the_document_allows_is_what_the_models_accept() -> None:
    cron = re.compile(schema("CronSchedule")["properties"]["cron"]["pattern"])
    assert not cron.search("") and not cron.search("0 0 * *") and not cron.search("0 0 * * * *")
    assert cron.search("0 0 * * *") and cron.search("@daily") and cron.search(" */5  1-3 * jan MON ")
    zone = re.compile(schema("CronSchedule")["properties"]["timezone"]["pattern"])
    assert all(zone.search(name) for name in available_timezones())
    rate = re.compile(schema("RateSchedule")["properties"]["rate"]["pattern"])
    assert rate.search("5 minutes") and rate.search("1 day") and not rate.search("0 minutes")
    assert not rate.search("-1 minutes")


# --- the body as API Gateway hands it on: base64 when it took it for binary, any bytes a client sent -------


def body_event(body: str | None, base64_encoded: bool) -> dict[str, Any]:
    return {
        **api_event("/v1/openapi.json"),
        "httpMethod": "POST",
        "headers": {"Content-Type": "application/json"},
        "body": body,
        "isBase64Encoded": base64_encoded,
    }


@pytest.mark.parametrize(
    ("body", "base64_encoded", "message"),
    [
        ("//79ew==", True, "the body is not UTF-8 text (JSON is UTF-8, RFC 8259)"),  # \xff\xfe{
        ("\udcff{}", False, "the body is not UTF-8 text"),  # lone surrogates: what a lenient decoder makes
        ("not base64!", True, "the body is marked base64 but is not base64"),
    ],
)
def test_a_body_that_is_not_utf8_text_is_a_400_never_a_crash(
    body: str, base64_encoded: bool, message: str
) -> None:
    response = load_handler("api").handler(body_event(body, base64_encoded), LambdaContext())
    assert response["statusCode"] == 400, response
    assert json.loads(response["body"])["error"] == {"code": "bad_request", "message": message}


def test_a_base64_encoded_body_is_read_as_the_text_it_encodes() -> None:
    """A JSON body API Gateway took for binary reaches the route as its text: here POST on a GET-only public
    path, so the answer (405) shows the body passed the size, media type and UTF-8 checks."""
    import base64

    encoded = base64.b64encode(json.dumps({"name": "ü" * 10}).encode()).decode()
    response = load_handler("api").handler(body_event(encoded, True), LambdaContext())
    assert response["statusCode"] == 405, response


def test_the_size_limit_counts_the_bytes_a_base64_body_decodes_to() -> None:
    import base64

    at_limit = base64.b64encode(b'"' + b"a" * (api.MAX_BODY_BYTES - 2) + b'"').decode()  # 4/3 longer as text
    over = base64.b64encode(b"a" * (api.MAX_BODY_BYTES + 1)).decode()
    assert load_handler("api").handler(body_event(at_limit, True), LambdaContext())["statusCode"] == 405
    assert load_handler("api").handler(body_event(over, True), LambdaContext())["statusCode"] == 413
