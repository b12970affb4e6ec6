"""Per-job notifications (``duetime.execution.notifications``) on the in-memory twin with a manual clock:
which alerts become notices, how notices group, how deliveries are retried, given up and signed; SNS topics on
moto."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from duetime.adapters.aws.notify_channels import SnsTopics
from duetime.adapters.memory import MemoryAlerts, MemoryStore
from duetime.domain.clock import ManualClock
from duetime.domain.models import Job, JobSpec, Team
from duetime.domain.signing import verify_signature
from duetime.execution.notification_senders import ChannelSender, WebhookSender
from duetime.execution.notifications import (
    DELIVERY_LEASE,
    GROUP_WINDOW,
    MAX_DELIVERY_ATTEMPTS,
    BackgroundDelivery,
    JobNotifier,
    channel_key,
    deliver_due,
    retry_delay,
)
from duetime.ports import Alert, Notice, PendingNotification, TargetRequest, TargetResponse
from duetime.ports.notifications import SendResult, notification_id, payload

from ..twin_support import T0, a_job, at

HOOK = {"type": "webhook", "url": "https://hooks.example.com/duetime", "events": ["dead", "missed"]}
TOPIC = "arn:aws:sns:us-east-1:123456789012:team-a-alerts"


@dataclass
class Sender:
    """A ``NotificationSender`` answering from ``results`` (then ok) that keeps what it was asked to send."""

    results: list[SendResult] = field(default_factory=list)
    sent: list[PendingNotification] = field(default_factory=list)

    def send(self, group: PendingNotification, now: datetime) -> SendResult:
        self.sent.append(group)
        return self.results.pop(0) if self.results else SendResult(True)


@dataclass
class World:
    clock: ManualClock
    store: MemoryStore
    operators: MemoryAlerts
    notifier: JobNotifier
    sender: Sender

    def job(self, *channels: dict[str, Any]) -> Job:
        job = a_job(T0, notify=list(channels))
        self.store.put_job(job, T0)
        return job

    def alert(self, job: Job, kind: str = "run_dead", run: str = "r1") -> None:
        self.notifier.publish(
            Alert(kind, job.team, job.id, f"{job.id}@{run}", 3, f"HTTP 503 ({run})", self.clock.now())
        )

    def deliver(self) -> list[PendingNotification]:
        """One delivery pass at the clock's now; what it sent."""
        before = len(self.sender.sent)
        deliver_due(self.store, self.sender, self.clock.now())
        return self.sender.sent[before:]


@pytest.fixture
def world() -> World:
    store = MemoryStore()
    operators = MemoryAlerts()
    return World(ManualClock(T0), store, operators, JobNotifier(operators, store, store), Sender())


def test_an_alert_becomes_a_notice_for_each_channel_that_asked_for_its_event(world: World) -> None:
    other = {"type": "webhook", "url": "https://other.example.com/x", "events": ["failed"]}
    job = world.job(HOOK, other)
    world.alert(job, "run_dead")
    world.alert(job, "run_failed")
    world.alert(job, "lease_lost")  # not an event a job is told of

    assert [a.kind for a in world.operators.published] == ["run_dead", "run_failed", "lease_lost"]
    world.clock.advance(1)
    sent = world.deliver()
    assert sorted((g.event, json.loads(g.channel)["url"]) for g in sent) == [
        ("dead", HOOK["url"]),
        ("failed", other["url"]),
    ]


def test_a_job_without_channels_or_a_deleted_job_queues_nothing(world: World) -> None:
    plain = world.job()
    world.alert(plain)
    gone = a_job(T0, notify=[HOOK])  # never stored
    world.alert(gone)
    world.clock.advance(1)
    assert world.deliver() == [] and len(world.operators.published) == 2


def test_the_first_notice_goes_at_once_and_repeats_in_the_window_come_as_one_with_a_count(
    world: World,
) -> None:
    job = world.job(HOOK)
    world.alert(job, run="r1")
    world.clock.advance(1)
    (first,) = world.deliver()
    assert (first.pending, first.run_id) == (1, f"{job.id}@r1")

    for run in ("r2", "r3", "r4"):  # a job failing every minute
        world.clock.advance(60)
        world.alert(job, run=run)
        assert world.deliver() == []  # held for the window
    world.clock.set(T0 + GROUP_WINDOW + timedelta(seconds=2))
    (grouped,) = world.deliver()
    assert (grouped.pending, grouped.first_at, grouped.last_at) == (3, at(61), at(181))
    assert (grouped.run_id, grouped.sequence) == (f"{job.id}@r4", 1)

    world.clock.advance(GROUP_WINDOW.total_seconds() + 1)
    assert world.deliver() == []  # the window ended with nothing pending: the group rests
    world.clock.advance(3600)
    world.alert(job, run="r5")
    world.clock.advance(1)
    (later,) = world.deliver()  # after a quiet spell: at once again
    assert (later.pending, later.sequence) == (1, 2)


