"""Job notifications to SNS topics (``ports.NotificationSender``); webhooks and the choice by channel are
``duetime.execution.notification_senders``'s."""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from duetime.ports import PendingNotification
from duetime.ports.notifications import SendResult, notification_id, payload

if TYPE_CHECKING:
    from mypy_boto3_sns.client import SNSClient

log = logging.getLogger(__name__)

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
