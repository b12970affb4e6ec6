"""Per-job notifications (``JobSpec.notify``): a job's failed and dead runs, missed success deadlines and
recoveries, told to the team's webhooks and SNS topics.

**Producing.** Every alert duetime raises about a job (``ports.Alert``: ``run_failed``, ``run_dead``,
``missed``, ``recovered``) goes through ``JobNotifier``, an ``AlertSink`` in front of the operators' sink: the
operators get it as before, and for each of the job's channels that asked for the event a ``Notice`` is put
in the outbox (``ports.NotificationOutbox``), one record per (job, event, channel).

**Grouping.** The first notice after a quiet spell is due at once. A notification delivered opens a quiet
window of ``GROUP_WINDOW`` (5 minutes) for that (job, event, channel): notices in it are counted, and one
notification at the window's end carries them all (``count``, the first and the latest time, the latest run
and detail). A job failing every minute tells a webhook once, then every 5 minutes with a count.

**Delivering.** Pollers deliver what is due (``deliver_due``, in the background of their reap passes). A
deliverer leases a group (``DELIVERY_LEASE``) before sending, so of several pollers one sends it; one that
dies mid-send leaves the lease to pass, and the group is sent again: **at least once**. Each notification
carries an id (``<job id>:<event>:<channel id>:<sequence>``) that stays the same when it is sent again, for
the receiver to drop repeats. A failure is retried after ``RETRY_DELAYS`` (10 s doubling to an hour), for
about a day (``MAX_DELIVERY_ATTEMPTS``); a permanent one (a webhook refused by the SSRF guard or answering
a 4xx other than 408/429, an SNS topic that does not opt in) is given up at once and logged.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime.domain.clock import Clock
from duetime.domain.models import NotifyChannel, NotifyEvent
from duetime.ports import Alert, AlertSink, JobStore, Notice, NotificationOutbox, PendingNotification
from duetime.ports.notifications import (
    NotificationSender,
    SendResult,
    channel_id,
)

log = logging.getLogger(__name__)

GROUP_WINDOW = timedelta(minutes=5)
DELIVERY_LEASE = timedelta(seconds=60)
RETRY_DELAYS = (10, 20, 40, 80, 160, 320, 640, 1280, 2560, 3600)  # seconds; then hourly
MAX_DELIVERY_ATTEMPTS = 32  # about a day of retries
DELIVERY_PAGE_SIZE = 25
EVENT_OF_ALERT = {
    "run_failed": NotifyEvent.FAILED,
    "run_dead": NotifyEvent.DEAD,
    "missed": NotifyEvent.MISSED,
    "recovered": NotifyEvent.RECOVERED,
}


def channel_key(channel: NotifyChannel) -> str:
    """A channel as the outbox names it: canonical JSON of its type and address (not its events, so a job
    edited to ask for more events keeps its groups)."""
    return json.dumps(
        channel.model_dump(mode="json", exclude={"events"}), sort_keys=True, separators=(",", ":")
    )


class JobNotifier:
    """An ``AlertSink``: each alert to the operators' sink, then to the outbox for every channel of the job
    that asked for its event. Reading the job or writing the outbox may fail; that is logged, never raised
    (the alert that caused it was already published to the operators)."""

    def __init__(self, operators: AlertSink, jobs: JobStore, outbox: NotificationOutbox) -> None:
        self.operators = operators
        self.jobs = jobs
        self.outbox = outbox

    def publish(self, alert: Alert) -> None:
        self.operators.publish(alert)
        event = EVENT_OF_ALERT.get(alert.kind)
        if event is None:
            return
        try:
            job = self.jobs.get_job(alert.job_id)
            for channel in channels_asking(job.notify if job is not None else [], event):
                self.outbox.enqueue(
                    Notice(
                        alert.team,
                        alert.job_id,
                        event.value,
                        channel_key(channel),
                        alert.run_id,
                        alert.attempt,
                        alert.detail,
                        alert.at,
                    )
                )
        except Exception:
            log.warning(
                "a job notification could not be queued", exc_info=True, extra={"job_id": alert.job_id}
            )


@dataclass
class DeliveryReport:
    delivered: int = 0
    retried: int = 0
    given_up: int = 0
    rested: int = 0
    lost_races: int = 0


def retry_delay(attempts: int) -> timedelta:
    """The wait after the ``attempts``-th failed delivery (1-based)."""
    return timedelta(seconds=RETRY_DELAYS[min(attempts, len(RETRY_DELAYS)) - 1])


def deliver_due(
    outbox: NotificationOutbox, sender: NotificationSender, now: datetime, limit: int = DELIVERY_PAGE_SIZE
) -> DeliveryReport:
    """Deliver the groups due at ``now``: each leased, sent, and then counted delivered, retried later or
    given up; a group with nothing pending (its quiet window ended) rests."""
    report = DeliveryReport()
    for due in outbox.due_notifications(now, limit):
        taken = outbox.take(due, now + DELIVERY_LEASE)
        if taken is None:
            report.lost_races += 1
            continue
        if taken.pending <= 0:
            report.rested += outbox.rest(taken)
            continue
        result = sender.send(taken, now)
        _settle(outbox, taken, result, now, report)
    return report


def _settle(
    outbox: NotificationOutbox,
    taken: PendingNotification,
    result: SendResult,
    now: datetime,
    report: DeliveryReport,
) -> None:
    where = {"job_id": taken.job_id, "event": taken.event, "channel": channel_id(taken.channel)}
    if result.ok:
        report.delivered += outbox.delivered(taken, now + GROUP_WINDOW)
    elif result.permanent or taken.attempts + 1 >= MAX_DELIVERY_ATTEMPTS:
        log.error("a job notification was given up", extra={**where, "error": result.error})
        report.given_up += outbox.give_up(taken)
    else:
        log.warning("a job notification failed; retried later", extra={**where, "error": result.error})
        report.retried += outbox.retry_later(taken, now + retry_delay(taken.attempts + 1))


def channels_asking(channels: Sequence[NotifyChannel], event: NotifyEvent) -> list[NotifyChannel]:
    """The channels of a job that asked to be told of ``event``."""
    return [channel for channel in channels if event in channel.events]


class BackgroundDelivery:
    """``deliver_due`` off a poller's loop: ``kick`` starts a pass in a thread of its own unless one is still
    running, so a slow webhook (up to 10 s a call) never holds up a claim. A pass that fails is logged; what
    it had leased comes back when its lease passes."""

    def __init__(self, outbox: NotificationOutbox, sender: NotificationSender, clock: Clock) -> None:
        self.outbox = outbox
        self.sender = sender
        self.clock = clock
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="notify")
        self._running: Future[DeliveryReport | None] | None = None

    def kick(self) -> bool:
        """Start a pass unless one is running; whether one was started."""
        if self._running is not None and not self._running.done():
            return False
        self._running = self._pool.submit(self._pass)
        return True

    def _pass(self) -> DeliveryReport | None:
        try:
            return deliver_due(self.outbox, self.sender, self.clock.now())
        except Exception:
            log.warning("a notification delivery pass failed", exc_info=True)
            return None
