"""What duetime stores: jobs (what to run, when, and how to retry) and runs (one per job and nominal time).

User input is validated here, once: every model forbids unknown fields and every error names its field.
Time-dependent checks (``at`` in the past) read ``now`` from the validation context, never from the
machine: ``JobSpec.model_validate(data, context={"now": clock.now()})``; what only a client may not send (the
redaction marker as a header value or as a URL's secret) is refused under that context too, never in what
duetime stored.

The constraints OpenAPI can state (patterns, lengths, ranges) are declared on the fields, so the API's
document and its validation come from the same place. Patterns keep to what JSON Schema (ECMA-262), pydantic
(Rust regex) and Python read alike: explicit ASCII classes, no shorthand classes. Validators that run before
a pattern give a plain message for the usual mistakes; the pattern still applies.
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime, time, timedelta
from enum import StrEnum
from typing import Annotated, Any, Literal, Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from pydantic import (
    AfterValidator,
    AwareDatetime,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    StringConstraints,
    Tag,
    TypeAdapter,
    ValidationInfo,
    field_validator,
)

from duetime.domain.aws_targets import (
    AWS_TARGET_TYPES,
    ROLE_ARN_PATTERN,
    EventBridgeTarget,
    LambdaTarget,
    SnsTarget,
    SqsTarget,
    StepFunctionsTarget,
)
from duetime.domain.calendar_rules import DaysOff, OnExcluded, RolledRuns
from duetime.domain.calendars import CALENDAR_NAME_PATTERN
from duetime.domain.cron_dialect import cron_never_fires
from duetime.domain.dst import DstPolicy
from duetime.domain.labels import Labels
from duetime.domain.stored_format import STORED, ReadsStoredTolerantly, is_stored
from duetime.domain.timeutil import iso_z, to_utc, whole_seconds
from duetime.domain.url_secrets import REDACTED, holds_marker, redact_url, shown_origin, url_origin

MAX_SQS_DELAY_SECONDS = 900  # a retry's backoff is carried by an SQS message delay


class Strict(ReadsStoredTolerantly):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- schedules -------------------------------------------------------------------------------------------

CRON_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_CRON_TOKEN = r"[0-9A-Za-z*/,?#-]+"
_BLANK = r"[ \t]"
_ALIAS = "@({})".format("|".join(name.removeprefix("@") for name in CRON_ALIASES))
_EVENTBRIDGE = rf"cron\({_BLANK}*{_CRON_TOKEN}({_BLANK}+{_CRON_TOKEN}){{5}}{_BLANK}*\)"
CRON_PATTERN = rf"^{_BLANK}*({_ALIAS}|{_CRON_TOKEN}({_BLANK}+{_CRON_TOKEN}){{4}}|{_EVENTBRIDGE}){_BLANK}*$"
_CRON_FIELD = re.compile(_CRON_TOKEN)
MAX_CRON_LENGTH = 256  # a client's cron; every value of every field listed one by one would be about 400
ZONE_PATTERN = r"^[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*$"


@functools.cache
def _zone_names() -> frozenset[str]:
    return frozenset(available_timezones())


def _in_utc(value: datetime) -> datetime:
    """``value`` in UTC; an instant with no UTC equivalent (year 1 at +05:00, year 9999 at -05:00) is refused
    as a validation error naming its field, not raised as a 500."""
    try:
        return to_utc(value)
    except OverflowError:
        raise ValueError("is out of range: no UTC instant matches it") from None


def _iana_zone_name(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    if value not in _zone_names():
        raise ValueError(f"unknown time zone {value!r}: use an IANA name such as 'Europe/Berlin'")
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError) as exc:  # pragma: no cover - names come from tzdata
        raise ValueError(f"unknown time zone {value!r}") from exc
    return value


def _utc_instant(value: datetime) -> datetime:
    return whole_seconds(_in_utc(value))


def _standard_cron_text(value: str) -> str:
    """A cron as given, in its standard form (5 fields, or ``cron(...)`` around EventBridge's 6, separated by
    one space; aliases expanded); a ``ValueError`` naming the mistake when it cannot be one."""
    expr = " ".join(re.split(_BLANK + "+", value.strip(" \t")))
    if expr.startswith("@") and expr not in CRON_ALIASES:
        raise ValueError(f"unknown cron alias {expr!r}: use one of {', '.join(CRON_ALIASES)}")
    expr = CRON_ALIASES.get(expr, expr)
    if eventbridge := re.fullmatch(r"cron\((.*)\)", expr):
        fields = eventbridge[1].strip(" ").split(" ")
        expr = "cron({})".format(" ".join(fields))
        if len(fields) != 6:
            raise ValueError(
                "cron(...) needs EventBridge's 6 fields (minutes hours day-of-month month day-of-week year), "
                f"got {len(fields)}"
            )
    else:
        fields = expr.split(" ") if expr else []
        if len(fields) != 5:
            raise ValueError(
                f"cron needs exactly 5 fields (minute hour day month weekday), got {len(fields)}; "
                "EventBridge's 6 are written inside cron(...)"
            )
    if not all(_CRON_FIELD.fullmatch(f) for f in fields):
        raise ValueError("cron fields may contain only digits, names, '*', '/', ',', '-', '?' and '#'")
    return expr


# Every job a poller reads validates its stored cron again, and stored jobs share a few expressions: the
# standard form of those is cached. A client's text is not (the cache would hold whatever clients send).
_stored_cron_text = functools.lru_cache(maxsize=1024)(_standard_cron_text)


class CronSchedule(Strict):
    """Standard 5-field cron (or an @alias) with Quartz's day tokens, or an EventBridge ``cron(...)``,
    evaluated in an IANA time zone (``duetime.domain.cron_dialect``)."""

    cron: str = Field(
        min_length=1,
        pattern=CRON_PATTERN,
        json_schema_extra={"maxLength": MAX_CRON_LENGTH},  # a client's; a stored cron is read whatever it is
        description="5-field cron expression (minute hour day month weekday, separated by spaces or tabs; "
        "day-of-month also takes L, nW, LW and ?, day-of-week nL, n#k and ?; weekdays 0-7, 0 and 7 Sunday), "
        "an EventBridge expression as written there (`cron(0 9 ? * MON-FRI *)`: minutes hours day-of-month "
        "month day-of-week year, weekdays 1-7 = SUN-SAT, `?` in exactly one day field, years 1970-2199) "
        "or @hourly/@daily/@weekly/@monthly/@yearly (also @annually, @midnight), at most "
        f"{MAX_CRON_LENGTH} characters. A cron that never fires (e.g. `0 0 30 2 *`) or that cron cannot "
        "read (a value out of its field's range, an unknown name, a step of 0) is refused with 422.",
    )
    timezone: str = Field(
        default="UTC",
        max_length=64,
        pattern=ZONE_PATTERN,
        description="IANA time zone name, e.g. Europe/Berlin; names outside the IANA database are refused "
        "with 422.",
    )

    @field_validator("cron", mode="before")
    @classmethod
    def _standard_cron(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str):
            return value  # the type check names it
        if is_stored(info):
            return _stored_cron_text(value)
        if len(value) > MAX_CRON_LENGTH:  # before croniter reads it
            raise ValueError(f"cron is longer than {MAX_CRON_LENGTH} characters")
        expr = _standard_cron_text(value)
        reason = cron_never_fires(expr, (info.context or {}).get("now"))
        if reason:
            raise ValueError(reason)
        return expr

    _iana_zone = field_validator("timezone", mode="before")(_iana_zone_name)


_RATE_UNITS = "(minute|minutes|hour|hours|day|days)"
_RATE = re.compile(rf"{_BLANK}*(-?[0-9]+){_BLANK}+{_RATE_UNITS}{_BLANK}*")
RATE_PATTERN = rf"^{_BLANK}*0*[1-9][0-9]*{_BLANK}+{_RATE_UNITS}{_BLANK}*$"
_RATE_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}
MAX_RATE_SECONDS = 366 * 86400
MAX_RATE_LENGTH = 64


class RateSchedule(Strict):
    """A fixed rate such as ``"5 minutes"``, anchored to the job's start."""

    rate: str = Field(
        pattern=RATE_PATTERN,
        json_schema_extra={"maxLength": MAX_RATE_LENGTH},  # a client's; a stored rate is read whatever it is
        description=f'"<n> minute(s)|hour(s)|day(s)", n >= 1, in at most {MAX_RATE_LENGTH} characters; at '
        "most 366 days (longer is refused with 422)",
    )

    @field_validator("rate", mode="before")
    @classmethod
    def _positive_rate(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str):
            return value
        # before its number is read: int() raises on text of more than 4,300 digits
        if len(value) > MAX_RATE_LENGTH and not is_stored(info):
            raise ValueError(f"rate is longer than {MAX_RATE_LENGTH} characters")
        match = _RATE.fullmatch(value)
        if not match:
            raise ValueError('rate must look like "5 minutes", "1 hour" or "2 days"')
        seconds = int(match.group(1)) * _RATE_UNIT_SECONDS[match.group(2).rstrip("s")]
        if seconds <= 0:
            raise ValueError("rate must be greater than zero")
        if seconds > MAX_RATE_SECONDS:
            raise ValueError("rate must be at most 366 days")
        return value.strip(" \t")

    @property
    def interval(self) -> timedelta:
        match = _RATE.fullmatch(self.rate)
        assert match is not None  # validated above
        return timedelta(seconds=int(match.group(1)) * _RATE_UNIT_SECONDS[match.group(2).rstrip("s")])


