"""No spelling of a path lets a token reach an operation its scope does not allow.

Every operation of the API is requested under many spellings of its path (repeated and trailing slashes, dot
segments, percent-encoded separators and letters, raw and as a gateway decodes them, other cases, a path
parameter that is itself a route's word, methods in lower case), with a ``read`` and an ``operate``
token. Which operation the router chose is observed apart from the scope check (what powertools passes on to
run). Each request is either refused (401, 403, 404, 405), or let through to an operation its token's scope
allows by the spec table of ``test_token_scopes``.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, unquote

import pytest

from duetime.api import app as api
from duetime.api import request_context
from duetime.domain.errors import ApiError
from duetime.domain.tokens import TokenScope
from duetime.local.gateway import LocalGateway

from ..lambda_support import api_request
from .test_token_scopes import EXPECTED, served  # noqa: F401 - served is a fixture

REFUSED = {401, 403, 404, 405}
PARAMETER_VALUES = ("j-1", "signing-key", "tokens", "by-key", "..")  # an id, and words of routes


class _Reached(ApiError):
    """What the observed handler answers once it has been reached (so no store is needed)."""

    status, code = 299, "reached"


@pytest.fixture
def reached(monkeypatch: pytest.MonkeyPatch, served: None) -> Iterator[list[tuple[str, str]]]:  # noqa: F811
    """The operations the router chose for each request, as (method, path template): what powertools passes
    on to run (``_call_route``; for no match it passes a route of its own, not listed). Handlers stop at their
    first question of who the caller is (every handler of a private route asks ``team()`` or ``caller()``
    first), so no store is needed."""
    seen: list[tuple[str, str]] = []
    ours = {id(route) for route in api.app.routes()}
    run_route = api.app._call_route

    def observed_route(route: Any, route_arguments: dict[str, str]) -> Any:
        if id(route) in ours:
            seen.append((route.method, route.openapi_path))
        return run_route(route, route_arguments)

    class StopAtFirstQuestion(dict[str, Any]):
        """The request's caller as the guard remembered it (``request_context``), unreadable: a handler's
        first ``team()`` or ``caller()`` stops it."""

        def __getitem__(self, key: str) -> Any:
            raise _Reached("reached")

    monkeypatch.setattr(api.app, "_call_route", observed_route)
    monkeypatch.setattr(request_context, "_current", StopAtFirstQuestion())
    yield seen


def spellings(path: str) -> set[str]:
    """``path`` written in the ways a client, a gateway or a router might read as the same path."""
    segments = path.strip("/").split("/")
    found = {path, path + "/", path + "//", path + "///", "/" + path, path.replace("/", "//"), path.upper()}
    found |= {
        path + suffix for suffix in ("/.", "/./", "/%2F", "/%2f", "%2F", ";", ";x", "%00", "%20", " ", "\t")
    }
    found |= {"/" + "/".join(s.title() for s in segments), path.replace("/", "\\")}
    for i in range(1, len(segments)):
        head, tail = "/" + "/".join(segments[:i]), "/".join(segments[i:])
        found |= {
            f"{head}//{tail}",
            f"{head}/./{tail}",
            f"{head}/x/../{tail}",
            f"{head}%2F{tail}",
            f"{head}%2f{tail}",
        }
        found |= {f"{head}%252F{tail}", f"{head}/%2E/{tail}", f"{head}/%2e%2e/{segments[i - 1]}/{tail}"}
    found |= {quote(path, safe=""), path.replace("s", "%73").replace("t", "%74")}
    return found | {unquote(spelled) for spelled in found}  # as API Gateway (and duetime local) hands it on


def concrete(template: str) -> set[str]:
    paths = set()
    for value in PARAMETER_VALUES:
        path = template
        while "{" in path:
            path = path[: path.index("{")] + value + path[path.index("}") + 1 :]
        paths.add(path)
    return paths


def requests() -> list[tuple[str, str]]:
    wanted = set()
    for method, template in EXPECTED:
        for path in concrete(template):
            for spelled in spellings(path):
                for verb in {method, method.lower(), "HEAD" if method == "GET" else method}:
                    wanted.add((verb, spelled))
    return sorted(wanted)


def test_the_variants_are_many_and_the_router_reads_some_of_them_as_the_operation_itself(
    reached: list[tuple[str, str]],
) -> None:
    """The check below means something only if some spellings do reach an operation: an admin token's."""
    assert len(requests()) > 5_000
    for path in ("/v1/tokens//", "/v1/jobs/j-1/signing-key/", "/v1/tokens%2F", "/V1/tokens"):
        reached.clear()
        answer = api_request("GET", unquote(path), "dt_admin")
        if path == "/V1/tokens":
            assert answer["statusCode"] == 404 and reached == []  # the router's paths are case-sensitive
            continue
        assert answer["statusCode"] == _Reached.status, answer
        assert reached[0] in {("GET", "/v1/tokens"), ("GET", "/v1/jobs/{job_id}/signing-key")}


