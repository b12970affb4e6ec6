"""Workers on DynamoDB Local + LocalStack SQS against a real HTTP target."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from duetime.domain.models import RunStatus
from duetime.domain.signing import LEGACY_SIGNATURE_UNTIL, job_signing_keys, verify_signature
from duetime.execution.worker import WorkerConfig, WorkOutcome
from duetime.ports import RunMessage
from duetime.ports.queue import encode

from .api_support import JOB, Call
from .conftest import Stack, wait_until

FAST = WorkerConfig(
    lease=timedelta(seconds=3),
    heartbeat=timedelta(seconds=1),
    queue_deadline=timedelta(seconds=3),
    defer_seconds=1,
)


def claim_one(stack: Stack, url: str, **spec: object) -> str:
    stack.job_due_now("team-a", url, **spec)
    report = stack.poller().claim()
    assert report.runs_created == 1, report
    return report.runs[0].run_id


def test_a_run_calls_its_target_with_the_promised_headers_and_a_valid_signature(stack: Stack, target) -> None:
    run_id = claim_one(
        stack, target.url, target={"url": target.url, "body": '{"hello": 1}', "headers": {"X-Custom": "yes"}}
    )
    reports = stack.drain(stack.worker(), lambda: bool(target.recorder.calls))
    assert [r.outcome for r in reports] == [WorkOutcome.SUCCEEDED]
    call = target.recorder.calls[0]
    assert call.headers["idempotency-key"] == run_id == call.headers["x-duetime-run-id"]
    assert call.headers["x-duetime-attempt"] == "1"
    assert call.headers["x-duetime-scheduled-at"] == run_id.split("@")[1]
    assert call.headers["x-custom"] == "yes" and call.body == '{"hello": 1}'
    assert call.headers["webhook-id"] == run_id
    team = stack.store.get_team("team-a")
    assert team is not None
    (key,) = job_signing_keys(team, run_id.split("@")[0], stack.clock.now())
    assert Webhook(key.secret).verify(call.body, call.headers) == {"hello": 1}
    with pytest.raises(WebhookVerificationError):
        Webhook(job_signing_keys(team, "another-job", stack.clock.now())[0].secret).verify(
            call.body, call.headers
        )
    if time.time() < LEGACY_SIGNATURE_UNTIL.timestamp():  # the old header, during its migration window
        assert verify_signature(
            "secret-a", call.headers["x-duetime-signature"], call.body.encode(), int(time.time())
        )
        assert not verify_signature(
            "other", call.headers["x-duetime-signature"], call.body.encode(), int(time.time())
        )
    run = stack.store.get_run(run_id)
    assert run is not None and run.status is RunStatus.SUCCEEDED and run.result is not None
    assert run.result.status_code == 200 and run.finished_at is not None


def test_a_run_reaches_the_demo_target_with_headers_that_verify_with_the_key_the_api_shows(
    local_team: Call, stack: Stack, target: Any
) -> None:
    """As a receiver would: the key from ``GET /v1/jobs/{id}/signing-key``, a Standard Webhooks library."""
    nightly, billing = (
        local_team("POST", "/v1/jobs", {**JOB, "target": {"url": target.url, "body": '{"n": 1}'}}).body
        for _ in range(2)
    )
    shown = local_team("GET", f"/v1/jobs/{nightly['id']}/signing-key")
    assert shown.status == 200 and [k["key_id"] for k in shown.body["keys"]] == ["s1"]
    run_id = local_team("POST", f"/v1/jobs/{nightly['id']}/trigger").body["run_id"]
    stack.drain(stack.worker(), lambda: bool(target.recorder.keyed(run_id)))

    (call,) = target.recorder.keyed(run_id)
    assert Webhook(shown.body["keys"][0]["secret"]).verify(call.body, call.headers) == {"n": 1}
    (other,) = local_team("GET", f"/v1/jobs/{billing['id']}/signing-key").body["keys"]
    with pytest.raises(WebhookVerificationError):  # replayed to the other job's target
        Webhook(other["secret"]).verify(call.body, call.headers)


def test_duplicate_messages_call_the_target_once(stack: Stack, target) -> None:
    run_id = claim_one(stack, target.url)
    stack.queue.send([RunMessage(run_id, 1), RunMessage(run_id, 1)])  # SQS delivered it three times
    worker = stack.worker()
    reports = stack.drain(
        worker,
        lambda: False if not target.recorder.calls else len(stack.consumer.receive(10, 0)) == 0,
        timeout=20,
    )
    outcomes = sorted(r.outcome for r in reports)
    assert outcomes.count(WorkOutcome.SUCCEEDED) == 1
    assert len(target.recorder.keyed(run_id)) == 1


def test_a_stale_worker_cannot_record_its_result(stack: Stack, target) -> None:
    """Worker A's lease lapses mid-call (it is paused: no heartbeats); the run is re-queued and worker B
    finishes it. When A wakes, its result write is rejected."""
    run_id = claim_one(stack, target.url + "?sleep=5")
    paused = WorkerConfig(lease=timedelta(seconds=2), heartbeat=timedelta(seconds=600))
    worker_a = stack.worker(paused, owner="worker-a")
    message = stack.messages()[0]

    import threading

    result: dict[str, object] = {}
    thread = threading.Thread(target=lambda: result.update(report=worker_a.process(message)))
    thread.start()
    wait_until(lambda: len(target.recorder.keyed(run_id)) == 1)
    # A's lease (2 s, store clock) lapses while its call (5 s) is still running; the reaper takes it back.
    poller = stack.poller()
    wait_until(lambda: poller.recover().leases_expired == 1, timeout=10, every=0.25)
    fast_target = target.url  # B's call answers at once: the target saved nothing yet for this key
    assert fast_target
    worker_b = stack.worker(FAST, owner="worker-b")
    reports_b = stack.drain(
        worker_b,
        lambda: (
            stack.store.get_run(run_id).status  # type: ignore[union-attr]
            is not RunStatus.QUEUED
        ),
    )
    thread.join()
    report_a = result["report"]
    assert report_a.outcome is WorkOutcome.STALE  # type: ignore[attr-defined]
    calls = target.recorder.keyed(run_id)
    assert [c.headers["x-duetime-attempt"] for c in calls] == ["1", "2"]
    assert reports_b and reports_b[0].attempt == 2
    run = stack.store.get_run(run_id)
    assert run is not None and run.attempt == 2 and run.owner == "worker-b"


def test_retries_then_dead_with_an_alert(stack: Stack, target) -> None:
    run_id = claim_one(stack, target.url + "?status=503", retry={"max_attempts": 3, "backoff_seconds": [0]})
    worker = stack.worker(FAST)
    reports = stack.drain(
        worker,
        lambda: (
            stack.store.get_run(run_id).status  # type: ignore[union-attr]
            is RunStatus.DEAD
        ),
        timeout=40,
    )
    assert [r.outcome for r in reports if r.outcome is not WorkOutcome.DUPLICATE] == [
        WorkOutcome.RETRY_SCHEDULED,
        WorkOutcome.RETRY_SCHEDULED,
        WorkOutcome.DEAD,
    ]
    calls = target.recorder.keyed(run_id)
    assert [c.headers["x-duetime-attempt"] for c in calls] == ["1", "2", "3"]
    alerts = stack.store.list_alerts("team-a")
    assert [(a["kind"], a["run_id"], a["attempt"]) for a in alerts] == [("run_dead", run_id, 3)]
    run = stack.store.get_run(run_id)
    assert run is not None and run.target.url.endswith("?status=503")  # the payload is kept


def test_a_non_retryable_answer_fails_at_once(stack: Stack, target) -> None:
    run_id = claim_one(stack, target.url + "?status=400")
    reports = stack.drain(stack.worker(FAST), lambda: bool(target.recorder.calls))
    assert [r.outcome for r in reports] == [WorkOutcome.FAILED]
    assert stack.store.get_run(run_id).status is RunStatus.FAILED  # type: ignore[union-attr]
    assert [a["kind"] for a in stack.store.list_alerts("team-a")] == ["run_failed"]


def test_a_lost_message_is_recovered_by_the_queue_deadline(stack: Stack, target) -> None:
    from duetime.scheduling.poller import PollerConfig  # noqa: F401  (config via stack.poller kwargs)

    poller = stack.poller(queue_deadline=timedelta(seconds=2))
    stack.job_due_now("team-a", target.url)
    run_id = poller.claim().runs[0].run_id
    assert [m.run_id for m in stack.messages()] == [run_id]  # ...and SQS lost it
    time.sleep(2.5)
    recovered = poller.recover()
    assert recovered.messages_resent == 1
    reports = stack.drain(stack.worker(FAST), lambda: bool(target.recorder.calls))
    assert [r.outcome for r in reports] == [WorkOutcome.SUCCEEDED]


def test_a_malformed_message_is_refused_without_touching_any_run(stack: Stack) -> None:
    import pytest

    from duetime.ports.queue import decode

    for body in (
        "not json",
        '{"run_id": 5, "attempt": 1}',
        '{"run_id": "x"}',
        encode(RunMessage("x", 1))[:-1],
    ):
        with pytest.raises(ValueError):
            decode(body)


def test_heartbeats_keep_a_long_call_leased_past_its_initial_lease(stack: Stack, target) -> None:
    run_id = claim_one(stack, target.url + "?sleep=4")
    config = WorkerConfig(lease=timedelta(seconds=2), heartbeat=timedelta(seconds=0.5))
    worker = stack.worker(config)
    message = stack.messages()[0]

    import threading

    box: dict[str, object] = {}
    thread = threading.Thread(target=lambda: box.update(report=worker.process(message)))
    thread.start()
    wait_until(lambda: len(target.recorder.keyed(run_id)) == 1)
    time.sleep(3)  # past the initial 2 s lease: only the heartbeats keep it
    assert stack.poller().recover().leases_expired == 0
    thread.join()
    report = box["report"]
    assert report.outcome is WorkOutcome.SUCCEEDED and report.heartbeats >= 3  # type: ignore[attr-defined]
    assert len(target.recorder.keyed(run_id)) == 1


def test_a_call_past_the_jobs_timeout_is_cut_off_and_retried(stack: Stack, target) -> None:
    run_id = claim_one(
        stack,
        target.url + "?sleep=3&slow_attempt=1",
        timeout_seconds=1,
        retry={"max_attempts": 2, "backoff_seconds": [0]},
    )
    reports = stack.drain(
        stack.worker(FAST),
        lambda: (
            stack.store.get_run(run_id).status  # type: ignore[union-attr]
            is RunStatus.SUCCEEDED
        ),
        timeout=30,
    )
    outcomes = [r.outcome for r in reports if r.outcome is not WorkOutcome.DUPLICATE]
    assert outcomes == [WorkOutcome.RETRY_SCHEDULED, WorkOutcome.SUCCEEDED]
    assert reports[0].duration_ms is not None and 900 <= reports[0].duration_ms < 2500
    history = stack.store.get_run(run_id)
    assert history is not None and history.attempt == 2