def test_a_failed_delivery_is_retried_later_and_the_same_notification_is_sent_again(world: World) -> None:
    job = world.job(HOOK)
    world.alert(job)
    world.sender.results = [SendResult(False, "HTTP 503")]
    world.clock.advance(1)
    (failed,) = world.deliver()

    world.clock.advance(retry_delay(1).total_seconds() - 1)
    assert world.deliver() == []  # not before its retry
    world.clock.advance(2)
    (again,) = world.deliver()
    assert (again.attempts, again.sequence, again.pending) == (1, failed.sequence, 1)


def test_a_permanent_failure_is_given_up_at_once_and_too_many_failures_in_the_end(world: World) -> None:
    job = world.job(HOOK)
    world.alert(job)
    world.sender.results = [SendResult(False, "HTTP 404", permanent=True)]
    world.clock.advance(1)
    assert len(world.deliver()) == 1
    world.clock.advance(86_400)
    assert world.deliver() == []

    world.alert(job, run="r2")
    world.sender.results = [SendResult(False, "timeout")] * MAX_DELIVERY_ATTEMPTS
    tries = 0
    for _ in range(MAX_DELIVERY_ATTEMPTS + 5):
        world.clock.advance(3601)
        tries += len(world.deliver())
    assert tries == MAX_DELIVERY_ATTEMPTS


def test_a_notification_sent_again_after_its_deliverer_died_has_the_same_id_and_count(world: World) -> None:
    job = world.job(HOOK)
    world.alert(job, run="r1")
    world.clock.advance(1)
    (due,) = world.store.due_notifications(world.clock.now(), 10)
    first = world.store.take(due, world.clock.now() + DELIVERY_LEASE)  # a deliverer takes it, then dies
    assert first is not None and first.sending == 1
    world.alert(job, run="r2")  # a notice while it was being sent

    world.clock.advance(DELIVERY_LEASE.total_seconds() + 1)
    (again,) = world.deliver()  # another deliverer, once the lease passed

    assert (notification_id(again), again.sending) == (notification_id(first), 1)
    assert payload(again)["count"] == 1
    world.clock.advance(GROUP_WINDOW.total_seconds() + 1)
    (later,) = world.deliver()  # the notice that came meanwhile: the next notification
    assert (later.sending, later.sequence) == (1, 1) and notification_id(later) != notification_id(first)


def test_two_deliverers_racing_send_a_group_once(world: World) -> None:
    job = world.job(HOOK)
    world.alert(job)
    world.clock.advance(1)
    (due,) = world.store.due_notifications(world.clock.now(), 10)
    assert world.store.take(due, at(60)) is not None  # another poller took it first

    assert world.deliver() == []


def test_retries_back_off_from_10_seconds_to_an_hour() -> None:
    assert [retry_delay(n).total_seconds() for n in (1, 2, 3, 10, 30)] == [10, 20, 40, 3600, 3600]


@dataclass
class Caller:
    status: int | None = 200
    permanent: bool = False
    requests: list[TargetRequest] = field(default_factory=list)

    def call(self, request: TargetRequest) -> TargetResponse:
        self.requests.append(request)
        return TargetResponse(
            self.status, "", None if self.status else "refused", 3, permanent=self.permanent
        )


def group_for(job: Job, channel: dict[str, Any], pending: int = 2) -> PendingNotification:
    key = channel_key(
        JobSpec.model_validate(
            {**job.model_dump(include={"name", "schedule", "target"}), "notify": [channel]}
        ).notify[0]
    )
    return PendingNotification(
        job.id,
        "dead",
        key,
        job.team,
        pending,
        T0,
        at(60),
        f"{job.id}@r",
        3,
        "HTTP 503",
        at(61),
        sending=pending,
    )


def test_a_webhook_is_a_signed_post_whose_notification_id_stays_when_it_is_sent_again() -> None:
    store = MemoryStore()
    store.put_team(Team(team_id="team-a", signing_secret="s3cret"))
    job = a_job(T0)
    caller = Caller()
    sender = WebhookSender(caller, store)

    assert sender.send(group_for(job, HOOK), at(62)).ok
    assert sender.send(group_for(job, HOOK), at(90)).ok
    first, again = caller.requests
    assert (first.url, first.method) == (HOOK["url"], "POST")
    body = json.loads(first.body or b"")
    assert (body["event"], body["count"], body["job_id"], body["first_at"]) == (
        "dead",
        2,
        job.id,
        "2026-12-01T10:00:00Z",
    )
    assert (
        first.headers["X-Duetime-Notification-Id"]
        == again.headers["X-Duetime-Notification-Id"]
        == body["notification_id"]
    )
    assert verify_signature(
        "s3cret", first.headers["X-Duetime-Signature"], first.body or b"", int(at(62).timestamp())
    )


