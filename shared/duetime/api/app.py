"""The API's app: powertools' resolver with the guard before every route (``admit``), the checks before
routing (size, media type, JSON that would break a parser), the error answers, and the routes of each
resource included (``duetime.api.routes``). ``handle`` is the api function's entry."""

from __future__ import annotations

import base64
import binascii
import json
import re
import sys
import threading
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Route
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from duetime.api.access import RouteGuardedResolver
from duetime.api.authorizer import request_caller
from duetime.api.openapi_doc import openapi_document as document_of
from duetime.api.request_context import (
    check_rate,
    check_scope,
    forget_request,
    rate_limiter,
    remember_caller,
    service,
    use_defaults,
    use_rate_limiter,
    use_service,
)
from duetime.api.request_path import decoded_path
from duetime.api.responses import JSON, NoRoute, error_response
from duetime.api.routes import calendars, jobs, load, meta, runs, team
from duetime.domain.errors import (
    ApiError,
    BadRequest,
    InvalidInput,
    MethodNotAllowed,
    PayloadTooLarge,
    UnsupportedMediaType,
    field_path,
)
from duetime.domain.tokens import TokenScope

MAX_BODY_BYTES = 64 * 1024


# Deeper JSON is refused before anything parses it: Python's parser recurses once a level (at about 1,000 it
# raises RecursionError), and so do pydantic and the encoders a body passes through. A job is 4 levels deep;
# a trigger body or an EventBridge detail is JSON of the team's, rarely past 10.
MAX_JSON_DEPTH = 64


