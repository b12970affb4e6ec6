"""Standard Webhooks signatures bound to the call and the job (issue 33, item 4), checked as a receiver
would: with the ``standardwebhooks`` library from PyPI and the key ``GET /v1/jobs/{id}/signing-key`` shows.

The library checks the timestamp against the wall clock, so calls it verifies are signed at the wall clock's
time (the worker's clock is a ``ManualClock`` set to it)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from duetime.adapters.memory import MemoryStore
from duetime.domain.claim_plan import PlannedRun, new_run
from duetime.domain.clock import ManualClock
from duetime.domain.models import Job, Run, Team
from duetime.domain.signing import (
    LEGACY_SIGNATURE_UNTIL,
    job_signing_keys,
    signed_headers,
    verify_signature,
)
from duetime.execution.notification_senders import WebhookSender
from duetime.execution.worker import Worker
from duetime.ports import TargetRequest, TargetResponse

from ..twin_support import a_job
from .test_notifications import HOOK, group_for
from .test_signing_rotation import ROTATED

BODY = '{"report": "nightly"}'
TEAM = Team(
    team_id="team-a", signing_secret="old-secret", signing_secret_id="s1"
)  # ROTATED before it rotated


def wall_clock() -> datetime:
    return datetime.fromtimestamp(int(time.time()), UTC)


def rotated(now: datetime) -> Team:
    """``TEAM`` just after ``duetime teams rotate-signing-secret --overlap-hours 1`` at ``now``."""
    return ROTATED.model_copy(
        update={"team_id": TEAM.team_id, "previous_signing_secret_until": now + timedelta(hours=1)}
    )


def job(**spec: object) -> Job:
    target = {"url": "https://example.com/hook", "body": BODY, **spec}
    return a_job(datetime(2026, 12, 1, 10, tzinfo=UTC), target=target)


def call_of(job: Job, team: Team, now: datetime) -> TargetRequest:
    """The request a worker makes for ``job``'s run, at ``now``."""
    run: Run = new_run(job, PlannedRun(job.state.next_nominal_at, job.state.next_fire_at), now, now)
    worker = Worker(None, None, None, None, None, ManualClock(now))  # type: ignore[arg-type]
    return worker.build_request(run, team)


def key_of(job: Job, team: Team, now: datetime) -> str:
    (current, *_) = job_signing_keys(team, job.id, now)
    return current.secret


def test_a_runs_call_verifies_with_a_standard_webhooks_library_and_the_jobs_key() -> None:
    now, nightly = wall_clock(), job()
    request = call_of(nightly, TEAM, now)
    assert request.headers["webhook-id"] == request.headers["Idempotency-Key"]  # the run id
    assert request.headers["webhook-timestamp"] == str(int(now.timestamp()))
    assert request.headers["webhook-signature"].startswith("v1,")
    assert Webhook(key_of(nightly, TEAM, now)).verify(request.body or b"", request.headers) == json.loads(
        BODY
    )


def test_a_call_replayed_to_another_jobs_target_does_not_verify() -> None:
    now, nightly, billing = wall_clock(), job(), job()
    request = call_of(nightly, TEAM, now)
    with pytest.raises(WebhookVerificationError):  # the same team's secret, another job: another key
        Webhook(key_of(billing, TEAM, now)).verify(request.body or b"", request.headers)
    assert key_of(nightly, TEAM, now) != key_of(billing, TEAM, now)


def test_a_changed_body_or_id_does_not_verify() -> None:
    now, nightly = wall_clock(), job()
    request = call_of(nightly, TEAM, now)
    verifier = Webhook(key_of(nightly, TEAM, now))
    with pytest.raises(WebhookVerificationError):
        verifier.verify(b'{"report": "all"}', request.headers)
    replayed_as_new = {**request.headers, "webhook-id": "another-run", "Idempotency-Key": "another-run"}
    with pytest.raises(WebhookVerificationError):  # a replay under a new idempotency key
        verifier.verify(request.body or b"", replayed_as_new)
    later = {**request.headers, "webhook-timestamp": str(int(now.timestamp()) + 60)}
    with pytest.raises(WebhookVerificationError):
        verifier.verify(request.body or b"", later)