@pytest.mark.parametrize(
    ("status", "permanent", "ok", "gives_up"),
    [
        (204, False, True, False),
        (503, False, False, False),
        (429, False, False, False),
        (404, False, False, True),
        (None, True, False, True),
    ],
)
def test_a_webhooks_answer_decides_delivered_retried_or_given_up(
    status: int | None, permanent: bool, ok: bool, gives_up: bool
) -> None:
    result = WebhookSender(Caller(status, permanent), MemoryStore()).send(group_for(a_job(T0), HOOK), at(62))
    assert (result.ok, result.permanent) == (ok, gives_up)


@mock_aws
def test_an_sns_topic_gets_a_teams_notifications_only_when_it_opts_in_by_its_tag() -> None:
    sns = boto3.client("sns", region_name="us-east-1")
    sqs = boto3.client("sqs", region_name="us-east-1")
    topic = sns.create_topic(Name="team-a-alerts")["TopicArn"]
    queue_url = sqs.create_queue(QueueName="inbox")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(
        TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"}
    )
    channel = {"type": "sns", "topic_arn": topic, "events": ["dead"]}
    job = a_job(T0)
    now = [0.0]
    topics = SnsTopics(sns, clock=lambda: now[0])

    untagged = topics.send(group_for(job, channel), at(62))
    assert (untagged.ok, untagged.permanent) == (False, True) and "duetime:team=team-a" in untagged.error
    sns.tag_resource(ResourceArn=topic, Tags=[{"Key": "duetime:team", "Value": "team-b"}])
    now[0] += 301  # the tags read are kept 5 minutes
    assert not topics.send(group_for(job, channel), at(62)).ok  # another team's topic
    sns.tag_resource(ResourceArn=topic, Tags=[{"Key": "duetime:team", "Value": "team-a"}])
    now[0] += 301
    assert (
        ChannelSender(WebhookSender(Caller(), MemoryStore()), topics).send(group_for(job, channel), at(62)).ok
    )

    (message,) = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]
    assert json.loads(message["Body"])["event"] == "dead"


def test_a_background_delivery_runs_one_pass_at_a_time() -> None:
    store = MemoryStore()
    started, release = threading.Event(), threading.Event()

    class Slow:
        def send(self, group: PendingNotification, now: datetime) -> SendResult:
            started.set()
            release.wait(5)
            return SendResult(True)

    store.enqueue(Notice("team-a", "j1", "dead", "{}", "j1@r", 1, "x", T0))
    delivery = BackgroundDelivery(store, Slow(), ManualClock(at(1)))
    assert delivery.kick() is True
    assert started.wait(5)
    assert delivery.kick() is False  # the first pass is still sending
    release.set()
    assert delivery._running is not None and delivery._running.result(5) is not None
    assert delivery.kick() is True


def test_the_cli_sends_notify_channels_and_a_success_deadline_with_a_new_job(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from duetime import cli
    from duetime.client import DuetimeClient

    sent: list[Any] = []

    def request(self: DuetimeClient, method: str, path: str, body: Any = None, **_: Any) -> Any:
        sent.append((method, path, body))
        return {"id": "j1"}

    monkeypatch.setattr(DuetimeClient, "request", request)
    flags = [
        "--name",
        "backup",
        "--rate",
        "1 hour",
        "--target-url",
        "https://example.com/run",
        "--token",
        "t",
    ]
    notify = ["--notify", "dead,missed=https://hooks.example.com/x", "--notify", f"recovered={TOPIC}"]
    assert cli.main(["jobs", "create", *flags, "--json", *notify, "--success-deadline", "7200"]) == 0

    ((method, path, body),) = sent
    assert (method, path, body["success_deadline_seconds"]) == ("POST", "/v1/jobs", 7200)
    assert body["notify"] == [
        {"type": "webhook", "url": "https://hooks.example.com/x", "events": ["dead", "missed"]},
        {"type": "sns", "topic_arn": TOPIC, "events": ["recovered"]},
    ]
    with pytest.raises(cli.UsageError):
        cli.notify_channel("https://hooks.example.com/x")
