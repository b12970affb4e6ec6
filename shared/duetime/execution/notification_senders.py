"""Sending job notifications (``ports.NotificationSender``): a signed POST to a team's webhook, and the choice
of sender by the channel's type (SNS topics: ``duetime.adapters.aws.notify_channels.SnsTopics``)."""

from __future__ import annotations

import json
from datetime import datetime

from duetime.domain.signing import signed_headers
from duetime.execution.outcomes import Verdict, judge
from duetime.execution.worker import USER_AGENT
from duetime.ports import PendingNotification, TargetCaller, TargetRequest, TeamStore
from duetime.ports.notifications import NotificationSender, SendResult, notification_id, payload

WEBHOOK_TIMEOUT_SECONDS = 10.0


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


class ChannelSender:
    """Sends each notification by its channel's type."""

    def __init__(self, webhooks: NotificationSender, topics: NotificationSender) -> None:
        self.webhooks = webhooks
        self.topics = topics

    def send(self, group: PendingNotification, now: datetime) -> SendResult:
        kind = json.loads(group.channel).get("type")
        if kind == "webhook":
            return self.webhooks.send(group, now)
        if kind == "sns":
            return self.topics.send(group, now)
        return SendResult(False, f"unknown channel type {kind!r}", permanent=True)