def test_during_the_overlap_both_of_the_jobs_keys_sign_and_each_verifies() -> None:
    now, nightly = wall_clock(), job()
    team = rotated(now)
    request = call_of(nightly, team, now)
    keys = job_signing_keys(team, nightly.id, now)
    assert [(k.key_id, k.until) for k in keys] == [("s2", None), ("s1", now + timedelta(hours=1))]
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    for key in keys:  # a target holding the new key, and one not yet updated
        Webhook(key.secret).verify(request.body or b"", request.headers)
    assert keys[1].secret == key_of(nightly, TEAM, now)  # the key it held before the rotation
    after = now + timedelta(hours=1)
    assert [k.key_id for k in job_signing_keys(team, nightly.id, after)] == ["s2"]
    assert len(signed_headers(team, nightly.id, "r", after, b"")["webhook-signature"].split(" ")) == 1


def test_the_jobs_key_is_an_hmac_of_its_id_under_the_team_secret_given_as_whsec_base64() -> None:
    derived = hmac.new(b"old-secret", b"duetime-job-key:01JOB", hashlib.sha256).digest()
    (key,) = job_signing_keys(TEAM, "01JOB", wall_clock())
    assert key.secret == "whsec_" + base64.b64encode(derived).decode() and key.key_id == "s1"
    assert job_signing_keys(Team(team_id="no-secret"), "01JOB", wall_clock()) == []
    assert signed_headers(Team(team_id="no-secret"), "01JOB", "r", wall_clock(), b"") == {}


def test_the_old_header_is_sent_beside_the_new_ones_until_the_migration_window_ends() -> None:
    nightly = job()
    last = LEGACY_SIGNATURE_UNTIL - timedelta(seconds=1)
    request = call_of(nightly, TEAM, last)
    stamp = int(last.timestamp())
    assert verify_signature("old-secret", request.headers["X-Duetime-Signature"], BODY.encode(), stamp)
    assert "webhook-signature" in request.headers
    ended = call_of(nightly, TEAM, LEGACY_SIGNATURE_UNTIL)
    assert "X-Duetime-Signature" not in ended.headers and "webhook-signature" in ended.headers


def test_a_targets_own_webhook_headers_are_replaced_by_duetimes() -> None:
    now = wall_clock()
    nightly = job(headers={"Webhook-Id": "forged", "WEBHOOK-SIGNATURE": "v1,forged"})
    request = call_of(nightly, TEAM, now)
    assert [n for n in request.headers if n.lower().startswith("webhook-")] == [
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
    ]
    Webhook(key_of(nightly, TEAM, now)).verify(request.body or b"", request.headers)


class Recorder:
    def __init__(self) -> None:
        self.requests: list[TargetRequest] = []

    def call(self, request: TargetRequest) -> TargetResponse:
        self.requests.append(request)
        return TargetResponse(200, "", None, 3)


def test_a_webhook_notification_verifies_with_its_jobs_key_and_its_notification_id() -> None:
    now, nightly, billing = wall_clock(), job(), job()
    store = MemoryStore()
    store.put_team(TEAM)
    caller = Recorder()
    assert WebhookSender(caller, store).send(group_for(nightly, HOOK), now).ok
    (sent,) = caller.requests
    assert sent.headers["webhook-id"] == sent.headers["X-Duetime-Notification-Id"]
    Webhook(key_of(nightly, TEAM, now)).verify(sent.body or b"", sent.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(key_of(billing, TEAM, now)).verify(sent.body or b"", sent.headers)


def test_the_cli_shows_a_jobs_signing_keys_from_the_api(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from duetime import cli
    from duetime.client import DuetimeClient

    now = wall_clock()
    keys = job_signing_keys(rotated(now), "01JOB", now)
    answer = {
        "job_id": "01JOB",
        "keys": [
            {"key_id": k.key_id, "secret": k.secret, "until": k.until and k.until.isoformat()} for k in keys
        ],
    }
    asked: list[tuple[str, str]] = []

    def request(self: DuetimeClient, method: str, path: str, body: Any = None, **_: Any) -> Any:
        asked.append((method, path))
        return answer

    monkeypatch.setattr(DuetimeClient, "request", request)
    assert cli.main(["jobs", "signing-key", "01JOB", "--token", "t"]) == 0
    assert asked == [("GET", "/v1/jobs/01JOB/signing-key")]
    header, current, previous = capsys.readouterr().out.strip().splitlines()
    assert header.split() == ["KEY_ID", "SECRET", "UNTIL"]
    assert current.split() == ["s2", keys[0].secret] and previous.split()[:2] == ["s1", keys[1].secret]
