"""The REST API (prefix /v1) on powertools' APIGatewayRestResolver. The api Lambda and ``duetime local``
serve this same app. Routes parse and shape; ``JobService`` does the work."""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
import sys
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Route
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer, Tag
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path, Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from duetime import __version__, build_info
from duetime.api.access import PUBLIC, RouteGuardedResolver, needs
from duetime.api.authorizer import request_caller
from duetime.api.calendar_schemas import CalendarChangeOut, CalendarHistory, CalendarList, CalendarOut
from duetime.api.console_files import SECURITY_HEADERS, console_file
from duetime.api.fires import AUDIT_JOBS_PER_PAGE, MAX_AUDIT_JOBS_PER_PAGE, FireLedgerService
from duetime.api.request_path import decoded_path
from duetime.api.schemas import (
    AuditOut,
    AwsRoleIn,
    BackfillOut,
    ErrorOut,
    FiresOut,
    Health,
    JobChangeOut,
    JobHistory,
    JobList,
    JobOut,
    JobPatch,
    LoadMinute,
    LoadOut,
    PreviewOut,
    RunList,
    RunOut,
    SigningKeyOut,
    SigningKeysOut,
    TeamOut,
    TokenIssued,
    TokenList,
    TokenOut,
    TriggerIn,
)
from duetime.api.service import (
    LOAD_FIRE_TIMES_PER_REQUEST,
    LOAD_JOBS_PER_REQUEST,
    MAX_LOAD_FIRE_TIMES,
    JobService,
)
from duetime.domain.calendars import CalendarSpec, CalendarUpdate
from duetime.domain.errors import (
    ApiError,
    BadRequest,
    Forbidden,
    InvalidInput,
    MethodNotAllowed,
    PayloadTooLarge,
    RateLimited,
    UnsupportedMediaType,
    field_path,
)
from duetime.domain.fire_ledger import DEFAULT_LATE_AFTER_SECONDS, MAX_FIRES
from duetime.domain.job_keys import etag_of
from duetime.domain.labels import LABEL_FILTER_PATTERN
from duetime.domain.models import MAX_BACKFILL_RUNS, BackfillWindow, Job, JobSpec, Team
from duetime.domain.rate_limit import ApiRateLimiter
from duetime.domain.tokens import MAX_TOKENS_PER_TEAM, TRIGGER_BODY_SCOPE, Caller, TokenIn, TokenScope

