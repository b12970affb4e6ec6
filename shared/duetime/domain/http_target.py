"""A job's HTTP target (URL, method, headers that are write-only secrets, body), and the union of every
target type.

A part of ``duetime.domain.models`` (which exports every name of these modules).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    TypeAdapter,
    ValidationInfo,
    field_validator,
)

from duetime.domain.aws_targets import (
    AWS_TARGET_TYPES,
    EventBridgeTarget,
    LambdaTarget,
    SnsTarget,
    SqsTarget,
    StepFunctionsTarget,
)
from duetime.domain.model_base import Strict
from duetime.domain.stored_format import STORED
from duetime.domain.url_secrets import REDACTED, holds_marker, redact_url, shown_origin, url_origin

URL_PATTERN = r"^https?://[^/\x00-\x20]"  # an absolute http(s) URL with a host; the rest: target_guard


HEADER_NAME_PATTERN = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"  # an HTTP token (RFC 9110)


HEADER_VALUE_PATTERN = r"^[^\r\n\x00]*$"


_URL = re.compile(URL_PATTERN)


_HEADER_NAME = re.compile(HEADER_NAME_PATTERN)


RESERVED_HEADER_PREFIX = "x-duetime-"


MAX_URL_LENGTH = 2048


HeaderName = Annotated[str, StringConstraints(pattern=HEADER_NAME_PATTERN)]


HeaderValue = Annotated[str, StringConstraints(pattern=HEADER_VALUE_PATTERN)]


def absolute_http_url(value: Any, info: ValidationInfo) -> Any:
    """An http(s) URL; from a client (``now`` in the context), one with no ``REDACTED`` secret (a URL as
    answers show it stands for the stored one only when sent back unchanged: ``HttpTarget``) and whose shown
    form still fits ``MAX_URL_LENGTH``."""
    if not isinstance(value, str):
        return value
    if not _URL.match(value):
        raise ValueError("url must be an absolute http:// or https:// URL")
    if (info.context or {}).get("now") is not None:
        if holds_marker(value):
            raise ValueError(
                f"url: {REDACTED!r} stands for a secret of the stored URL only in that URL exactly as "
                "answers show it; to change the URL, send it with its secrets"
            )
        if len(redact_url(value)) > MAX_URL_LENGTH:
            raise ValueError(
                f"url is longer than {MAX_URL_LENGTH} characters with its secrets shown as {REDACTED}"
            )
    return value


class StoredSecretsWithheld(ValueError):
    """A target's new URL is of another origin than the one its stored header values were given for: those
    values are not sent there. ``fields`` names each header to send again (``target.headers.<name>``)."""

    def __init__(self, names: list[str], before: str, after: str) -> None:
        self.fields = [f"target.headers.{name}" for name in names]
        super().__init__(
            f"{', '.join(self.fields)}: the target's origin changes from {shown_origin(url_origin(before))} "
            f"to {shown_origin(url_origin(after))}, and stored header values go only to the origin they "
            f"were given for: send {'this value' if len(names) == 1 else 'these values'} again instead of "
            f"{REDACTED!r}"
        )


class HttpTarget(Strict):
    type: Literal["http"] = "http"
    url: str = Field(
        max_length=MAX_URL_LENGTH,
        pattern=URL_PATTERN,
        description="absolute http:// or https:// URL. Loopback, private, link-local and other "
        "non-public addresses (after DNS resolution) are refused with 422, and so are ports other than 80, "
        "443 and 1024-65535 unless the installation allows them. Its secrets are write-only: "
        "answers show a userinfo's password (or a lone user name) and the values of query parameters "
        "named like secrets (token, key, secret, password, signature, sig, auth, credential, ...) as "
        f'"{REDACTED}". In a PATCH, the URL sent back exactly as shown keeps the stored one; any other URL '
        f'holding "{REDACTED}" as such a value is refused with 422.',
    )
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    headers: dict[HeaderName, HeaderValue] = Field(
        default_factory=dict,
        max_length=50,
        description=f"Extra request headers. Values are write-only: answers list each name with the value "
        f'"{REDACTED}". In a PATCH that sends `target`, a value of exactly "{REDACTED}" keeps the value '
        f"stored under that name (names compare case-insensitively), so a client can GET, edit and PATCH, "
        f"as long as the URL's origin (scheme, host, port) stays the same: stored values never follow a URL "
        f'to another origin ("{REDACTED}" with a new origin is refused with 422 naming each header, '
        f'target.headers.<name>, to send again). "{REDACTED}" for a name with no stored value, '
        f"Idempotency-Key and X-Duetime-* names are refused with 422.",
        json_schema_extra={"additionalProperties": False},
    )
    body: str | None = Field(default=None, max_length=64 * 1024)

    _http_url = field_validator("url", mode="before")(absolute_http_url)

    @field_validator("headers", mode="before")
    @classmethod
    def _safe_headers(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, dict):
            return value
        from_client = (info.context or {}).get("now") is not None
        for name, header_value in value.items():
            if not isinstance(name, str) or not isinstance(header_value, str):
                continue  # the type check names it
            if not _HEADER_NAME.fullmatch(name):
                raise ValueError(f"header name {name!r} is not a valid HTTP token")
            if any(c in header_value for c in "\r\n\0"):
                raise ValueError(f"header {name!r} must not contain CR, LF or NUL")
            if name.lower().startswith(RESERVED_HEADER_PREFIX) or name.lower() == "idempotency-key":
                raise ValueError(f"header {name!r} is set by duetime and cannot be overridden")
            if from_client and header_value == REDACTED:
                raise ValueError(
                    f"header {name!r}: {REDACTED!r} stands for a stored value and {name!r} has none; "
                    "send the real value"
                )
        return value

    def redacted(self) -> HttpTarget:
        """This target as answers show it: every header value replaced by ``REDACTED``, and the URL's
        secrets (``url_secrets.redact_url``)."""
        return self.model_copy(
            update={"url": redact_url(self.url), "headers": dict.fromkeys(self.headers, REDACTED)}
        )

    def restore_redacted(self, sent: Any) -> Any:
        """``sent`` (a client's new target, unvalidated) with what answers showed redacted put back: a URL
        sent back exactly as shown (``redacted``) is this target's URL, and each ``REDACTED`` header value
        is the value this target stores under that name (compared case-insensitively), while the URL's
        origin stays this target's (``url_origin``). A new origin with a ``REDACTED`` header value that
        stands for a stored one raises ``StoredSecretsWithheld`` (stored values are never sent elsewhere);
        a URL that cannot be read is left to validation, which refuses it before anything is called or
        written. Names without a stored value keep the marker, and validation refuses it; so does a URL
        that holds it anywhere but in the text answers show."""
        if not isinstance(sent, dict):
            return sent
        if sent.get("url") == redact_url(self.url):
            sent = {**sent, "url": self.url}
        if not isinstance(sent.get("headers"), dict):
            return sent
        stored = {name.lower(): value for name, value in self.headers.items()}
        stored.update(self.headers)  # an exact spelling wins over another one
        kept = [
            name
            for name, value in sent["headers"].items()
            if value == REDACTED and isinstance(name, str) and (name in stored or name.lower() in stored)
        ]
        url = sent.get("url")
        if kept and isinstance(url, str) and url_origin(url) not in (None, url_origin(self.url)):
            raise StoredSecretsWithheld(kept, self.url, url)
        headers = {
            name: stored.get(name, stored.get(name.lower(), value)) if name in kept else value
            for name, value in sent["headers"].items()
        }
        return {**sent, "headers": headers}


def _target_type(value: Any) -> str | None:
    """A target's type: ``type`` as sent (``http`` when left out, as before other types existed)."""
    if isinstance(value, dict):
        kind = value.get("type", "http")
        return kind if kind in TARGET_TYPES else None
    return getattr(value, "type", None)


TARGET_TYPES = ("http", *AWS_TARGET_TYPES)


Target = Annotated[
    Annotated[HttpTarget, Tag("http")]
    | Annotated[LambdaTarget, Tag("lambda")]
    | Annotated[SqsTarget, Tag("sqs")]
    | Annotated[SnsTarget, Tag("sns")]
    | Annotated[EventBridgeTarget, Tag("eventbridge")]
    | Annotated[StepFunctionsTarget, Tag("stepfunctions")],
    Discriminator(
        _target_type,
        custom_error_type="target_type",
        custom_error_message="target.type must be one of "
        + ", ".join(f"'{t}'" for t in TARGET_TYPES)
        + " (left out: 'http')",
    ),
]


_TARGETS: TypeAdapter[Target] = TypeAdapter(Target)


def parse_target(data: Any) -> Target:
    """A stored target (a run's copy of its job's): an ``HttpTarget`` or one of the AWS targets."""
    return _TARGETS.validate_python(data, context=STORED)