class AtSchedule(Strict):
    """Run once, at an instant."""

    at: AwareDatetime = Field(
        description="ISO-8601 instant with an offset, e.g. 2026-12-01T10:00:00Z; it must be in the future "
        "(a past instant is refused with 422)"
    )

    @field_validator("at")
    @classmethod
    def _in_the_future(cls, value: datetime, info: ValidationInfo) -> datetime:
        value = _utc_instant(value)
        now = (info.context or {}).get("now")
        if now is not None and value <= now:
            raise ValueError(f"at must be in the future: later than {iso_z(now)}")
        return value


MAX_JOB_CALENDARS = 5


def _distinct_names(names: list[str]) -> list[str]:
    if len(set(names)) != len(names):
        raise ValueError("calendars must not repeat")
    return names


CalendarName = Annotated[str, StringConstraints(pattern=CALENDAR_NAME_PATTERN)]
CalendarNames = Annotated[
    list[CalendarName],
    Field(max_length=MAX_JOB_CALENDARS),
    AfterValidator(_distinct_names),
]
LOCAL_TIME_PATTERN = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"


class BusinessDaySchedule(Strict):
    """The n-th business day of each month (n < 0: counted from its end) at a local time, business days
    being Monday to Friday except the dates the named calendars hold (``duetime.domain.calendar_rules``)."""

    business_day: int = Field(
        ge=-23,
        le=23,
        description="which business day of the month: 1 the first, 2 the second, ... -1 the last, -2 the one "
        "before it; not 0. A month with fewer business days has no run",
    )
    at: str = Field(pattern=LOCAL_TIME_PATTERN, description='the local time of day, "HH:MM" (24-hour)')
    timezone: str = Field(
        default="UTC",
        max_length=64,
        pattern=ZONE_PATTERN,
        description="IANA time zone name, e.g. Europe/Paris",
    )
    calendars: CalendarNames = Field(
        default_factory=list,
        description=f"names of the team's calendars (at most {MAX_JOB_CALENDARS}) whose dates are not "
        "business days; none: Monday to Friday. An unknown name is refused with 422",
    )

    _iana_zone = field_validator("timezone", mode="before")(_iana_zone_name)

    @field_validator("business_day")
    @classmethod
    def _not_zero(cls, value: int) -> int:
        if value == 0:
            raise ValueError("business_day counts from 1 (the first) or from -1 (the last), never 0")
        return value

    @property
    def local_time(self) -> time:
        hours, minutes = self.at.split(":")
        return time(int(hours), int(minutes))


