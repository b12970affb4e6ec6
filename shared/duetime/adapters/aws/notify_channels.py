"""Where job notifications go (``notifications.NotificationSender``): a team's webhooks and SNS topics."""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from duetime.domain.signing import signed_headers
from duetime.execution.notifications import SendResult, notification_id, payload
from duetime.execution.outcomes import Verdict, judge
from duetime.execution.worker import USER_AGENT
from duetime.ports import PendingNotification, TargetCaller, TargetRequest, TeamStore

if TYPE_CHECKING:
    from mypy_boto3_sns.client import SNSClient

log = logging.getLogger(__name__)

WEBHOOK_TIMEOUT_SECONDS = 10.0
OPT_IN_TAG = "duetime:team"  # an SNS topic takes a team's notifications only with this tag naming the team
TAGS_KEPT_SECONDS = 300.0
# SNS answers that retrying cannot change (the topic is gone, refuses us, or the request is malformed).
_SNS_PERMANENT = {
    "NotFound",
    "NotFoundException",
    "AuthorizationError",
    "InvalidParameter",
    "InvalidParameterValue",
}


class WebhookSender:
    """A signed POST of the notification's JSON: the run's signature scheme (``signing.signed_headers``: the
    Standard Webhooks headers with the job's keys, ``webhook-id`` the notification id; the old
    ``X-Duetime-Signature`` until its window ends), ``X-Duetime-Event`` and ``X-Duetime-Notification-Id``
    (the same when a notification is sent again), through the SSRF-guarded caller. 2xx delivers it; a
    refused address or a 4xx other than 408/429 is permanent; anything else is retried."""

    def __init__(self, caller: TargetCaller, teams: TeamStore) -> None:
        self.caller = caller
        self.teams = teams

    def send(self, group: PendingNotification, now: datetime) -> SendResult:
        url = json.loads(group.channel)["url"]
        body = json.dumps(payload(group), separators=(",", ":")).encode()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "X-Duetime-Event": group.event,
            "X-Duetime-Notification-Id": notification_id(group),
        }
        try:
            team = self.teams.get_team(group.team)
        except Exception as exc:  # the team unreadable now: try again later rather than send unsigned
            return SendResult(False, f"team not readable: {type(exc).__name__}")
        if team is not None:
            sent_as = headers["X-Duetime-Notification-Id"]
            headers.update(signed_headers(team, group.job_id, sent_as, now, body))
        response = self.caller.call(TargetRequest(url, "POST", headers, body, WEBHOOK_TIMEOUT_SECONDS))
        verdict = judge(response)
        error = response.error or f"HTTP {response.status_code}"
        return SendResult(verdict is Verdict.SUCCESS, error, permanent=verdict is Verdict.PERMANENT)


class SnsTopics:
    """A publish of the notification's JSON to the channel's topic, if the topic opts in to the team: it
    carries the tag ``duetime:team`` with the team's id (read with ListTagsForResource, kept 5 minutes). So a
    team cannot make duetime publish to a topic that is not its own, even one duetime's role may publish to.
    FIFO topics get the notification id as group and deduplication id."""

    def __init__(self, client: SNSClient, clock: Any = time.monotonic) -> None:
        self.client = client
        self.clock = clock
        self._tags: dict[str, tuple[float, str | None]] = {}

    def send(self, group: PendingNotification, now: datetime) -> SendResult:
        arn = json.loads(group.channel)["topic_arn"]
        try:
            owner = self._team_of(arn)
            if owner != group.team:
                why = f"the topic does not opt in: it needs the tag {OPT_IN_TAG}={group.team}"
                return SendResult(False, why, permanent=True)
            request: dict[str, Any] = {
                "TopicArn": arn,
                "Message": json.dumps(payload(group)),
                "Subject": f"duetime: {group.event} {group.job_id}"[:100],
                "MessageAttributes": {
                    "event": {"DataType": "String", "StringValue": group.event},
                    "team": {"DataType": "String", "StringValue": group.team},
                },
            }
            if arn.endswith(".fifo"):
                request["MessageGroupId"] = group.job_id
                request["MessageDeduplicationId"] = notification_id(group)[-128:]
            self.client.publish(**request)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            return SendResult(False, f"SNS {code}", permanent=code in _SNS_PERMANENT)
        except Exception as exc:  # a connection trouble past the SDK's retries: try again later
            return SendResult(False, f"SNS {type(exc).__name__}")
        return SendResult(True)

    def _team_of(self, arn: str) -> str | None:
        kept = self._tags.get(arn)
        if kept is not None and self.clock() - kept[0] < TAGS_KEPT_SECONDS:
            return kept[1]
        tags = self.client.list_tags_for_resource(ResourceArn=arn).get("Tags", [])
        team = next((tag["Value"] for tag in tags if tag["Key"] == OPT_IN_TAG), None)
        self._tags[arn] = (self.clock(), team)
        return team


class ChannelSender:
    """Sends each notification by its channel's type."""

    def __init__(self, webhooks: WebhookSender, topics: SnsTopics) -> None:
        self.webhooks = webhooks
        self.topics = topics

    def send(self, group: PendingNotification, now: datetime) -> SendResult:
        kind = json.loads(group.channel).get("type")
        if kind == "webhook":
            return self.webhooks.send(group, now)
        if kind == "sns":
            return self.topics.send(group, now)
        return SendResult(False, f"unknown channel type {kind!r}", permanent=True)
