"""API Gateway on one machine: HTTP requests become REST proxy events for the api handler, as API
Gateway makes them; ``/demo/*`` goes to the demo target, and Lambda's reserved-concurrency paths to the
local functions (``duetime.local.lambda_control``)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from duetime.local.demo_target import KNOWN_METHODS, Answer, DemoTarget, JsonRequestHandler
from duetime.local.lambda_control import answer_lambda_control

log = logging.getLogger(__name__)

ApiHandler = Callable[[dict[str, Any], Any], dict[str, Any]]


def rest_event(
    method: str, path: str, query: dict[str, str] | None, headers: dict[str, str], body: str | None
) -> dict[str, Any]:
    """An API Gateway REST (v1) proxy event."""
    return {
        "resource": path,
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": query or None,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} if query else None,
        "pathParameters": None,
        "requestContext": {"requestId": "local", "stage": "local", "httpMethod": method, "path": path},
        "body": body,
        "isBase64Encoded": False,
    }


class _GatewayHandler(JsonRequestHandler):
    server: LocalGateway

    def __getattr__(self, name: str) -> Any:
        """API Gateway's ANY hands every method to the api handler, which answers one a path does not
        route with 405 and ``Allow``. The base class refuses methods outside ``KNOWN_METHODS`` before it
        asks ``answer``, so those are served under a known name; ``answer`` reads the request's own."""
        method = name.removeprefix("do_")
        if name != method and method not in KNOWN_METHODS and not self.path.startswith("/demo/"):
            return lambda: self._serve("POST")
        return super().__getattr__(name)

    def answer(self, _: str, body: str) -> Answer:
        method = self.command  # the request's own method, whatever name it was served under
        parts = urlsplit(self.path)
        headers = dict(self.headers.items())
        if parts.path.startswith("/demo/"):
            return self.server.demo.handle(method, self.path, headers, body)
        control = answer_lambda_control(method, parts.path, body)
        if control is not None:  # a function's reserved concurrency: Lambda's API, not the api function's
            return control
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        path = parts.path  # as API Gateway's REST API hands it: still percent-encoded (api.request_path)
        try:
            response = self.server.api(rest_event(method, path, query, headers, body or None), None)
        except Exception:  # a bug: answer as API Gateway would for a failed Lambda, and say so in the log
            log.exception("the api handler failed")
            return 500, '{"error": {"code": "internal", "message": "internal error"}}', {}
        answered = {  # API Gateway merges both
            **(response.get("headers") or {}),
            **{k: ", ".join(v) for k, v in (response.get("multiValueHeaders") or {}).items()},
        }
        extra = {k: v for k, v in answered.items() if k.lower() != "content-length"}
        return int(response["statusCode"]), response.get("body") or "", extra


class LocalGateway(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, api: ApiHandler, port: int, host: str = "127.0.0.1") -> None:
        super().__init__((host, port), _GatewayHandler)
        self.api = api
        self.demo = DemoTarget()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def start(self) -> LocalGateway:
        threading.Thread(target=self.serve_forever, name="local-gateway", daemon=True).start()
        return self