def _schedule_kind(value: Any) -> str | None:
    if isinstance(value, dict):
        if "business_day" in value:
            return "business_day"
        kinds = [k for k in ("cron", "rate", "at") if k in value]
        return kinds[0] if len(kinds) == 1 else None
    if isinstance(value, CronSchedule):
        return "cron"
    if isinstance(value, RateSchedule):
        return "rate"
    if isinstance(value, BusinessDaySchedule):
        return "business_day"
    return "at" if isinstance(value, AtSchedule) else None


Schedule = Annotated[
    Annotated[CronSchedule, Tag("cron")]
    | Annotated[RateSchedule, Tag("rate")]
    | Annotated[AtSchedule, Tag("at")]
    | Annotated[BusinessDaySchedule, Tag("business_day")],
    Discriminator(
        _schedule_kind,
        custom_error_type="schedule_kind",
        custom_error_message="schedule needs exactly one of 'cron', 'rate', 'at' or 'business_day'",
    ),
]


class Exclusion(Strict):
    """The dates a cron job does not run on (those of a team's calendars), and what its times on them do
    instead (``duetime.domain.calendar_rules``)."""

    calendars: CalendarNames = Field(
        min_length=1,
        description=f"names of the team's calendars (1 to {MAX_JOB_CALENDARS}) whose dates are excluded, "
        "in the cron's time zone; an unknown name is refused with 422",
    )
    on_excluded: OnExcluded = Field(
        default=OnExcluded.SKIP,
        description="a time on an excluded date: `skip` (no run), `next_business_day` or "
        "`previous_business_day` (the same wall time on the nearest Monday-to-Friday date the calendars do "
        "not hold, after or before it)",
    )
    rolled: RolledRuns = Field(
        default=RolledRuns.ONCE,
        description="times rolled onto one instant (two holidays in a row rolled onto the day after, or onto "
        "that day's own time): `once` (one run) or `each` (a run per date rolled, the k-th extra k seconds "
        "later)",
    )