JSON = "application/json"
MAX_BODY_BYTES = 64 * 1024
# Deeper JSON is refused before anything parses it: Python's parser recurses once a level (at about 1,000 it
# raises RecursionError), and so do pydantic and the encoders a body passes through. A job is 4 levels deep;
# a trigger body or an EventBridge detail is JSON of the team's, rarely past 10.
MAX_JSON_DEPTH = 64
_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.?)*+(?:"|\Z)', re.DOTALL)  # unterminated: to the end
_JSON_BRACKET = re.compile(r"[\[\]{}]")
JobId = Annotated[str, Path(min_length=1, max_length=64)]
RunId = Annotated[str, Path(min_length=1, max_length=128)]
TokenId = Annotated[str, Path(min_length=1, max_length=64)]
CalendarName = Annotated[str, Path(min_length=1, max_length=40)]
# A listing's next_cursor, as this API gives it: URL-safe base64. Its alphabet keeps every URL the document
# allows within API Gateway's 8,192 characters (an edge-optimized API's; a cursor of 2,048 characters each
# percent-encoded as three bytes of UTF-8 would make an 18 KB URL, which API Gateway refuses unanswered).
Cursor = Annotated[
    str | None,
    Query(max_length=2048, pattern=r"^[A-Za-z0-9_-]+={0,2}$", description="a listing's `next_cursor`"),
]

# The app's service and per-team rate limiter, built lazily once: from the factories given with
# ``use_service`` and ``use_rate_limiter`` (tests, duetime local), else from the defaults its Lambda handler
# gives (``use_defaults``: the wiring's). The app never reaches up to the wiring itself.
_service_factory: Callable[[], JobService] | None = None
_rate_limiter_factory: Callable[[], ApiRateLimiter] | None = None
_default_factories: tuple[Callable[[], JobService], Callable[[], ApiRateLimiter]] | None = None


def use_defaults(service: Callable[[], JobService], rate_limiter: Callable[[], ApiRateLimiter]) -> None:
    """The factories the app builds its service and rate limiter from when none was given
    (``functions/api/handler.py`` passes the wiring's)."""
    global _default_factories
    _default_factories = (service, rate_limiter)
    globals()["service"].cache_clear()
    globals()["rate_limiter"].cache_clear()


def _defaults() -> tuple[Callable[[], JobService], Callable[[], ApiRateLimiter]]:
    if _default_factories is None:
        raise RuntimeError(
            "the api has no service: its handler gives the wiring's (use_defaults), tests their own"
        )
    return _default_factories


def use_service(factory: Callable[[], JobService]) -> None:
    """Tell the app how to build its service (lazily, once); the handler and ``duetime local`` call this."""
    global _service_factory
    _service_factory = factory
    service.cache_clear()


def fire_ledger() -> FireLedgerService:
    return FireLedgerService(service())


@functools.cache
def service() -> JobService:
    return (_service_factory or _defaults()[0])()


def use_rate_limiter(factory: Callable[[], ApiRateLimiter] | None) -> None:
    """Tell the app how to build the per-team rate limiter (tests); without one it is the default's."""
    global _rate_limiter_factory
    _rate_limiter_factory = factory
    rate_limiter.cache_clear()


@functools.cache
def rate_limiter() -> ApiRateLimiter:
    return (_rate_limiter_factory or _defaults()[1])()


def check_rate(team: Team, cost: str = "") -> None:
    """Count this request (or one more request's worth of its work, which ``cost`` explains) against its
    team's API rate (on the store's clock); over it, ``RateLimited``."""
    decision = rate_limiter().take(team, service().clock.now())
    if not decision.allowed:
        raise RateLimited(
            f"{cost}too many requests: team {team.team_id} may make {team.api_rate_per_second:g} requests a "
            f"second ({team.api_burst} at once); try again in {decision.retry_after_seconds} s",
            decision.retry_after_seconds,
        )


def _error(exc: ApiError, headers: dict[str, str] | None = None) -> Response[Any]:
    return Response(
        status_code=exc.status,
        content_type=JSON,
        body=json.dumps(exc.body()),
        headers={**exc.headers(), **(headers or {})},
    )


def _responses(success: int, model: Any, *errors: int) -> dict[int, OpenAPIResponse]:
    """An operation's answers: ``success`` with ``model``, the errors every operation may give, and
    ``errors``."""
    described: dict[int, OpenAPIResponse] = {
        success: {"description": _SUCCESS_TEXT[success], "content": {JSON: {"model": model}}}
        if model is not None
        else {"description": "No content", "content": {}},
    }
    for code in (400, 401, 403, 405, 413, 415, 422, 429, *errors):
        described[code] = _error_response(code)
    return described


def _error_response(code: int) -> OpenAPIResponse:
    described: OpenAPIResponse = {"description": _ERROR_TEXT[code], "content": {JSON: {"model": ErrorOut}}}
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


def _public_responses(described: dict[int, OpenAPIResponse]) -> dict[int, OpenAPIResponse]:
    """A route without a token: its own answers and the errors any request may get before routing."""
    return {**described, **{code: _error_response(code) for code in (405, 413, 415, 422)}}


_SUCCESS_TEXT = {200: "OK", 201: "Created", 202: "Accepted"}
_ERROR_TEXT = {
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
            app.context["team"], app.context["caller"] = caller.team, caller
        body = app.current_event.body
        problem = json_body_problem(body) if isinstance(body, str) and body else None
        if problem:
            raise BadRequest(problem)
    except ApiError as exc:
        return _error(exc)
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


def check_scope(caller: Caller, needed: TokenScope, what: str, field: str = "scope") -> None:
    """403 naming the token, its scope and the scope ``what`` needs (the field ``field``), unless the token
    may."""
    if not caller.may(needed):
        token = caller.token
        raise Forbidden(
            f"the token {token.token_id} ({token.name!r}) has scope {token.scope}; {what} needs {needed}: "
            "use a token with that scope (an admin issues one: POST /v1/tokens)",
            field,
        )


def team() -> Team:
    current: Team = app.context["team"]
    return current


def caller() -> Caller:
    current: Caller = app.context["caller"]
    return current


def actor() -> str:
    """The id of the token the request came with (``job_history.token_id``), for the job's history."""
    return caller().token.token_id


def _api_error(exc: ApiError) -> Response[Any]:
    return _error(exc)


def _invalid_request(exc: RequestValidationError) -> Response[Any]:
    errors = exc.errors()
    first = errors[0] if errors else {"loc": (), "msg": "invalid request", "type": ""}
    if first.get("type") == "json_invalid":
        return _error(BadRequest("the body is not valid JSON"))
    field = field_path(tuple(first.get("loc", ())))
    message = str(first.get("msg", "invalid")).removeprefix("Value error, ")
    return _error(InvalidInput(f"{field or 'body'}: {message}", field or None))


app.exception_handler(ApiError)(_api_error)
app.exception_handler(RequestValidationError)(_invalid_request)


class _NoRoute(ApiError):
    status, code = 404, "not_found"


@app.not_found
def _no_route(exc: NotFoundError) -> Response[Any]:
    """No route for this method and path: 405 with ``Allow`` when the path has routes for other methods
    (RFC 9110), else 404. Behind ``handle``, so a token is checked first (except on the public paths)."""
    event = app.current_event
    allowed = allowed_methods(event.path)
    if allowed:
        listed = ", ".join(allowed)
        refused = MethodNotAllowed(f"{event.http_method} is not allowed on {event.path}; it answers {listed}")
        return _error(refused, {"Allow": listed})
    return _error(_NoRoute("no such route"))


def allowed_methods(path: str) -> list[str]:
    """The methods routed for ``path``, matched with the resolver's own route patterns."""
    return sorted({route.method for route in app.routes() if route.rule.match(path)})


# --- routes ----------------------------------------------------------------------------------------------


@app.get(
    "/healthz",
    operation_id="getHealth",
    tags=["meta"],
    responses=_public_responses({200: {"description": "OK", "content": {JSON: {"model": Health}}}}),
    security=PUBLIC,
)
def healthz() -> Health:
    return Health(status="ok", version=build_info.version, commit=build_info.commit())


@app.get(
    "/v1/openapi.json",
    operation_id="getOpenApiDocument",
    tags=["meta"],
    responses=_public_responses({200: {"description": "This document"}}),
    security=PUBLIC,
)
def openapi() -> Response[Any]:
    return Response(status_code=200, content_type=JSON, body=openapi_document())


@app.get("/console", include_in_schema=False, security=PUBLIC)  # powertools routes /console/ here too
def console_root() -> Response[Any]:
    """``/console/`` is the index page; ``/console`` moves there (relative: a stage prefix is kept)."""
    if app.current_event.path.endswith("/"):
        return console("")
    return Response(status_code=301, headers={"Location": "console/", **SECURITY_HEADERS}, body="")


@app.get("/console/<name>", include_in_schema=False, security=PUBLIC)
def console(name: str) -> Response[Any]:
    """The console's static files (``duetime.api.console_files``): public, the page asks for the token."""
    found = console_file(name)
    if found is None:
        return _error(_NoRoute("no such console file"), SECURITY_HEADERS)
    return Response(200, content_type=found.content_type, body=found.body, headers=SECURITY_HEADERS)


TAGS = {
    "jobs": "A team's jobs: create, read, change, pause, delete; their previews, history and load",
    "runs": "A job's runs: trigger, backfill, list, retry, cancel",
    "calendars": "A team's calendars: named days its jobs exclude or count business days by",
    "team": "The caller's team and the IAM role its AWS targets are called under",
    "tokens": "The team's API tokens",
    "meta": "Health and this document (no token needed)",
}
# powertools' own validation-error shapes: duetime answers every error with ErrorOut instead
_UNUSED_DEFAULT_SCHEMAS = ("HTTPValidationError", "ResponseValidationError", "ValidationError")


def openapi_document() -> str:
    """The API's OpenAPI document (served at /v1/openapi.json, kept in docs/openapi.json: ``python -m
    duetime.api.openapi_file``): every operation with a readable ``operationId`` and a tag, every error an
    ``ErrorOut``."""
    text = app.get_openapi_json_schema(
        title="duetime",
        version=__version__,
        description="A distributed job scheduler: jobs (cron in a time zone, rate, or one time) that call "
        "HTTP targets or AWS services (Lambda, SQS, SNS, EventBridge, Step Functions), at least once, with "
        "the run id as idempotency key.",
        tags=[Tag(name=name, description=description) for name, description in TAGS.items()],
        security_schemes={"bearerAuth": HTTPBearer()},
    )
    document = json.loads(text)
    schemas = document.get("components", {}).get("schemas", {})
    for name in _UNUSED_DEFAULT_SCHEMAS:  # in this order: each refers only to the ones after it
        if f'"#/components/schemas/{name}"' not in json.dumps(document):
            schemas.pop(name, None)
    return json.dumps(document, indent=2)


def shown(job: Job) -> JobOut:
    """A job as answers show it, with its success-deadline flag."""
    return JobOut.of(job, service().missing_since([job]).get(job.id))


@app.post(
    "/v1/jobs",
    operation_id="createJob",
    tags=["jobs"],
    responses=_responses(201, JobOut, 409, 429),
    security=needs(TokenScope.ADMIN),
)
def create_job(
    spec: Annotated[JobSpec, Body()],
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key", max_length=255)] = None,
) -> Response[JobOut]:
    body = json.loads(app.current_event.body or "{}")  # re-validated with the clock (``at`` in the past)
    job = service().create_job(team(), body, idempotency_key, actor())
    return Response(status_code=201, content_type=JSON, body=shown(job))


@app.get(
    "/v1/jobs",
    operation_id="listJobs",
    tags=["jobs"],
    responses=_responses(200, JobList),
    security=needs(TokenScope.READ),
    description="Your jobs, a page at a time. `label=key:value` lists those with that label; `q` those with "
    "a word of their name beginning with each word of `q` (case-insensitive; the first 16 words of a name "
    "count). Both together: both must hold. A filtered page may hold fewer than `limit` jobs while "
    "`next_cursor` says more may follow. `last_run=true` adds each job's latest run (`last_run`).",
)
def list_jobs(
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Cursor = None,
    label: Annotated[
        str | None,
        Query(max_length=127, pattern=LABEL_FILTER_PATTERN, description="key:value, e.g. env:prod"),
    ] = None,
    q: Annotated[str | None, Query(max_length=64, description="words the name's words begin with")] = None,
    last_run: Annotated[bool, Query(description="add each job's latest run")] = False,
) -> JobList:
    page = service().list_jobs(team(), limit, cursor, label, q)
    missing = service().missing_since(page.items)
    latest = service().last_runs(page.items) if last_run else {}
    jobs = [JobOut.of(j, missing.get(j.id), latest.get(j.id)) for j in page.items]
    return JobList(jobs=jobs, next_cursor=page.cursor)


# --- jobs by key (``duetime.domain.job_keys``); registered before /v1/jobs/<job_id>/...: a key such as "runs"
# matches those too, and a job id never is "by-key". A key has one or two segments: two routes each.

IfMatch = Annotated[
    str | None,
    Header(
        alias="If-Match",
        max_length=512,
        description="the job's ETag as you read it (`etag`, or the `ETag` header): the write happens only if "
        "the job is still at it (412 otherwise); `*`: any existing job",
    ),
]
KeySegment = Annotated[str, Path(min_length=1, max_length=64)]
_BY_KEY = (
    "Jobs as code: a job is named by its `key`, one or two segments (`nightly-export` or "
    "`billing/nightly-export`)."
)


def _with_etag(job: Job, status: int = 200) -> Response[JobOut]:
    return Response(status_code=status, content_type=JSON, body=shown(job), headers={"ETag": etag_of(job)})


def _get_by_key(key: str) -> Response[JobOut]:
    return _with_etag(service().get_job(team(), service().job_id_by_key(team(), key)))


def _put_by_key(key: str, if_match: str | None) -> Response[JobOut]:
    body = json.loads(app.current_event.body or "{}")
    job, created = service().put_job_by_key(team(), key, body, if_match, actor())
    return _with_etag(job, 201 if created else 200)


def _delete_by_key(key: str, if_match: str | None) -> Response[Any]:
    service().delete_job(team(), service().job_id_by_key(team(), key), actor(), if_match)
    return Response(status_code=204, body="")


_GET_BY_KEY: dict[str, Any] = {
    "tags": ["jobs"],
    "responses": _responses(200, JobOut, 404),
    "security": needs(TokenScope.READ),
    "description": f"{_BY_KEY} The job with the key, with its `ETag`.",
}
_PUT_BY_KEY: dict[str, Any] = {
    "tags": ["jobs"],
    "responses": {
        **_responses(200, JobOut, 404, 409, 412),
        201: {"description": "Created", "content": {JSON: {"model": JobOut}}},
    },
    "security": needs(TokenScope.ADMIN),
    "description": f"{_BY_KEY} Create the job of the key (201), or replace it whole (200; a field left out "
    "takes its default; the same job again writes nothing). With `If-Match`, only if the job is still at "
    "that ETag (412 otherwise, also when no job has the key). The body's `key`, if sent, must be the path's.",
}
_DELETE_BY_KEY: dict[str, Any] = {
    "tags": ["jobs"],
    "responses": _responses(204, None, 404, 409, 412),
    "security": needs(TokenScope.ADMIN),
    "description": f"{_BY_KEY} Delete the job with the key (with `If-Match`: only if it is still at that "
    "ETag).",
}


@app.get("/v1/jobs/by-key/<key>", operation_id="getJobByKey", **_GET_BY_KEY)
def get_job_by_key(key: KeySegment) -> Response[JobOut]:
    return _get_by_key(key)


@app.get("/v1/jobs/by-key/<area>/<key>", operation_id="getJobByAreaKey", **_GET_BY_KEY)
def get_job_by_area_key(area: KeySegment, key: KeySegment) -> Response[JobOut]:
    return _get_by_key(f"{area}/{key}")


@app.put("/v1/jobs/by-key/<key>", operation_id="putJobByKey", **_PUT_BY_KEY)
def put_job_by_key(
    key: KeySegment, spec: Annotated[JobSpec, Body()], if_match: IfMatch = None
) -> Response[JobOut]:
    return _put_by_key(key, if_match)


@app.put("/v1/jobs/by-key/<area>/<key>", operation_id="putJobByAreaKey", **_PUT_BY_KEY)
def put_job_by_area_key(
    area: KeySegment, key: KeySegment, spec: Annotated[JobSpec, Body()], if_match: IfMatch = None
) -> Response[JobOut]:
    return _put_by_key(f"{area}/{key}", if_match)


@app.delete("/v1/jobs/by-key/<key>", operation_id="deleteJobByKey", **_DELETE_BY_KEY)
def delete_job_by_key(key: KeySegment, if_match: IfMatch = None) -> Response[Any]:
    return _delete_by_key(key, if_match)


@app.delete("/v1/jobs/by-key/<area>/<key>", operation_id="deleteJobByAreaKey", **_DELETE_BY_KEY)
def delete_job_by_area_key(area: KeySegment, key: KeySegment, if_match: IfMatch = None) -> Response[Any]:
    return _delete_by_key(f"{area}/{key}", if_match)


@app.get(
    "/v1/jobs/<job_id>",
    operation_id="getJob",
    tags=["jobs"],
    responses=_responses(200, JobOut, 404),
    security=needs(TokenScope.READ),
)
def get_job(job_id: JobId) -> Response[JobOut]:
    return _with_etag(service().get_job(team(), job_id))


@app.patch(
    "/v1/jobs/<job_id>",
    operation_id="updateJob",
    tags=["jobs"],
    responses=_responses(200, JobOut, 404, 409, 412, 429),
    security=needs(TokenScope.ADMIN),
)
def patch_job(
    job_id: JobId, patch: Annotated[JobPatch, Body()], if_match: IfMatch = None
) -> Response[JobOut]:
    changes = json.loads(app.current_event.body or "{}")
    return _with_etag(service().update_job(team(), job_id, changes, actor(), if_match))


@app.delete(
    "/v1/jobs/<job_id>",
    operation_id="deleteJob",
    tags=["jobs"],
    responses=_responses(204, None, 404, 409, 412),
    security=needs(TokenScope.ADMIN),
)
def delete_job(job_id: JobId, if_match: IfMatch = None) -> Response[Any]:
    service().delete_job(team(), job_id, actor(), if_match)
    return Response(status_code=204, body="")


@app.post(
    "/v1/jobs/<job_id>/pause",
    operation_id="pauseJob",
    tags=["jobs"],
    responses=_responses(200, JobOut, 404, 409),
    security=needs(TokenScope.OPERATE),
)
def pause_job(job_id: JobId) -> JobOut:
    return shown(service().update_job(team(), job_id, {"paused": True}, actor()))


@app.post(
    "/v1/jobs/<job_id>/resume",
    operation_id="resumeJob",
    tags=["jobs"],
    responses=_responses(200, JobOut, 404, 409),
    security=needs(TokenScope.OPERATE),
)
def resume_job(job_id: JobId) -> JobOut:
    return shown(service().update_job(team(), job_id, {"paused": False}, actor()))


@app.post(
    "/v1/jobs/<job_id>/trigger",
    operation_id="triggerJob",
    tags=["runs"],
    responses=_responses(201, RunOut, 404, 409),
    security=needs(TokenScope.OPERATE),
    description="Run the job now, once, under a manual run id; its schedule is not touched. Without a body "
    "(or with `body` null) the run sends the job's own request. With a `body`, the run sends it instead: "
    "that changes what the job sends its target, under the job's headers and signature, so it needs an "
    "`admin` token (an `operate` token gets 403 naming `body`).",
)
def trigger_job(job_id: JobId, request: Annotated[TriggerIn | None, Body()] = None) -> Response[RunOut]:
    sent = json.loads(app.current_event.body or "null")  # re-read: powertools takes a list's first item
    if isinstance(sent, dict) and sent.get("body") is not None:  # this run's body in place of the job's
        check_scope(caller(), TRIGGER_BODY_SCOPE, "a trigger with a body of its own", "body")
    run = service().trigger(team(), job_id, sent)
    return Response(status_code=201, content_type=JSON, body=RunOut.of(run))


@app.post(
    "/v1/jobs/<job_id>/backfill",
    operation_id="backfillJob",
    tags=["runs"],
    responses=_responses(202, BackfillOut, 404),
    security=needs(TokenScope.OPERATE),
    description="Runs for the job's past nominal times in [from, to): one per time its schedule names (cron "
    "in its zone, rate from its anchor, one-time `at`; within start_at and end_at), under the scheduled run "
    "id `<job id>@<nominal time>`. A time that already has a run keeps it and is not counted, so the same "
    "request again creates nothing. `to` must be after `from` and not later than now, and the window may "
    f"hold at most {MAX_BACKFILL_RUNS:,} times (else 422 naming `to`). The runs become due at a pace of "
    "max(2, max_concurrency // 2) a second, in time order (each message delayed to its run's time), so the "
    "team's other runs queue between them, not behind them. The job itself is not changed; a paused job may "
    "be backfilled.",
)
def backfill_job(job_id: JobId, window: Annotated[BackfillWindow, Body()]) -> Response[BackfillOut]:
    body = json.loads(app.current_event.body or "{}")  # re-validated with the clock (`to` in the future)
    runs = service().backfill(team(), job_id, body)
    return Response(status_code=202, content_type=JSON, body=BackfillOut(runs=runs))


@app.get(
    "/v1/jobs/<job_id>/runs",
    operation_id="listJobRuns",
    tags=["runs"],
    responses=_responses(200, RunList, 404),
    security=needs(TokenScope.READ),
)
def list_runs(
    job_id: JobId,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Cursor = None,
) -> RunList:
    page = service().list_runs(team(), job_id, limit, cursor)
    return RunList(runs=[RunOut.of(r) for r in page.items], next_cursor=page.cursor)


@app.get(
    "/v1/jobs/<job_id>/preview",
    operation_id="previewJob",
    tags=["jobs"],
    responses=_responses(200, PreviewOut, 404),
    security=needs(TokenScope.READ),
    description="The job's next `count` runs (nominal and fire times), each marked with what daylight "
    "saving did to it under the job's `dst` policy (`dst_effect`: moved, doubled, first_only, last_only; "
    "`dst_shifted` is the `moved` case). Wall times spring-forward skipped that get no run are not runs: "
    "they are listed apart, in `skipped`, up to the last run listed.",
)
def preview(job_id: JobId, count: Annotated[int, Query(ge=1, le=100)] = 10) -> PreviewOut:
    return PreviewOut.of(job_id, service().preview(team(), job_id, count))


@app.get(
    "/v1/jobs/<job_id>/history",
    operation_id="getJobHistory",
    tags=["jobs"],
    responses=_responses(200, JobHistory, 404),
    security=needs(TokenScope.READ),
    description="What changed in the job, when, and by which token (its id, never the token), newest "
    "first, for 90 days; a deleted job's history stays readable until then.",
)
def job_history(
    job_id: JobId,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Cursor = None,
) -> JobHistory:
    page = service().job_history(team(), job_id, limit, cursor)
    return JobHistory(changes=[JobChangeOut.of(c) for c in page.items], next_cursor=page.cursor)


def _window_bound(value: str | None, name: str) -> datetime | None:
    """A window's end as the query gave it: an ISO-8601 instant with a UTC offset (a number, which pydantic
    would read as seconds since 1970, is not one); else 422 naming ``name``."""
    if value is None:
        return None
    try:
        instant = datetime.fromisoformat(value.upper())
    except ValueError:
        instant = None
    if instant is None or instant.tzinfo is None:
        raise InvalidInput(f"{name}: an ISO-8601 instant with a UTC offset, e.g. 2026-12-01T00:00:00Z", name)
    return instant


_INSTANT = r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:\d{2})$"
FromQuery = Annotated[
    str | None,
    Query(
        alias="from",
        pattern=_INSTANT,
        json_schema_extra={"format": "date-time"},
        description="window start, with a UTC offset; default: 24 hours before `to`",
    ),
]
ToQuery = Annotated[
    str | None,
    Query(
        alias="to",
        pattern=_INSTANT,
        json_schema_extra={"format": "date-time"},
        description="window end (exclusive), with a UTC offset; default: now",
    ),
]
LateAfter = Annotated[
    int,
    Query(
        ge=0,
        le=86_400,
        description="a run that started more than this many seconds after its fire time is `late`",
    ),
]


@app.get(
    "/v1/jobs/<job_id>/fires",
    operation_id="getJobFires",
    tags=["runs"],
    responses=_responses(200, FiresOut, 404),
    security=needs(TokenScope.READ),
    description="The fire ledger: every time the job should have fired in [from, to) (from its schedule as "
    "it stood then: its history of changes, zone, daylight-saving policy, calendars, jitter, start and end, "
    "pauses), each matched to what happened: `on_time`, `late`, `repeated`, `skipped` (with its reason), "
    "`missed` (with why, where known) or `pending`. Computed from the stored runs and the job's history, in "
    f"time order, at most `limit` (up to {MAX_FIRES:,}); `next_from` goes on. Runs are kept 30 days.",
)
def job_fires(
    job_id: JobId,
    start: FromQuery = None,
    end: ToQuery = None,
    late_after_seconds: LateAfter = DEFAULT_LATE_AFTER_SECONDS,
    limit: Annotated[int, Query(ge=1, le=MAX_FIRES)] = MAX_FIRES,
) -> FiresOut:
    window = _window_bound(start, "from"), _window_bound(end, "to")
    late_after = timedelta(seconds=late_after_seconds)
    return FiresOut.of(fire_ledger().fires(team(), job_id, *window, late_after, limit))


@app.get(
    "/v1/audit",
    operation_id="getAudit",
    tags=["runs"],
    responses=_responses(200, AuditOut),
    security=needs(TokenScope.READ),
    description="The fire ledger across your jobs, a page of jobs at a time: every job's fires in [from, to) "
    "counted by label, and the jobs with a missed fire, each with its first misses. `next_cursor` goes on "
    "to the next page of jobs. A page costs one request of your API rate per job it may read (`limit`).",
)
def audit(
    start: FromQuery = None,
    end: ToQuery = None,
    late_after_seconds: LateAfter = DEFAULT_LATE_AFTER_SECONDS,
    limit: Annotated[int, Query(ge=1, le=MAX_AUDIT_JOBS_PER_PAGE)] = AUDIT_JOBS_PER_PAGE,
    cursor: Cursor = None,
) -> AuditOut:
    window = _window_bound(start, "from"), _window_bound(end, "to")
    for _ in range(limit - 1):
        check_rate(team(), "GET /v1/audit costs one request per job it reads: ")
    late_after = timedelta(seconds=late_after_seconds)
    return AuditOut.of(fire_ledger().audit(team(), *window, limit, cursor, late_after))


@app.get(
    "/v1/jobs/<job_id>/signing-key",
    operation_id="getJobSigningKeys",
    tags=["jobs"],
    responses=_responses(200, SigningKeysOut, 404),
    security=needs(TokenScope.ADMIN),
    description="The keys the job's calls (and its webhook notifications) are signed with, for its target "
    "to verify the Standard Webhooks headers (`webhook-id`, `webhook-timestamp`, `webhook-signature`) with "
    "any Standard Webhooks library. Each job has keys of its own, so a call to one job's target does not "
    "verify at another's. During a signing-secret rotation's overlap both keys are listed, each with when "
    "it stops signing.",
)
def job_signing_key(job_id: JobId) -> SigningKeysOut:
    keys = service().job_signing_keys(team(), job_id)
    return SigningKeysOut(job_id=job_id, keys=[SigningKeyOut.of(k) for k in keys])


@app.get(
    "/v1/team",
    operation_id="getTeam",
    tags=["team"],
    responses=_responses(200, TeamOut),
    security=needs(TokenScope.READ),
    description="Your team's limits and what is in use: jobs and exact-time jobs against their quotas, and "
    "the cap on runs at once.",
)
def get_team() -> TeamOut:
    return TeamOut.of(team(), *service().job_counts(team()))


@app.put(
    "/v1/team/aws-role",
    operation_id="setAwsRole",
    tags=["team"],
    responses=_responses(200, TeamOut),
    security=needs(TokenScope.ADMIN),
    description="Register the IAM role your AWS targets are called under (a target's own `role_arn` "
    "overrides it). Its trust policy must let duetime's worker role assume it with your team's external id "
    "(in the answer). The role is not assumed here: a run's result tells if it cannot be (403).",
)
def put_aws_role(role: Annotated[AwsRoleIn, Body()]) -> TeamOut:
    changed = service().set_aws_role(team(), role.role_arn, actor())
    return TeamOut.of(changed, *service().job_counts(changed))


@app.delete(
    "/v1/team/aws-role",
    operation_id="removeAwsRole",
    tags=["team"],
    responses=_responses(204, None),
    security=needs(TokenScope.ADMIN),
    description="Remove your team's role: AWS targets without a `role_arn` of their own fail (403-like, "
    "not retried) until a role is registered again.",
)
def delete_aws_role() -> Response[Any]:
    service().set_aws_role(team(), None, actor())
    return Response(status_code=204, body="")


@app.get(
    "/v1/tokens",
    operation_id="listTokens",
    tags=["tokens"],
    responses=_responses(200, TokenList),
    security=needs(TokenScope.ADMIN),
    description="Your team's tokens (needs an `admin` token): id, name, scope, when and by which token each "
    "was issued, and which one this request came with. Never a token itself.",
)
def list_tokens() -> TokenList:
    current = caller().token
    return TokenList(tokens=[TokenOut.of(t, current) for t in service().tokens(caller())])


@app.post(
    "/v1/tokens",
    operation_id="issueToken",
    tags=["tokens"],
    responses=_responses(201, TokenIssued, 409),
    security=needs(TokenScope.ADMIN),
    description="Issue a token named `name` (unique in your team) with a scope (needs an `admin` token): "
    "`read` (every GET but signing keys), `operate` (also trigger with the job's own body, backfill, pause, "
    "resume, retry, cancel) "
    f"or `admin` (everything). The answer holds the token, shown this once. At most {MAX_TOKENS_PER_TEAM} "
    "tokens a team (409 past it, or for a name in use).",
)
def issue_token(wanted: Annotated[TokenIn, Body()]) -> Response[TokenIssued]:
    issued, token = service().issue_token_for(caller(), wanted)
    out = TokenIssued(**TokenOut.of(issued, caller().token).model_dump(), token=token)
    return Response(status_code=201, content_type=JSON, body=out)


@app.get(
    "/v1/token",
    operation_id="getCurrentToken",
    tags=["tokens"],
    responses=_responses(200, TokenOut),
    security=needs(TokenScope.READ),
    description="The token this request came with (any scope): its id, name and scope.",
)
def current_token() -> TokenOut:
    return TokenOut.of(caller().token, caller().token)


@app.delete(
    "/v1/tokens/<token_id>",
    operation_id="revokeToken",
    tags=["tokens"],
    responses=_responses(204, None, 404, 409),
    security=needs(TokenScope.ADMIN),
    description="Revoke one token (needs an `admin` token): it is refused from the next request on, behind "
    "API Gateway too (the api function checks every request's token; the authorizer's cache only spares it "
    "requests without a valid token). The team's last `admin` token cannot be revoked (409): issue another "
    "first.",
)
def revoke_token(token_id: TokenId) -> Response[Any]:
    service().revoke_token(caller(), token_id)
    return Response(status_code=204, body="")


@app.get(
    "/v1/runs/<run_id>",
    operation_id="getRun",
    tags=["runs"],
    responses=_responses(200, RunOut, 404),
    security=needs(TokenScope.READ),
)
def get_run(run_id: RunId) -> RunOut:
    return RunOut.of(service().get_run(team(), run_id))


@app.post(
    "/v1/runs/<run_id>/retry",
    operation_id="retryRun",
    tags=["runs"],
    responses=_responses(200, RunOut, 404, 409),
    security=needs(TokenScope.OPERATE),
)
def retry_run(run_id: RunId) -> RunOut:
    return RunOut.of(service().retry_run(team(), run_id))


@app.post(
    "/v1/runs/<run_id>/cancel",
    operation_id="cancelRun",
    tags=["runs"],
    responses=_responses(200, RunOut, 404, 409),
    security=needs(TokenScope.OPERATE),
    description="A queued or retry-waiting run becomes `cancelled` at once and is never called. A running "
    "one becomes `cancelled` too: its worker gives the call up at its next heartbeat (within 20 s), frees "
    "its concurrency slot and records no result. A finished run answers 409.",
)
def cancel_run(run_id: RunId) -> RunOut:
    return RunOut.of(service().cancel_run(team(), run_id))


def _pay_for_load(team: Team, jobs: int, fire_times: int) -> None:
    """One more request's worth of a load walk (``JobService.load``), counted against the team's API rate."""
    check_rate(
        team,
        f"GET /v1/load costs one request per {LOAD_JOBS_PER_REQUEST} jobs it reads and per "
        f"{LOAD_FIRE_TIMES_PER_REQUEST:,} runs it counts (it had read {jobs:,} and counted {fire_times:,}): ",
    )


@app.get(
    "/v1/load",
    operation_id="getLoad",
    tags=["jobs"],
    responses=_responses(200, LoadOut),
    security=needs(TokenScope.READ),
    description="Due runs per minute (by fire time) over your active jobs in [from, to). `to` must be "
    "after `from` and the window at most 24 hours; both need a UTC offset. A window breaking these rules "
    "is refused with 422 naming `to` (or `from`), and so is one holding more than "
    f"{MAX_LOAD_FIRE_TIMES:,} runs. It costs one request of your API rate per {LOAD_JOBS_PER_REQUEST} jobs, "
    f"and one more per {LOAD_FIRE_TIMES_PER_REQUEST:,} runs counted past the first "
    f"{LOAD_FIRE_TIMES_PER_REQUEST:,}, charged as it counts: when your rate cannot pay, 429 `rate_limited` "
    "with `Retry-After`.",
)
def load(
    start: Annotated[datetime, Query(alias="from", description="window start, with a UTC offset")],
    end: Annotated[
        datetime, Query(alias="to", description="window end (exclusive): after `from`, at most 24 h later")
    ],
) -> LoadOut:
    if start.tzinfo is None or end.tzinfo is None:
        raise InvalidInput("from and to need a UTC offset, e.g. 2026-12-01T00:00:00Z", "from")
    minutes = service().load(team(), start, end, functools.partial(_pay_for_load, team()))
    return LoadOut(
        window_start=start,
        window_end=end,
        total=sum(minutes.values()),
        minutes=[LoadMinute(minute=m, runs=n) for m, n in minutes.items()],
    )


# --- calendars (``duetime.api.calendars``) --------------------------------------------------------------


@app.post(
    "/v1/calendars",
    operation_id="createCalendar",
    tags=["calendars"],
    responses=_responses(201, CalendarOut, 409),
    security=needs(TokenScope.ADMIN),
    description="Create a calendar: named days your team's jobs can later skip or roll over. Its `source` is "
    'exactly one of `holidays` (a country\'s public holidays, and a subdivision\'s: `{"country": "FR"}`), '
    "`dates` (YYYY-MM-DD) or `ical` (an iCalendar file's text, RFC 5545; recurring events are expanded). A "
    "name your team has a calendar by answers 409.",
)
def create_calendar(spec: Annotated[CalendarSpec, Body()]) -> Response[CalendarOut]:
    body = json.loads(app.current_event.body or "{}")
    calendar = service().calendars.create(team().team_id, body, actor())
    return Response(status_code=201, content_type=JSON, body=CalendarOut.of(calendar))


@app.get(
    "/v1/calendars",
    operation_id="listCalendars",
    tags=["calendars"],
    responses=_responses(200, CalendarList),
    security=needs(TokenScope.READ),
)
def list_calendars(
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Cursor = None,
) -> CalendarList:
    page = service().calendars.list(team().team_id, limit, cursor)
    return CalendarList(calendars=[CalendarOut.of(c) for c in page.items], next_cursor=page.cursor)


@app.get(
    "/v1/calendars/<name>",
    operation_id="getCalendar",
    tags=["calendars"],
    responses=_responses(200, CalendarOut, 404),
    security=needs(TokenScope.READ),
    description="One calendar; with `year`, also the days of that year it holds (`days`), each with its "
    "holiday's or event's name where the source gives one.",
)
def get_calendar(
    name: CalendarName,
    year: Annotated[int | None, Query(ge=1900, le=2200, description="list this year's days")] = None,
) -> CalendarOut:
    calendars = service().calendars
    calendar = calendars.get(team().team_id, name)
    days = calendars.days(team().team_id, name, year) if year is not None else None
    return CalendarOut.of(calendar, year, days, calendars.users(team().team_id, name))


@app.put(
    "/v1/calendars/<name>",
    operation_id="updateCalendar",
    tags=["calendars"],
    responses=_responses(200, CalendarOut, 404, 409),
    security=needs(TokenScope.ADMIN),
    description="Replace the calendar's source and description; its version goes up by one. With `version` "
    "(the one you read), a calendar changed since answers 409 naming `version` and nothing is written.",
)
def put_calendar(name: CalendarName, update: Annotated[CalendarUpdate, Body()]) -> CalendarOut:
    body = json.loads(app.current_event.body or "{}")
    return CalendarOut.of(service().calendars.update(team().team_id, name, body, actor()))


@app.delete(
    "/v1/calendars/<name>",
    operation_id="deleteCalendar",
    tags=["calendars"],
    responses=_responses(204, None, 404, 409),
    security=needs(TokenScope.ADMIN),
    description="Delete the calendar (with `version`: only that version, else 409); a calendar jobs use is "
    "not deleted: 409 naming them. Its history stays readable for 90 days, and its versions stay taken: a "
    "calendar created again under the name continues from the next one.",
)
def delete_calendar(
    name: CalendarName, version: Annotated[int | None, Query(ge=1, description="the version you read")] = None
) -> Response[Any]:
    service().calendars.delete(team().team_id, name, actor(), version)
    return Response(status_code=204, body="")


@app.get(
    "/v1/calendars/<name>/history",
    operation_id="getCalendarHistory",
    tags=["calendars"],
    responses=_responses(200, CalendarHistory, 404),
    security=needs(TokenScope.READ),
    description="What changed in the calendar, when, and by which token, newest first, for 90 days; a "
    "deleted calendar's history stays readable until then.",
)
def calendar_history(
    name: CalendarName,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Cursor = None,
) -> CalendarHistory:
    page = service().calendars.history(team().team_id, name, limit, cursor)
    return CalendarHistory(changes=[CalendarChangeOut.of(c) for c in page.items], next_cursor=page.cursor)
