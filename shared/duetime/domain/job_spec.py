"""A job: its spec as a client writes it, the state the scheduler keeps, and the job as stored.

A part of ``duetime.domain.models`` (which exports every name of these modules).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Self

from pydantic import (
    AfterValidator,
    AwareDatetime,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
)

from duetime.domain.calendar_rules import DaysOff
from duetime.domain.dst import DstPolicy
from duetime.domain.http_target import Target
from duetime.domain.labels import Labels
from duetime.domain.model_base import Strict
from duetime.domain.notify_channels import MAX_NOTIFY_CHANNELS, NotifyChannel, WebhookChannel
from duetime.domain.policies import MisfirePolicy, OverlapPolicy, RetryPolicy
from duetime.domain.schedule_kinds import (
    AtSchedule,
    BusinessDaySchedule,
    Exclusion,
    RateSchedule,
    Schedule,
    utc_instant,
)
from duetime.domain.stored_format import ReadsStoredTolerantly
from duetime.domain.url_secrets import redact_url

# A job's fields with their constraints, shared by ``JobSpec`` and the API's ``JobPatch``.
JobName = Annotated[str, Field(min_length=1, max_length=200)]


JitterSeconds = Annotated[int, Field(ge=0, le=3600)]


TimeoutSeconds = Annotated[int, Field(ge=1, le=600)]


MAX_CATCHUP_WINDOW_SECONDS = 7 * 86_400


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
        return None if value is None else utc_instant(value)

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