# --- targets and policies --------------------------------------------------------------------------------

URL_PATTERN = r"^https?://[^/\x00-\x20]"  # an absolute http(s) URL with a host; the rest: target_guard
HEADER_NAME_PATTERN = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"  # an HTTP token (RFC 9110)
HEADER_VALUE_PATTERN = r"^[^\r\n\x00]*$"
_URL = re.compile(URL_PATTERN)
_HEADER_NAME = re.compile(HEADER_NAME_PATTERN)
RESERVED_HEADER_PREFIX = "x-duetime-"
MAX_URL_LENGTH = 2048
# REDACTED (url_secrets) is what answers show for a header value and a URL's secrets; sent back in a PATCH,
# it keeps the stored value (``HttpTarget.restore_redacted``)

HeaderName = Annotated[str, StringConstraints(pattern=HEADER_NAME_PATTERN)]
HeaderValue = Annotated[str, StringConstraints(pattern=HEADER_VALUE_PATTERN)]


def _absolute_http_url(value: Any, info: ValidationInfo) -> Any:
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

    _http_url = field_validator("url", mode="before")(_absolute_http_url)

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


class MisfirePolicy(StrEnum):
    """What to do with runs whose fire time passed more than the grace ago (scheduler down, paused poller)."""

    RUN_ONCE = "run_once"  # one run, for the latest missed time
    RUN_ALL = "run_all"  # one run per missed time (capped)
    SKIP = "skip"  # none; continue with the next future time


class OverlapPolicy(StrEnum):
    """What a scheduled time does while the job's previous scheduled run is unfinished (queued, running or
    waiting to retry). Decided by the claim from the job's active run (``JobState.active_run``)."""

    ALLOW = "allow"  # it runs anyway: runs of one job may overlap
    SKIP = "skip"  # it gets a run with status skipped (recorded, never called)
    BUFFER_ONE = "buffer_one"  # it waits for the previous run to end; a time while one already waits: skipped


class RetryPolicy(Strict):
    max_attempts: int = Field(default=4, ge=1, le=20)
    backoff_seconds: list[Annotated[int, Field(ge=0, le=MAX_SQS_DELAY_SECONDS)]] = Field(
        default_factory=lambda: [10, 30, 120], min_length=1, max_length=20
    )

    def backoff_for(self, failed_attempt: int) -> int:
        """Backoff after attempt ``failed_attempt`` (1-based); the last value repeats."""
        return self.backoff_seconds[min(failed_attempt, len(self.backoff_seconds)) - 1]


# --- jobs ------------------------------------------------------------------------------------------------


# A job's fields with their constraints, shared by ``JobSpec`` and the API's ``JobPatch``.
JobName = Annotated[str, Field(min_length=1, max_length=200)]
JitterSeconds = Annotated[int, Field(ge=0, le=3600)]
TimeoutSeconds = Annotated[int, Field(ge=1, le=600)]
MAX_CATCHUP_WINDOW_SECONDS = 7 * 86_400


