import json

from ..lambda_support import LambdaContext, load_handler


def test_api_health_route_answers_through_the_lambda_handler() -> None:
    event = {
        "httpMethod": "GET",
        "path": "/healthz",
        "resource": "/healthz",
        "headers": {},
        "requestContext": {"requestId": "r", "stage": "v1"},
        "queryStringParameters": None,
        "body": None,
        "isBase64Encoded": False,
    }
    response = load_handler("api").handler(event, LambdaContext())
    assert response["statusCode"] == 200 and json.loads(response["body"])["status"] == "ok"


def test_unknown_routes_are_404_not_500() -> None:
    event = {
        "httpMethod": "GET",
        "path": "/nope",
        "resource": "/nope",
        "headers": {},
        "requestContext": {"requestId": "r", "stage": "v1"},
        "queryStringParameters": None,
        "body": None,
        "isBase64Encoded": False,
    }
    assert load_handler("api").handler(event, LambdaContext())["statusCode"] == 404