@pytest.mark.parametrize("scope", [TokenScope.READ, TokenScope.OPERATE])
def test_no_spelling_of_a_path_reaches_an_operation_the_tokens_scope_does_not_allow(
    scope: TokenScope, reached: list[tuple[str, str]]
) -> None:
    beyond: list[tuple[str, str, tuple[str, str]]] = []
    answers: dict[int, int] = {}
    for method, path in requests():
        reached.clear()
        answer = api_request(method, path, f"dt_{scope}")
        status = answer["statusCode"]
        answers[status] = answers.get(status, 0) + 1
        assert status < 500, (method, path, answer)
        if not reached:
            assert status in REFUSED, (method, path, answer)
        elif status not in {401, 403} and not scope.allows(EXPECTED[reached[0]]):
            beyond.append((method, path, reached[0]))  # let through to an operation beyond its scope
    assert beyond == []
    assert answers[_Reached.status] > 1_000 and answers[403] > 100, answers


@pytest.mark.parametrize(
    "raw",
    [
        "/v1/tokens/",
        "/v1/tokens//",
        "/v1/tokens%2F",
        "/v1/tokens%2f%2F",
        "//v1//tokens//",
        "/v1/jobs/j-1/signing-key/",
        "/v1/jobs/j-1%2Fsigning-key",
        "/v1/jobs/j-1/signing-key%2F",
        "/v1/jobs%2Fj-1%2Fsigning-key",
        "/v1/jobs/j-1/%73igning-key",
        "/v1/jobs/j-1/./signing-key",
        "/v1/jobs/j-1/x/../signing-key",
    ],
)
def test_over_http_through_duetime_locals_gateway_a_read_token_gets_no_admin_read(
    raw: str, reached: list[tuple[str, str]]
) -> None:
    gateway = LocalGateway(api.handle, 0).start()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", gateway.server_address[1], timeout=10)
        connection.request("GET", raw, headers={"Authorization": "Bearer dt_read"})  # sent exactly as written
        answer = connection.getresponse()
        body = answer.read().decode()
        connection.close()
    finally:
        gateway.shutdown()
        gateway.server_close()
    admin_reads = {("GET", "/v1/tokens"), ("GET", "/v1/jobs/{job_id}/signing-key")}
    if answer.status == _Reached.status:  # let through: to a read the scope allows, never an admin read
        # (the gateway hands the path on encoded, as API Gateway's REST API does: ``j-1%2Fsigning-key`` is
        # one segment, a job id, read with ``GET /v1/jobs/{job_id}``, which a read token may)
        assert reached and reached[0] not in admin_reads and reached[0][0] == "GET", (reached, body)
        return
    assert answer.status in {403, 404}, (answer.status, body)
    if reached:  # the router read the spelling as an admin read: refused by its scope
        assert answer.status == 403 and reached[0] in admin_reads
        error = json.loads(body)["error"]
        assert error["field"] == "scope" and "needs admin" in error["message"]
