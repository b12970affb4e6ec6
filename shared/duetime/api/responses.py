"""How the API answers errors, and the answers each operation documents (every error an ``ErrorOut``)."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from duetime.api.schemas import ErrorOut
from duetime.domain.errors import ApiError

JSON = "application/json"


def error_response(exc: ApiError, headers: dict[str, str] | None = None) -> Response[Any]:
    return Response(
        status_code=exc.status,
        content_type=JSON,
        body=json.dumps(exc.body()),
        headers={**exc.headers(), **(headers or {})},
    )


def responses(success: int, model: Any, *errors: int) -> dict[int, OpenAPIResponse]:
    """An operation's answers: ``success`` with ``model``, the errors every operation may give, and
    ``errors``."""
    described: dict[int, OpenAPIResponse] = {
        success: {"description": SUCCESS_TEXT[success], "content": {JSON: {"model": model}}}
        if model is not None
        else {"description": "No content", "content": {}},
    }
    for code in (400, 401, 403, 405, 413, 415, 422, 429, *errors):
        described[code] = documented_error(code)
    return described


def documented_error(code: int) -> OpenAPIResponse:
    described: OpenAPIResponse = {"description": ERROR_TEXT[code], "content": {JSON: {"model": ErrorOut}}}
    if code == 405:
        described["headers"] = {
            "Allow": {"description": "the methods this path answers", "schema": {"type": "string"}}
        }
    if code == 429:
        described["headers"] = {
            "Retry-After": {
                "description": "over the team's API rate: whole seconds until a request would be allowed",
                "schema": {"type": "integer", "minimum": 1},
            }
        }
    return described


def public_responses(described: dict[int, OpenAPIResponse]) -> dict[int, OpenAPIResponse]:
    """A route without a token: its own answers and the errors any request may get before routing."""
    return {**described, **{code: documented_error(code) for code in (405, 413, 415, 422)}}


SUCCESS_TEXT = {200: "OK", 201: "Created", 202: "Accepted"}


ERROR_TEXT = {
    400: "Malformed request",
    401: "Missing, unknown or revoked token",
    403: "The token's scope does not allow this request (`forbidden`, naming the scope it needs), or the "
    "team is disabled",
    404: "No such job, run or calendar (in your team)",
    405: "Method not allowed on this path (after authentication; `Allow` lists the methods it answers)",
    409: "Conflict",
    412: "`If-Match` names an ETag the job is no longer at (it changed since you read it): nothing written",
    413: "Body too large",
    415: "The body is not JSON",
    422: "Invalid input (the field is named)",
    429: "Over the team's API rate (`rate_limited`, with `Retry-After`), or a quota used up",
}


class NoRoute(ApiError):
    status, code = 404, "not_found"
