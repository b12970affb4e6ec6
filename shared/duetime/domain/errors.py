"""Errors the API turns into ``{"error": {"code", "message", "field"?}}`` with an HTTP status."""

from __future__ import annotations

import re

from pydantic import ValidationError

from duetime.domain.aws_targets import AWS_TARGET_TYPES

TARGET_TYPES = {"http", *AWS_TARGET_TYPES}


class ApiError(Exception):
    status = 400
    code = "bad_request"

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def body(self) -> dict[str, dict[str, str]]:
        error = {"code": self.code, "message": self.message}
        if self.field:
            error["field"] = self.field
        return {"error": error}

    def headers(self) -> dict[str, str]:
        """Headers the answer carries besides Content-Type."""
        return {}


class BadRequest(ApiError):
    status, code = 400, "bad_request"


class Unauthorized(ApiError):
    status, code = 401, "unauthorized"


class Forbidden(ApiError):
    status, code = 403, "forbidden"


class NotFound(ApiError):
    status, code = 404, "not_found"


class MethodNotAllowed(ApiError):
    status, code = 405, "method_not_allowed"


class Conflict(ApiError):
    status, code = 409, "conflict"


class PreconditionFailed(ApiError):
    """``If-Match`` named a version (an ETag) the resource is no longer at: nothing was written."""

    status, code = 412, "precondition_failed"


class PayloadTooLarge(ApiError):
    status, code = 413, "payload_too_large"


class UnsupportedMediaType(ApiError):
    status, code = 415, "unsupported_media_type"


class InvalidInput(ApiError):
    status, code = 422, "invalid"


class QuotaExceeded(ApiError):
    status, code = 429, "quota_exceeded"


class RateLimited(ApiError):
    """The team is over its API rate (``duetime.domain.rate_limit``): 429, ``Retry-After`` in whole
    seconds."""

    status, code = 429, "rate_limited"

    def __init__(self, message: str, retry_after_seconds: int, field: str | None = None) -> None:
        super().__init__(message, field)
        self.retry_after_seconds = max(1, retry_after_seconds)

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after_seconds)}


class Unavailable(ApiError):
    """Something duetime must ask before it acts did not answer (e.g. STS, for a role's trust policy): 503
    with ``Retry-After``; nothing was written, and the same request may simply be sent again."""

    status, code = 503, "unavailable"

    def headers(self) -> dict[str, str]:
        return {"Retry-After": "5"}


_UNION_MEMBER = re.compile(r"^[a-z-]+\[.*\]$")  # how pydantic names a union's member: tagged-union[A,B]


def field_path(loc: tuple[int | str, ...]) -> str:
    """pydantic's error location as a dotted field name: ``schedule.cron``, ``retry.backoff_seconds.1``.
    The schedule's union tag (``schedule.cron.timezone``), a notify channel's type tag
    (``notify.0.webhook.url``), a target's type tag (``target.sqs.queue_url``), union members' names and the
    request part (``body``, ``query``) are dropped."""
    parts = [str(p) for p in loc if not _UNION_MEMBER.match(str(p))]
    if parts[:1] in (["body"], ["query"]):  # a query parameter is named as it is sent: ``limit``, ``q``
        parts = parts[1:]
    if len(parts) >= 3 and parts[0] == "schedule" and parts[1] in {"cron", "rate", "at", "business_day"}:
        parts = [parts[0], *parts[2:]]
    if len(parts) >= 4 and parts[0] == "notify" and parts[2] in {"webhook", "sns"}:
        parts = [*parts[:2], *parts[3:]]  # a channel's discriminator tag: notify.0.url
    if len(parts) >= 2 and parts[0] == "target" and parts[1] in TARGET_TYPES:
        parts = [parts[0], *parts[2:]]  # a target's type tag: target.queue_url
    return ".".join(parts)


def from_validation_error(exc: ValidationError, prefix: str = "") -> InvalidInput:
    first = exc.errors()[0]
    field = field_path(tuple(first["loc"]))
    field = f"{prefix}.{field}".strip(".") if prefix else field
    message = str(first["msg"]).removeprefix("Value error, ")
    return InvalidInput(f"{field or 'body'}: {message}", field or None)
