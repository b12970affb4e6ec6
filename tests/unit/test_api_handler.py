import json
import re
from typing import Any
from zoneinfo import available_timezones

from duetime import api

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