class NotifyEvent(StrEnum):
    """What a job's notifications tell (``duetime.execution.notifications``)."""

    FAILED = "failed"  # a run ended failed: the target refused it for good (a 4xx other than 408/429)
    DEAD = "dead"  # a run used up its attempts (or its worker was lost on the last one)
    MISSED = "missed"  # a scheduled time missed its success deadline (``success_deadline_seconds``)
    RECOVERED = "recovered"  # the next time met after a miss


SNS_TOPIC_ARN_PATTERN = r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$"
MAX_NOTIFY_CHANNELS = 5


def _distinct_events(events: list[NotifyEvent]) -> list[NotifyEvent]:
    if len(set(events)) != len(events):
        raise ValueError("events must not repeat")
    return events


NotifyEvents = Annotated[
    list[NotifyEvent],
    Field(min_length=1, max_length=4, description="the events this channel is told of"),
]


class WebhookChannel(Strict):
    """A webhook: a signed POST of each notification (the signature scheme of runs)."""

    type: Literal["webhook"]
    url: str = Field(
        max_length=MAX_URL_LENGTH,
        pattern=URL_PATTERN,
        description="absolute http:// or https:// URL; non-public addresses and the ports targets may not "
        f'use are refused with 422, as for targets. Answers show its secrets as "{REDACTED}", as a target '
        "URL's.",
    )
    events: NotifyEvents

    _http_url = field_validator("url", mode="before")(_absolute_http_url)
    _distinct = field_validator("events")(_distinct_events)


class SnsChannel(Strict):
    """An SNS topic of the team's: duetime publishes each notification to it, if the topic opts in by the tag
    ``duetime:team`` naming the team."""

    type: Literal["sns"]
    topic_arn: str = Field(
        pattern=SNS_TOPIC_ARN_PATTERN,
        description="an SNS topic ARN, arn:aws:sns:<region>:<account>:<name>; the topic must carry the tag "
        "duetime:team=<your team id>, or nothing is published to it",
    )
    events: NotifyEvents

    _distinct = field_validator("events")(_distinct_events)


NotifyChannel = Annotated[WebhookChannel | SnsChannel, Field(discriminator="type")]


MAX_SUCCESS_DEADLINE_SECONDS = 30 * 86_400
SuccessDeadlineSeconds = Annotated[
    int,
    Field(
        ge=60,
        le=MAX_SUCCESS_DEADLINE_SECONDS,
        description="A dead-man's switch: each scheduled time of the job must have a run that succeeded "
        "within this many seconds of the nominal time, or one `missed` alert is raised for it; the next "
        "scheduled time met after a miss raises `recovered`. Left out or null: not watched. 60 to 2592000 "
        "(30 days).",
    ),
]
CatchupWindowSeconds = Annotated[
    int,
    Field(
        ge=0,
        le=MAX_CATCHUP_WINDOW_SECONDS,
        description="How late a run may still start: a due time whose fire time is older than this when it "
        "is claimed (the scheduler was down, the job's partition unpolled) is a misfire, and `misfire` "
        "decides what runs. Left out or null: the installation's default, 60 s unless an operator set "
        "DUETIME_MISFIRE_GRACE_SECONDS. 0 to 604800 (7 days).",
    ),
]


def _of_wall_times(policy: DstPolicy, info: ValidationInfo) -> DstPolicy:
    """A DST policy is for a schedule of wall times: a rate or ``at`` is an instant."""
    if isinstance(info.data.get("schedule"), RateSchedule | AtSchedule):
        raise ValueError("is for cron schedules only: a rate or an `at` time is an instant, not a wall time")
    return policy


# Checked on a policy only: a stored job's ``"dst": null`` (nearly every job) costs no validator call.
JobDstPolicy = Annotated[DstPolicy, AfterValidator(_of_wall_times)]


def _of_a_cron(exclusion: Exclusion, info: ValidationInfo) -> Exclusion:
    """Excluded dates are dates in a cron's zone: a rate or ``at`` has none, a business-day schedule names
    its calendars itself."""
    schedule = info.data.get("schedule")
    if isinstance(schedule, BusinessDaySchedule):
        raise ValueError("is for cron schedules: a business_day schedule names its calendars in `calendars`")
    if isinstance(schedule, RateSchedule | AtSchedule):
        raise ValueError(
            "is for cron schedules only: a rate or an `at` time has no time zone to tell its dates"
        )
    return exclusion