_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.?)*+(?:"|\Z)', re.DOTALL)  # unterminated: to the end


_JSON_BRACKET = re.compile(r"[\[\]{}]")


app = RouteGuardedResolver(enable_validation=True, debug=False)  # debug prints each event: its token


# The resolver keeps the request it is answering on itself (its current event, route and context), so it
# answers one request at a time. On Lambda an environment never has two; ``duetime local`` serves requests
# on threads of one process, where two at once crossed (a runs listing answered with the history's model).
_one_request_at_a_time = threading.Lock()


def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The api Lambda's entry: the size limit and the body's media type come before anything else; who may
    reach the route comes after routing and before the route's validation (``admit``)."""
    with _one_request_at_a_time:
        return _handle(event, context)


def _handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    content_type = (headers.get("content-type") or JSON).split(";")[0].strip().lower()
    try:
        body = body_text(event)
        if body and content_type != JSON:
            raise UnsupportedMediaType("send the body as application/json", "Content-Type")
    except ApiError as error:
        return {
            "statusCode": error.status,
            "headers": {"Content-Type": JSON, **error.headers()},
            "body": json.dumps(error.body()),
            "isBase64Encoded": False,
        }
    try:
        path = decoded_path(event.get("path") or "/")
        return app.resolve({**event, "path": path, "body": body or None, "isBase64Encoded": False}, context)
    finally:
        app.context.clear()
        forget_request()


def body_text(event: dict[str, Any]) -> str:
    """The request's body as text, the one form every route reads: base64 decoded when API Gateway encoded
    it (``isBase64Encoded``, a body it took for binary), at most ``MAX_BODY_BYTES`` (else 413), and UTF-8
    (else 400: JSON is UTF-8, RFC 8259, and a body that is not would fail whatever reads it)."""
    body = event.get("body") or ""
    try:
        raw = base64.b64decode(body, validate=True) if event.get("isBase64Encoded") else body.encode()
    except UnicodeEncodeError:  # a string holding lone surrogates: no bytes on the wire are that
        raise BadRequest("the body is not UTF-8 text") from None
    except (binascii.Error, ValueError):
        raise BadRequest("the body is marked base64 but is not base64") from None
    if len(raw) > MAX_BODY_BYTES:
        raise PayloadTooLarge(f"request bodies are limited to {MAX_BODY_BYTES} bytes")
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise BadRequest("the body is not UTF-8 text (JSON is UTF-8, RFC 8259)") from None


@app.before_route
def admit(route: Route, needed: TokenScope | None) -> Response[Any] | None:
    """Who may reach ``route``, the one the resolver matched, which needs ``needed`` (``duetime.api.access``):
    a public route anyone; any other a valid token (the team the TeamAuthorizer vouched for on API Gateway;
    where no authorizer runs, LocalStack and ``duetime local``, the token is checked here), 401 otherwise;
    then the team's API rate (429); then the scope (403). A refused request has changed nothing and learnt
    nothing of its body, which is read (``json_body_problem``) only once the request is let in."""
    try:
        if needed is not None:
            event = app.current_event
            caller = request_caller(service(), event.raw_event, event.headers.get("authorization"))
            check_rate(caller.team)
            check_scope(caller, needed, f"{route.method} {event.path}")
            remember_caller(caller)
        body = app.current_event.body
        problem = json_body_problem(body) if isinstance(body, str) and body else None
        if problem:
            raise BadRequest(problem)
    except ApiError as exc:
        return error_response(exc)
    return None


def json_body_problem(body: str) -> str | None:
    """Why ``body`` would break a JSON parser rather than merely fail to parse, else None: nested deeper
    than ``MAX_JSON_DEPTH`` (counted without parsing, so without recursion), holding an integer longer
    than Python reads from text (``sys.get_int_max_str_digits``; ``json.loads`` raises ValueError, not a
    decode error), or a ``NaN`` / ``Infinity`` that Python reads and JSON does not have. Malformed JSON is
    left to the route's validation (400, "not valid JSON")."""
    depth = deepest = 0
    for bracket in _JSON_BRACKET.findall(_JSON_STRING.sub("", body)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    if deepest > MAX_JSON_DEPTH:
        return f"the body's JSON is nested deeper than {MAX_JSON_DEPTH} levels"
    try:
        json.loads(body, parse_constant=_refuse_constant)
    except _NotJson as exc:
        return str(exc)
    except json.JSONDecodeError:
        return None
    except ValueError:
        return f"the body holds an integer of more than {sys.get_int_max_str_digits()} digits"
    return None


class _NotJson(ValueError):
    pass


def _refuse_constant(name: str) -> None:
    """``NaN``, ``Infinity`` and ``-Infinity``: Python reads them, JSON (RFC 8259) has no such values, and a
    body holding one would be passed on to a target as text no JSON parser takes."""
    raise _NotJson(f"the body holds {name}, which is not JSON (RFC 8259 has no NaN or Infinity)")


def _api_error(exc: ApiError) -> Response[Any]:
    return error_response(exc)


def _invalid_request(exc: RequestValidationError) -> Response[Any]:
    errors = exc.errors()
    first = errors[0] if errors else {"loc": (), "msg": "invalid request", "type": ""}
    if first.get("type") == "json_invalid":
        return error_response(BadRequest("the body is not valid JSON"))
    field = field_path(tuple(first.get("loc", ())))
    message = str(first.get("msg", "invalid")).removeprefix("Value error, ")
    return error_response(InvalidInput(f"{field or 'body'}: {message}", field or None))


app.exception_handler(ApiError)(_api_error)


app.exception_handler(RequestValidationError)(_invalid_request)


@app.not_found
def _no_route(exc: NotFoundError) -> Response[Any]:
    """No route for this method and path: 405 with ``Allow`` when the path has routes for other methods
    (RFC 9110), else 404. Behind ``handle``, so a token is checked first (except on the public paths)."""
    event = app.current_event
    allowed = allowed_methods(event.path)
    if allowed:
        listed = ", ".join(allowed)
        refused = MethodNotAllowed(f"{event.http_method} is not allowed on {event.path}; it answers {listed}")
        return error_response(refused, {"Allow": listed})
    return error_response(NoRoute("no such route"))


def allowed_methods(path: str) -> list[str]:
    """The methods routed for ``path``, matched with the resolver's own route patterns."""
    return sorted({route.method for route in app.routes() if route.rule.match(path)})


# The routes, a module a resource, in the order they are matched (a job's key such as "runs" is matched by the
# key routes before /v1/jobs/<job_id>/...) and documented: the public ones first (on the app itself:
# ``routes.meta``), then each resource's router.
meta.include(app)
for _routes in (jobs, team, runs, load, calendars):
    app.include_router(_routes.router)


def openapi_document() -> str:
    """The API's OpenAPI document (``duetime.api.openapi_doc``)."""
    return document_of(app)


__all__ = [
    "MAX_BODY_BYTES",
    "app",
    "handle",
    "openapi_document",
    "rate_limiter",
    "service",
    "use_defaults",
    "use_rate_limiter",
    "use_service",
]
