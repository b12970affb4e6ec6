import json
from typing import Any

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