JobExclusion = Annotated[Exclusion, AfterValidator(_of_a_cron)]


class CalendarsNotResolved(RuntimeError):
    """A job that uses calendars was asked for its times before its reader resolved them
    (``JobSpec.with_days_off``)."""


StartAt = Annotated[AwareDatetime, Field(description="nothing runs before this instant")]
EndAt = Annotated[
    AwareDatetime,
    Field(description="nothing runs after this instant; it must be after start_at (else 422)"),
]


MANAGED_BY_PATTERN = r"^[a-z0-9]([a-z0-9._/-]{0,61}[a-z0-9])?$"  # as a label's key
APPLIED_DIGEST_PATTERN = r"^[0-9a-f]{16}\.[0-9a-f]{16}$"
# One or two segments (``area/job-name``) of letters, digits, ``.``, ``_`` and ``-``, each starting and ending
# with a letter or digit: a path's one or two segments, at most 129 characters (``duetime.domain.job_keys``).
_KEY_SEGMENT = r"[A-Za-z0-9]([A-Za-z0-9._-]{0,62}[A-Za-z0-9])?"
JOB_KEY_PATTERN = rf"^{_KEY_SEGMENT}(/{_KEY_SEGMENT})?$"


class JobSpec(Strict):
    """What a team asks for. Everything here is user input and validated."""

    name: JobName
    key: str | None = Field(
        default=None,
        max_length=129,
        pattern=JOB_KEY_PATTERN,
        description="a name your team chooses for the job, unique in the team (e.g. "
        "`billing/nightly-export`): one or two segments of letters, digits, `.`, `_` and `-` joined by `/`, "
        "each starting and ending with a letter or digit. Set on create or later, once; it never changes "
        "(422). `PUT /v1/jobs/by-key/{key}` creates or replaces the job of a key; a key another job of the "
        "team has is a 409",
    )
    managed_by: str | None = Field(
        default=None,
        pattern=MANAGED_BY_PATTERN,
        description="what manages the job, if anything: the `managed_by` of the jobs file `duetime apply` "
        "applied it from (e.g. `billing-repo`); an apply with `--prune` deletes the jobs of its name that "
        "its files no longer hold, and no others",
    )
    applied_digest: str | None = Field(
        default=None,
        pattern=APPLIED_DIGEST_PATTERN,
        description="written by `duetime apply`: digests of the job as it applied it (`<shape>.<content>`), "
        "by which the next apply tells an edit made elsewhere since (drift) and an unchanged job",
    )
    schedule: Schedule
    dst: JobDstPolicy | None = Field(
        default=None,
        description="what a cron does at daylight-saving changes: `gap` for wall times spring-forward "
        "skips, `overlap` for those fall-back repeats. Left out or null (or a side left out): Vixie cron's "
        "rule. For cron schedules only (a rate or `at` is an instant, not a wall time: 422)",
    )
    exclude: JobExclusion | None = Field(
        default=None,
        description="dates of the team's calendars the cron does not run on, and what its times on them do "
        "instead (skip, or roll to the next or previous business day). For cron schedules only (422 "
        "otherwise)",
    )
    target: Target
    jitter_seconds: JitterSeconds = 300
    exact: bool = False
    misfire: MisfirePolicy = MisfirePolicy.RUN_ONCE
    catchup_window_seconds: CatchupWindowSeconds | None = None
    success_deadline_seconds: SuccessDeadlineSeconds | None = None
    notify: list[NotifyChannel] = Field(
        default_factory=list,
        max_length=MAX_NOTIFY_CHANNELS,
        description="where the team hears of this job's failed and dead runs, missed deadlines and "
        "recoveries: up to 5 webhooks or SNS topics, each with its events. Delivered at least once, retried, "
        "and grouped: repeats of one event within 5 minutes of a notification come as one, with a count",
    )
    overlap: OverlapPolicy = OverlapPolicy.ALLOW
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    timeout_seconds: TimeoutSeconds = 30
    start_at: StartAt | None = None
    end_at: EndAt | None = None
    paused: bool = False
    labels: Labels = Field(default_factory=dict)

    @field_validator("start_at", "end_at")
    @classmethod
    def _whole_seconds(cls, value: datetime | None) -> datetime | None:
        return None if value is None else _utc_instant(value)

    @field_validator("end_at")
    @classmethod
    def _end_after_start(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        start = info.data.get("start_at")
        if value is not None and start is not None and value <= start:
            raise ValueError("end_at must be after start_at")
        return value

    # The dates the job's calendars exclude, as its reader resolved them (``with_days_off``); not stored.
    _days_off: DaysOff | None = PrivateAttr(default=None)

    @property
    def fires_exactly(self) -> bool:
        return self.exact or self.jitter_seconds == 0

    @property
    def calendar_names(self) -> tuple[str, ...]:
        """The team calendars the job's schedule reads: its exclusion's, or its business-day schedule's."""
        if self.exclude is not None:
            return tuple(self.exclude.calendars)
        if isinstance(self.schedule, BusinessDaySchedule):
            return tuple(self.schedule.calendars)
        return ()

    def with_days_off(self, days: DaysOff) -> Self:
        """This job with its calendars' dates resolved (``days``: a year -> the dates they hold in it), which
        its schedule math reads (``days_off``). A copy keeps them (``model_copy``); a job rebuilt from its
        fields does not."""
        resolved = self.model_copy()
        resolved._days_off = days
        return resolved

    def days_off(self) -> DaysOff:
        """The dates the job's calendars exclude, by year; raises ``CalendarsNotResolved`` if no reader
        resolved them (``with_days_off``)."""
        if self._days_off is None:
            raise CalendarsNotResolved(
                f"job {getattr(self, 'id', self.name)!r} uses calendars {list(self.calendar_names)} that "
                "were not resolved"
            )
        return self._days_off

    def redacted(self) -> Self:
        """This job as people are shown it (API answers, its history): its target's header values and URL
        secrets, and its webhooks' URL secrets, replaced by ``REDACTED`` (``url_secrets``)."""
        notify = [
            channel.model_copy(update={"url": redact_url(channel.url)})
            if isinstance(channel, WebhookChannel)
            else channel
            for channel in self.notify
        ]
        return self.model_copy(update={"target": self.target.redacted(), "notify": notify})


class JobState(ReadsStoredTolerantly):
    """Where a job is in its schedule. Written only by duetime (create, claim, pause/resume)."""

    model_config = ConfigDict(extra="forbid")

    next_nominal_at: datetime | None = None  # None: the schedule has ended
    next_fire_at: datetime | None = None  # nominal + jitter offset
    last_scheduled_at: datetime | None = None
    version: int = 0
    # The run id of the job's latest scheduled run, for a job whose overlap policy is not allow: set by the
    # claim that creates the run, in the same transaction (``DynamoStore.claim``); the next claim reads that
    # run to see whether it finished.
    active_run: str | None = None


class Job(JobSpec):
    id: str
    team: str
    created_at: datetime
    updated_at: datetime
    state: JobState = Field(default_factory=JobState)


# --- backfill --------------------------------------------------------------------------------------------

MAX_BACKFILL_RUNS = 1_000  # nominal times one backfill request may cover
_INSTANT_EXAMPLE = "2026-12-01T00:00:00Z"
_EARLIEST_BACKFILL = datetime(1970, 1, 1, tzinfo=UTC)


class BackfillWindow(Strict):
    """``POST /v1/jobs/{id}/backfill``: runs for the job's past nominal times in [from, to). Whether ``to``
    is in the past is checked against ``now`` from the validation context (the service's clock)."""

    start: AwareDatetime = Field(
        alias="from",
        description="window start (inclusive): an ISO-8601 instant with a UTC offset, e.g. "
        f"{_INSTANT_EXAMPLE}, in 1970 or later",
    )
    end: AwareDatetime = Field(
        alias="to",
        description="window end (exclusive), with a UTC offset: after `from` and not later than now "
        "(backfill is for the past; the schedule runs the future). The window may hold at most "
        f"{MAX_BACKFILL_RUNS:,} of the job's nominal times; each breach is refused with 422 naming `to`",
    )

    @field_validator("start", "end", mode="before")
    @classmethod
    def _iso_text(cls, value: Any) -> Any:
        if not isinstance(value, str):
            raise ValueError(f"must be an ISO-8601 instant with a UTC offset, e.g. {_INSTANT_EXAMPLE}")
        return value

    @field_validator("start", "end")
    @classmethod
    def _utc_since_1970(cls, value: datetime) -> datetime:
        value = _in_utc(value)
        if value < _EARLIEST_BACKFILL:
            raise ValueError(f"must be {_EARLIEST_BACKFILL.year} or later")
        return value

    @field_validator("end")
    @classmethod
    def _past_and_after_start(cls, value: datetime, info: ValidationInfo) -> datetime:
        start = info.data.get("start")
        if start is not None and value <= start:
            raise ValueError("to must be after from")
        now = (info.context or {}).get("now")
        if now is not None and value > now:
            raise ValueError("to must not be later than now: backfill is for past times")
        return value


# --- runs ------------------------------------------------------------------------------------------------


class RunStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    RETRY_WAIT = "retry_wait"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DEAD = "dead"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"  # a due time that got no call (a misfire, a disabled team): recorded, never queued

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES = frozenset(
    {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.DEAD, RunStatus.CANCELLED, RunStatus.SKIPPED}
)


class RunResult(ReadsStoredTolerantly):
    model_config = ConfigDict(extra="forbid")

    status_code: int | None = None
    duration_ms: int
    error: str | None = None
    body: str | None = None  # truncated
    retryable: bool = False


class Run(ReadsStoredTolerantly):
    """One execution of a job for one nominal time. The run id is the target's idempotency key."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    job_id: str
    team: str
    partition: int
    nominal_at: datetime
    fire_at: datetime
    status: RunStatus
    attempt: int = 1
    max_attempts: int
    owner: str | None = None
    lease_expires_at: datetime | None = None
    queue_deadline: datetime | None = None
    retry_at: datetime | None = None
    # buffer_one: the run this one waits for (the job's previous run); a worker starts it only once that run
    # has finished, and gives its lease back until then (``Worker``).
    waits_for: str | None = None
    # A scheduled run of a job with ``success_deadline_seconds``: the instant by which it must have succeeded
    # (nominal + deadline), watched by ``duetime.execution.deadlines``; None: not watched (manual runs,
    # backfills).
    success_by: datetime | None = None
    target: Target
    timeout_seconds: int
    retry: RetryPolicy
    result: RunResult | None = None
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    updated_at: datetime
    expires_at_epoch: int  # DynamoDB TTL: 30 days after creation
    # Whether the run has an entry of its own in the store's reap index as last read (a store that covers the
    # runs of a claim by one reap ticket leaves their rows without one): its result then leaves the index.
    in_reap_index: bool = Field(default=True, exclude=True)


class Team(ReadsStoredTolerantly):
    model_config = ConfigDict(extra="forbid")

    team_id: str
    name: str = ""
    max_concurrency: int = Field(default=50, ge=1, le=10_000)
    exact_quota: int = Field(default=100, ge=0, le=1_000_000)  # exact-time jobs the team may have
    max_jobs: int = Field(default=10_000, ge=0, le=1_000_000)  # jobs of any kind the team may have
    api_rate_per_second: float = Field(default=20.0, gt=0, le=10_000)  # the team's API requests, sustained
    api_burst: int = Field(default=40, ge=1, le=100_000)  # ... and at once
    # runs the team's triggers and backfills may create together in a minute (``duetime.domain.run_budget``)
    runs_per_minute: int = Field(default=1_000, ge=1, le=1_000_000)
    disabled: bool = False  # an operator stopped the team: no claims of its jobs, no API access
    token_generation: int = Field(default=0, ge=0)  # tokens of older generations no longer authenticate
    signing_secret: str | None = None
    signing_secret_id: str = "s1"  # named in every signature it makes (``key=``)
    previous_signing_secret: str | None = None  # still signs too, until ``previous_signing_secret_until``
    previous_signing_secret_id: str | None = None
    previous_signing_secret_until: datetime | None = None
    # AWS targets: the IAM role they are called under unless a target names its own (registered by the team:
    # PUT /v1/team/aws-role), and duetime's external id for the team, which every such role's trust policy
    # must require: assigned by duetime, never chosen by the team, so that no team can have duetime act
    # under another team's role (AWS's confused-deputy guidance)
    aws_role_arn: str | None = Field(default=None, pattern=ROLE_ARN_PATTERN)
    aws_external_id: str | None = None
