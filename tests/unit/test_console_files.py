"""The console's static files: served by the api function without a token, under a strict CSP."""

from __future__ import annotations

from typing import Any

import pytest

from duetime.api import app as api
from duetime.api.console_files import CONTENT_SECURITY_POLICY, console_file
from duetime.local.gateway import rest_event


def get(path: str, method: str = "GET") -> dict[str, Any]:
    response = api.handle(rest_event(method, path, None, {}, None), None)
    headers = {k: v[0] for k, v in (response.get("multiValueHeaders") or {}).items()}
    response["all_headers"] = {**headers, **(response.get("headers") or {})}
    return response


def test_the_index_page_is_served_without_a_token_under_a_strict_csp() -> None:
    response = get("/console/")
    headers = response["all_headers"]
    assert response["statusCode"] == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY and "unsafe-inline" not in CONTENT_SECURITY_POLICY
    assert "connect-src 'self'" in CONTENT_SECURITY_POLICY
    assert "frame-ancestors 'none'" in CONTENT_SECURITY_POLICY
    assert headers["X-Content-Type-Options"] == "nosniff" and headers["Referrer-Policy"] == "no-referrer"
    assert '<script type="module" src="console.js">' in response["body"]


def test_the_index_page_has_no_inline_script_or_style_the_csp_would_refuse() -> None:
    page = console_file("index.html")
    assert page is not None
    assert "<script>" not in page.body and " style=" not in page.body and "onclick" not in page.body.lower()


@pytest.mark.parametrize(
    ("name", "content_type"),
    [("index.html", "text/html"), ("console.js", "text/javascript"), ("console.css", "text/css")],
)
def test_each_shipped_file_has_its_content_type(name: str, content_type: str) -> None:
    response = get(f"/console/{name}")
    assert response["statusCode"] == 200
    assert response["all_headers"]["Content-Type"].startswith(content_type)


def test_console_without_a_slash_moves_to_the_index_relatively_so_a_stage_prefix_is_kept() -> None:
    response = get("/console")
    assert response["statusCode"] == 301 and response["all_headers"]["Location"] == "console/"


@pytest.mark.parametrize("name", ["nope.js", "..", "api.py", "console.js.bak", ".hidden.js", "INDEX.HTML"])
def test_only_the_shipped_files_are_served(name: str) -> None:
    response = get(f"/console/{name}")
    assert response["statusCode"] == 404
    assert response["all_headers"]["Content-Security-Policy"] == CONTENT_SECURITY_POLICY


def test_a_path_below_the_console_directory_is_not_served() -> None:
    # no route has that path: not public, so without a token it is a 401 (with one, a 404)
    assert get("/console/sub/index.html")["statusCode"] == 401


def test_a_write_to_the_console_is_405_without_touching_the_api() -> None:
    response = get("/console/index.html", method="POST")
    assert response["statusCode"] == 405 and response["all_headers"]["Allow"] == "GET"


def test_the_api_itself_still_wants_a_token() -> None:
    assert get("/v1/jobs")["statusCode"] == 401
