"""Calling HTTP targets with urllib3 (already a dependency of botocore)."""

from __future__ import annotations

import time

import urllib3

from duetime.ports import TargetRequest, TargetResponse
from duetime.target_guard import TargetRefused, check_target_url

BODY_KEPT = 1024


class HttpTargetCaller:
    """Implements ``duetime.ports.TargetCaller``. No redirects are followed, no retries inside a call.
    The target's host is checked against the SSRF guard right before each call."""

    def __init__(self, pool: urllib3.PoolManager | None = None, allow_private: bool = False) -> None:
        self.pool = pool or urllib3.PoolManager(num_pools=32, maxsize=16)
        self.allow_private = allow_private

    def call(self, request: TargetRequest) -> TargetResponse:
        started = time.monotonic()
        try:
            check_target_url(request.url, self.allow_private, require_resolution=True)
        except TargetRefused as exc:
            return TargetResponse(None, "", str(exc), _ms_since(started), permanent=True)
        try:
            response = self.pool.request(
                request.method,
                request.url,
                body=request.body,
                headers=request.headers,
                timeout=urllib3.Timeout(total=request.timeout_seconds),
                retries=False,
                redirect=False,
                preload_content=False,
            )
            try:
                body = response.read(BODY_KEPT, decode_content=True)
            finally:
                response.release_conn()
            return TargetResponse(
                status_code=response.status,
                body=body.decode("utf-8", errors="replace"),
                error=None,
                duration_ms=_ms_since(started),
            )
        except urllib3.exceptions.TimeoutError:
            return TargetResponse(None, "", f"timeout after {request.timeout_seconds:g}s", _ms_since(started))
        except urllib3.exceptions.HTTPError as exc:
            return TargetResponse(None, "", f"connection error: {type(exc).__name__}", _ms_since(started))


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
