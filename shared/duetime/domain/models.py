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

One module a concept: ``model_base``, ``schedule_kinds``, ``http_target``, ``policies``, ``notify_channels``,
``job_spec``, ``backfill``, ``runs``, ``teams``. This module exports every name of them.
"""

from duetime.domain.backfill import MAX_BACKFILL_RUNS, BackfillWindow
from duetime.domain.http_target import (
    HEADER_NAME_PATTERN,
    HEADER_VALUE_PATTERN,
    MAX_URL_LENGTH,
    RESERVED_HEADER_PREFIX,
    TARGET_TYPES,
    URL_PATTERN,
    HeaderName,
    HeaderValue,
    HttpTarget,
    StoredSecretsWithheld,
    Target,
    absolute_http_url,
    parse_target,
)
from duetime.domain.job_spec import (
    APPLIED_DIGEST_PATTERN,
    JOB_KEY_PATTERN,
    MANAGED_BY_PATTERN,
    MAX_CATCHUP_WINDOW_SECONDS,
    MAX_SUCCESS_DEADLINE_SECONDS,
    CalendarsNotResolved,
    CatchupWindowSeconds,
    EndAt,
    JitterSeconds,
    Job,
    JobDstPolicy,
    JobExclusion,
    JobName,
    JobSpec,
    JobState,
    StartAt,
    SuccessDeadlineSeconds,
    TimeoutSeconds,
)
from duetime.domain.model_base import Strict
from duetime.domain.notify_channels import (
    MAX_NOTIFY_CHANNELS,
    SNS_TOPIC_ARN_PATTERN,
    NotifyChannel,
    NotifyEvent,
    NotifyEvents,
    SnsChannel,
    WebhookChannel,
)
from duetime.domain.policies import MAX_SQS_DELAY_SECONDS, MisfirePolicy, OverlapPolicy, RetryPolicy
from duetime.domain.runs import TERMINAL_STATUSES, Run, RunResult, RunStatus
from duetime.domain.schedule_kinds import (
    CRON_ALIASES,
    CRON_PATTERN,
    LOCAL_TIME_PATTERN,
    MAX_CRON_LENGTH,
    MAX_JOB_CALENDARS,
    MAX_RATE_LENGTH,
    MAX_RATE_SECONDS,
    RATE_PATTERN,
    ZONE_PATTERN,
    AtSchedule,
    BusinessDaySchedule,
    CalendarName,
    CalendarNames,
    CronSchedule,
    Exclusion,
    RateSchedule,
    Schedule,
    in_utc,
    utc_instant,
)
from duetime.domain.teams import Team

__all__ = [
    "APPLIED_DIGEST_PATTERN",
    "CRON_ALIASES",
    "CRON_PATTERN",
    "HEADER_NAME_PATTERN",
    "HEADER_VALUE_PATTERN",
    "JOB_KEY_PATTERN",
    "LOCAL_TIME_PATTERN",
    "MANAGED_BY_PATTERN",
    "MAX_BACKFILL_RUNS",
    "MAX_CATCHUP_WINDOW_SECONDS",
    "MAX_CRON_LENGTH",
    "MAX_JOB_CALENDARS",
    "MAX_NOTIFY_CHANNELS",
    "MAX_RATE_LENGTH",
    "MAX_RATE_SECONDS",
    "MAX_SQS_DELAY_SECONDS",
    "MAX_SUCCESS_DEADLINE_SECONDS",
    "MAX_URL_LENGTH",
    "RATE_PATTERN",
    "RESERVED_HEADER_PREFIX",
    "SNS_TOPIC_ARN_PATTERN",
    "TARGET_TYPES",
    "TERMINAL_STATUSES",
    "URL_PATTERN",
    "ZONE_PATTERN",
    "AtSchedule",
    "BackfillWindow",
    "BusinessDaySchedule",
    "CalendarName",
    "CalendarNames",
    "CalendarsNotResolved",
    "CatchupWindowSeconds",
    "CronSchedule",
    "EndAt",
    "Exclusion",
    "HeaderName",
    "HeaderValue",
    "HttpTarget",
    "JitterSeconds",
    "Job",
    "JobDstPolicy",
    "JobExclusion",
    "JobName",
    "JobSpec",
    "JobState",
    "MisfirePolicy",
    "NotifyChannel",
    "NotifyEvent",
    "NotifyEvents",
    "OverlapPolicy",
    "RateSchedule",
    "RetryPolicy",
    "Run",
    "RunResult",
    "RunStatus",
    "Schedule",
    "SnsChannel",
    "StartAt",
    "StoredSecretsWithheld",
    "Strict",
    "SuccessDeadlineSeconds",
    "Target",
    "Team",
    "TimeoutSeconds",
    "WebhookChannel",
    "absolute_http_url",
    "in_utc",
    "parse_target",
    "utc_instant",
]
