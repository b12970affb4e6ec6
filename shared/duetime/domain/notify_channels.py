"""Where a job's notifications go: webhooks and SNS topics, and the events they ask for.

A part of ``duetime.domain.models`` (which exports every name of these modules).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, field_validator

from duetime.domain.http_target import MAX_URL_LENGTH, URL_PATTERN, absolute_http_url
from duetime.domain.model_base import Strict
from duetime.domain.url_secrets import REDACTED


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

    _http_url = field_validator("url", mode="before")(absolute_http_url)
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
