"""Notices, their outbox and alerts.

A part of ``duetime.ports``: every port, its docstrings the contract every adapter keeps.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from duetime.domain.timeutil import iso_z


@dataclass(frozen=True)
class Notice:
    """One event of a job for one of its notify channels (``duetime.execution.notifications``): what
    ``NotificationOutbox.enqueue`` groups. ``channel``: the channel as canonical JSON (type and address)."""

    team: str
    job_id: str
    event: str  # a ``NotifyEvent`` value
    channel: str
    run_id: str
    attempt: int
    detail: str
    at: datetime


@dataclass(frozen=True)
class PendingNotification:
    """A group of one job's notices for one (event, channel), as the outbox holds it: ``pending`` notices not
    yet delivered, the first and the latest of them, and when it is next due (``due_at``; None: nothing to
    send and no quiet window running)."""

    job_id: str
    event: str
    channel: str
    team: str
    pending: int
    first_at: datetime
    last_at: datetime
    run_id: str
    attempt: int
    detail: str
    due_at: datetime | None
    attempts: int = 0  # delivery attempts of this group so far
    sequence: int = 0  # notifications of this (job, event, channel) delivered before this one
    # The notices the notification being delivered stands for: fixed when it is first taken, so that sending
    # it again (a retry, a deliverer that lost its lease) carries the same count under the same id; notices
    # that come in meanwhile wait for the next one. 0 while none is being delivered.
    sending: int = 0


class NotificationOutbox(Protocol):
    """Each job's notices, grouped per (event, channel) in one record, and when each group is due to be
    delivered: at once for the first notice after a quiet spell, at the end of the quiet window for repeats
    (``duetime.execution.notifications``). Every change below is one conditional write that returns False (or
    None) on a lost race; ``due_at`` as read is what a deliverer's writes are conditioned on
    (NOTICE_DUE_AS_READ), so of several deliverers one takes a group, and a deliverer that lost it (its lease
    passed) changes nothing."""

    def enqueue(self, notice: Notice) -> None:
        """Add ``notice`` to its group (unconditional): one more pending, the latest run and detail, the first
        notice's time if none is pending, and due at ``notice.at`` unless the group already has a due time
        (a delivery lease, a retry or a quiet window stands)."""
        ...

    def due_notifications(self, now: datetime, limit: int) -> list[PendingNotification]:
        """Groups due before ``now`` (to the second), oldest first, up to ``limit``; read consistently."""
        ...

    def take(self, group: PendingNotification, until: datetime) -> PendingNotification | None:
        """Lease a due group for delivery until ``until`` (its ``due_at`` moves there; NOTICE_DUE_AS_READ),
        fixing ``sending`` at ``pending`` unless a notification is already being delivered: the group as
        stored after, or None when someone else moved it first."""
        ...

    def delivered(self, taken: PendingNotification, quiet_until: datetime) -> bool:
        """The taken group's notification was delivered: its ``sending`` notices subtracted from ``pending``,
        one more delivered, the attempts reset, due again at ``quiet_until`` (a notice in between waits)."""
        ...

    def retry_later(self, taken: PendingNotification, due_at: datetime) -> bool:
        """The delivery failed: one more attempt counted, due again at ``due_at``."""
        ...

    def give_up(self, taken: PendingNotification) -> bool:
        """Stop delivering the taken group's notification (a permanent failure, or too many attempts): its
        ``sending`` notices are subtracted as if delivered, the attempts reset, and the group leaves the due
        index; a notice that came in during the attempts waits for the next one, which is due at once."""
        ...

    def rest(self, taken: PendingNotification) -> bool:
        """A taken group with nothing pending (its quiet window ended) leaves the due index, only if still
        nothing is pending (NOTICE_NONE_PENDING): the next notice is due at once."""
        ...


@dataclass(frozen=True)
class Alert:
    kind: str  # "run_dead" | "run_failed" | "missed" | "recovered" (``duetime.execution.deadlines``)
    team: str
    job_id: str
    run_id: str
    attempt: int
    detail: str
    at: datetime


class AlertSink(Protocol):
    def publish(self, alert: Alert) -> None: ...


@dataclass(frozen=True)
class SendResult:
    ok: bool
    error: str = ""
    permanent: bool = False  # retrying cannot help


class NotificationSender(Protocol):
    def send(self, group: PendingNotification, now: datetime) -> SendResult:
        """Deliver one notification of ``group`` (``payload``) to its channel; never raises."""
        ...


def channel_id(channel: str) -> str:
    """A short stable id of a channel key (in the outbox's keys and the notification ids)."""
    return hashlib.sha256(channel.encode()).hexdigest()[:12]


def notification_id(group: PendingNotification) -> str:
    """The id of the notification a taken group sends: the same each time that notification is sent."""
    return f"{group.job_id}:{group.event}:{channel_id(group.channel)}:{group.sequence + 1}"


def payload(group: PendingNotification) -> dict[str, Any]:
    """What a notification says (the webhook's JSON body; the SNS message)."""
    return {
        "notification_id": notification_id(group),
        "event": group.event,
        "team": group.team,
        "job_id": group.job_id,
        "count": group.sending,
        "first_at": iso_z(group.first_at),
        "last_at": iso_z(group.last_at),
        "run_id": group.run_id,
        "attempt": group.attempt,
        "detail": group.detail,
    }
