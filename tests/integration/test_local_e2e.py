"""End to end through ``duetime local`` with a real HTTP client and the ``duetime`` CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import urllib3
from standardwebhooks import Webhook

from duetime.domain.signing import LEGACY_SIGNATURE_UNTIL, verify_signature

from .local_system import LocalSystem, isolated, lift_the_api_rate, start_local, wait_until

HTTP = urllib3.PoolManager(maxsize=16)  # threads of the test at once reuse connections
OUTPUTS: list[list[str]] = []  # what each duetime local printed, shown when a wait times out
PREFIXES: list[str] = []  # each duetime local's table prefix

# One xdist worker runs the module, so that one duetime local serves it (a module fixture).
pytestmark = pytest.mark.xdist_group("local-e2e")


@pytest.fixture(scope="module")
def local() -> Iterator[LocalSystem]:
    prefix = f"e2e{uuid.uuid4().hex[:8]}"
    system = start_local(isolated(prefix))
    OUTPUTS.append(system.output)
    PREFIXES.append(prefix)
    # The API function's first call imports the app (a cold start, seconds on a loaded host): made here, so a
    # due time a test computes before its first request is not spent on it (an `at` past by then is a 422).
    assert api(system, "GET", "/v1/jobs")[0] == 200
    yield system
    assert system.stop() == 0, "\n".join(system.output)  # Ctrl-C stops it cleanly


def api(local: LocalSystem, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    response = HTTP.request(
        method,
        local.url + path,
        body=json.dumps(body) if body is not None else None,
        headers={"Authorization": f"Bearer {local.token}", "Content-Type": "application/json"},
    )
    return response.status, (json.loads(response.data) if response.data else None)


def cli(local: LocalSystem, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DUETIME_URL": local.url, "DUETIME_TOKEN": local.token}
    return subprocess.run(
        [sys.executable, "-m", "duetime.cli", *args], capture_output=True, text=True, env=env, timeout=60
    )


def wait_for(predicate: Any, timeout: float = 40.0) -> Any:
    return wait_until(predicate, timeout, OUTPUTS[-1] if OUTPUTS else [])


def demo_calls(local: LocalSystem, job_id: str) -> list[dict[str, Any]]:
    calls = json.loads(HTTP.request("GET", local.url + "/demo/calls").data)["calls"]
    return [c for c in calls if c["headers"].get("idempotency-key", "").startswith(job_id)]


def test_a_job_created_over_http_runs_with_the_promised_headers_and_a_valid_signature(
    local: LocalSystem,
) -> None:
    at = (datetime.now(UTC) + timedelta(seconds=5)).replace(microsecond=0)
    status, job = api(
        local,
        "POST",
        "/v1/jobs",
        {
            "name": "e2e",
            "schedule": {"at": at.isoformat()},
            "exact": True,
            "target": {"type": "http", "url": f"{local.url}/demo/target", "body": '{"report": "nightly"}'},
        },
    )
    assert status == 201, job
    calls = wait_for(lambda: demo_calls(local, job["id"]))
    call = calls[0]
    run_id = f"{job['id']}@{at.strftime('%Y-%m-%dT%H:%M:%SZ')}"
    assert call["headers"]["idempotency-key"] == run_id == call["headers"]["x-duetime-run-id"]
    assert call["headers"]["x-duetime-attempt"] == "1"
    assert call["headers"]["x-duetime-scheduled-at"] == at.strftime("%Y-%m-%dT%H:%M:%SZ")
    if time.time() < LEGACY_SIGNATURE_UNTIL.timestamp():  # the old header, during its migration window
        assert verify_signature(
            local.secret, call["headers"]["x-duetime-signature"], call["body"].encode(), int(time.time())
        )
    assert call["headers"]["webhook-id"] == run_id
    (key,) = api(local, "GET", f"/v1/jobs/{job['id']}/signing-key")[1]["keys"]
    Webhook(key["secret"]).verify(call["body"], call["headers"], json_parse=False)
    run = wait_for(
        lambda: (r := api(local, "GET", f"/v1/runs/{run_id}")[1]) and r["status"] == "succeeded" and r
    )
    assert run["attempt"] == 1 and run["result"]["status_code"] == 200


def test_the_cli_creates_lists_pauses_triggers_and_sees_a_failure_retried(local: LocalSystem) -> None:
    created = cli(
        local,
        "jobs",
        "create",
        "--name",
        "flaky",
        "--rate",
        "1 hour",
        "--target-url",
        f"{local.url}/demo/target?status=503",
        "--max-attempts",
        "2",
        "--backoff",
        "1",
        "--label",
        "env=ci",
        "--json",
    )
    assert created.returncode == 0, created.stderr
    job = json.loads(created.stdout)
    assert job["labels"] == {"env": "ci"}
    listing = cli(local, "jobs", "list")
    assert listing.returncode == 0 and job["id"] in listing.stdout and "NEXT_RUN_AT" in listing.stdout
    found = json.loads(cli(local, "jobs", "list", "--label", "env:ci", "--search", "fla", "--json").stdout)
    assert [j["id"] for j in found["jobs"]] == [job["id"]]
    paused = json.loads(cli(local, "jobs", "pause", job["id"], "--json").stdout)
    assert paused["paused"] is True and paused["next_run_at"] is None
    history = cli(local, "jobs", "history", job["id"])
    assert history.returncode == 0 and "pause" in history.stdout and "create" in history.stdout
    assert "tok_" in history.stdout and local.token not in history.stdout
    triggered = cli(local, "jobs", "trigger", job["id"], "--body", '{"replay": 7}', "--json")
    assert triggered.returncode == 0, triggered.stderr
    run_id = json.loads(triggered.stdout)["run_id"]
    dead = wait_for(
        lambda: (
            (r := json.loads(cli(local, "runs", "get", run_id, "--json").stdout))["status"] == "dead" and r
        )
    )
    assert dead["attempt"] == 2  # the 503 was retried once, then the run was dead
    calls = demo_calls(local, job["id"])
    assert [c["headers"]["x-duetime-attempt"] for c in calls] == ["1", "2"]
    assert [c["body"] for c in calls] == ['{"replay": 7}'] * 2  # the trigger's body, on the retry too
    runs = cli(local, "runs", "list", job["id"])
    assert run_id in runs.stdout and "dead" in runs.stdout


def test_the_cli_cancels_a_running_run_whose_answer_is_then_discarded(local: LocalSystem) -> None:
    created = cli(
        local,
        *("jobs", "create", "--name", "slow", "--rate", "1 hour", "--json"),
        *("--target-url", f"{local.url}/demo/target?sleep=8"),  # long enough for a CLI start on a busy host
    )
    job = json.loads(created.stdout)
    run_id = json.loads(cli(local, "jobs", "trigger", job["id"], "--json").stdout)["run_id"]
    wait_for(lambda: demo_calls(local, job["id"]))  # the worker is calling the target

    cancelled = cli(local, "runs", "cancel", run_id, "--json")

    assert cancelled.returncode == 0, cancelled.stderr
    assert json.loads(cancelled.stdout)["status"] == "cancelled"
    wait_for(lambda: all(c["status"] for c in demo_calls(local, job["id"])))  # the target answered 200
    time.sleep(0.5)
    run = json.loads(cli(local, "runs", "get", run_id, "--json").stdout)
    assert (run["status"], run["result"]) == ("cancelled", None)  # the answer was not recorded
    again = cli(local, "runs", "cancel", run_id)
    assert again.returncode == 1 and "409" in again.stderr


def test_cli_errors_are_one_line_and_exit_non_zero(local: LocalSystem) -> None:
    missing = cli(local, "jobs", "get", "01JDZ3K6R2V9Q8T7S6P5N4M3K2")
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1 and "404" in missing.stderr
    bad = cli(local, "jobs", "create", "--name", "x", "--cron", "0 0 30 2 *", "--target-url", "https://e.com")
    assert bad.returncode == 1 and "schedule.cron" in bad.stderr
    no_token = subprocess.run(
        [sys.executable, "-m", "duetime.cli", "jobs", "list"],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "DUETIME_TOKEN"},
    )
    assert no_token.returncode == 2 and "token" in no_token.stderr


def test_offline_preview_prints_local_times_with_offsets() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "duetime.cli",
            "preview",
            "--cron",
            "30 2 * * *",
            "--tz",
            "America/New_York",
            "--after",
            "2026-03-07T00:00:00Z",
            "--count",
            "3",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out == [
        "2026-03-07T02:30:00-05:00",
        "2026-03-08T03:00:00-04:00  moved",
        "2026-03-09T02:30:00-04:00",
    ]


def test_plan_reads_the_due_histogram_of_a_running_duetime(local: LocalSystem) -> None:
    at = (datetime.now(UTC) + timedelta(hours=2)).replace(second=0, microsecond=0)
    for i in range(3):
        status, _ = api(
            local,
            "POST",
            "/v1/jobs",
            {
                "name": f"busy {i}",
                "schedule": {"at": at.isoformat()},
                "exact": True,
                "target": {"url": f"{local.url}/demo/target"},
            },
        )
        assert status == 201
    out = cli(local, "plan", "--url", local.url, "--worker-rate", "0.01", "--baseline-workers", "1", "--json")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["measured_busiest_minute"]["runs"] >= 3
    busy = [m for m in plan["minutes_needing_prescale"] if m["minute"] == at.strftime("%Y-%m-%dT%H:%M")]
    assert busy and busy[0]["runs"] >= 3 and busy[0]["workers"] >= 5


def test_a_job_rescheduled_into_a_resting_group_wakes_its_poller_and_runs_in_its_second(
    local: LocalSystem,
) -> None:
    """The pollers run as on AWS: a quiet group's holder gives the lease back until the next tick (up to a
    minute away). A job edited to fall due 6 s from now wakes its group (``duetime.scheduling.wake``), and its
    run is claimed in its second, not at the next tick."""
    from duetime.adapters.aws.clients import client
    from duetime.adapters.dynamodb.store import DynamoStore
    from duetime.adapters.dynamodb.tables import TableNames
    from duetime.domain.ids import partition_of
    from duetime.local.system import LOCAL_PARTITION_GROUPS
    from duetime.scheduling.wake import partition_groups

    later = (datetime.now(UTC) + timedelta(hours=3)).replace(microsecond=0)
    body = {"name": "woken", "schedule": {"at": later.isoformat()}, "exact": True}
    status, job = api(local, "POST", "/v1/jobs", {**body, "target": {"url": f"{local.url}/demo/target"}})
    assert status == 201, job
    prefix = PREFIXES[-1]
    names = TableNames(f"{prefix}-jobs", f"{prefix}-runs", f"{prefix}-control")
    store = DynamoStore(client("dynamodb"), names)
    group = partition_groups(LOCAL_PARTITION_GROUPS)[partition_of(job["id"])]
    wait_for(lambda: store.read_poller_lease(group).holder is None, timeout=90)  # the group rests
    wakes = store.read_poller_lease(group).wakes

    at = (datetime.now(UTC) + timedelta(seconds=6)).replace(microsecond=0)
    status, edited = api(local, "PATCH", f"/v1/jobs/{job['id']}", {"schedule": {"at": at.isoformat()}})
    assert status == 200, edited
    assert store.read_poller_lease(group).wakes == wakes + 1
    run_id = f"{job['id']}@{at.strftime('%Y-%m-%dT%H:%M:%SZ')}"
    run = wait_for(
        lambda: (r := api(local, "GET", f"/v1/runs/{run_id}")[1]) and r.get("status") == "succeeded" and r,
        timeout=30,
    )
    claimed_late = datetime.fromisoformat(run["created_at"]) - datetime.fromisoformat(run["fire_at"])
    assert timedelta(0) <= claimed_late < timedelta(seconds=2), run


def test_aws_targets_run_through_duetime_local_into_localstack_with_the_run_envelope(
    local: LocalSystem,
) -> None:
    """An SQS queue and a Step Functions state machine on LocalStack, called by ``duetime local``'s worker
    with its own credentials (the local stack needs no role), each run's id travelling with its call."""
    import boto3

    from duetime.domain.aws_targets import execution_name

    tag = uuid.uuid4().hex[:8]
    sqs, sfn = (
        boto3.client("sqs"),
        boto3.client("stepfunctions", endpoint_url=os.environ["AWS_ENDPOINT_URL_SQS"]),
    )
    queue = sqs.create_queue(QueueName=f"e2e-target-{tag}")["QueueUrl"]
    machine = sfn.create_state_machine(
        name=f"e2e-{tag}",
        definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}),
        roleArn="arn:aws:iam::000000000000:role/duetime-target-e2e",
    )["stateMachineArn"]
    runs = {}
    for name, target in (
        ("to-sqs", {"type": "sqs", "queue_url": queue, "message": "hello from duetime"}),
        ("to-sfn", {"type": "stepfunctions", "state_machine_arn": machine, "input": {"day": 1}}),
    ):
        status, job = api(
            local, "POST", "/v1/jobs", {"name": name, "schedule": {"rate": "1 day"}, "target": target}
        )
        assert status == 201, job
        status, run = api(local, "POST", f"/v1/jobs/{job['id']}/trigger")
        assert status == 201, run
        runs[name] = run["run_id"]

    def finished(run_id: str) -> Any:
        _, run = api(local, "GET", f"/v1/runs/{run_id}")
        return run if run["status"] in ("succeeded", "failed", "dead") else None

    for run_id in runs.values():
        assert wait_for(lambda run_id=run_id: finished(run_id))["status"] == "succeeded"
    received = sqs.receive_message(QueueUrl=queue, MessageAttributeNames=["All"], WaitTimeSeconds=5)[
        "Messages"
    ]
    (message,) = received
    assert message["Body"] == "hello from duetime"
    assert message["MessageAttributes"]["duetime-run-id"]["StringValue"] == runs["to-sqs"]
    (execution,) = sfn.list_executions(stateMachineArn=machine)["executions"]
    assert execution["name"] == execution_name(runs["to-sfn"], 1)
    started = json.loads(sfn.describe_execution(executionArn=execution["executionArn"])["input"])
    assert started == {"duetime": started["duetime"], "input": {"day": 1}}
    assert started["duetime"]["run_id"] == runs["to-sfn"]


def test_requests_at_once_each_get_their_own_answer(local: LocalSystem) -> None:
    """``duetime local`` serves requests on threads of one process, and the api's resolver keeps the request
    it answers on itself: without one request at a time, a runs listing came back as the history's model
    (422 "response.changes: Field required") or a job read lost its id (500). The team's rate is lifted: a
    429 is an answer of its own, and 225 requests at once are more than the default burst of 40."""
    import threading
    from collections import Counter

    lift_the_api_rate(PREFIXES[-1], "dev")

    _, job = api(
        local,
        "POST",
        "/v1/jobs",
        {"name": "race", "schedule": {"rate": "1 hour"}, "target": {"url": f"{local.url}/demo/target"}},
    )
    expected = {
        f"/v1/jobs/{job['id']}/runs?limit=5": "runs",
        f"/v1/jobs/{job['id']}/history?limit=5": "changes",
        f"/v1/jobs/{job['id']}/preview?count=3": "job_id",
        f"/v1/jobs/{job['id']}": "schedule",
        "/v1/team": "exact_quota",
    }
    wrong: Counter[tuple[str, int]] = Counter()

    def ask(path: str) -> None:
        for _ in range(15):
            status, body = api(local, "GET", path)
            if status != 200 or expected[path] not in body:
                wrong[(path, status)] += 1

    threads = [threading.Thread(target=ask, args=(path,)) for path in list(expected) * 3]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not wrong, wrong  # 225 requests, 15 threads at once


def test_ctrl_c_stops_duetime_local_even_when_its_parent_left_ctrl_c_ignored() -> None:
    """A shell without job control starts ``cmd &`` with SIGINT ignored, and Python then leaves it ignored
    (no KeyboardInterrupt): duetime local catches INT itself, so Ctrl-C still stops it, at once."""
    prefix = f"int{uuid.uuid4().hex[:8]}"
    system = start_local(isolated(prefix), interrupt_ignored=True)
    started = time.monotonic()
    assert system.stop() == 0, "\n".join(system.output)
    assert time.monotonic() - started < 30
    assert "duetime local: stopping" in system.output


def test_the_cli_reads_a_jobs_fire_ledger_and_the_teams_audit_on_the_local_stack(local: LocalSystem) -> None:
    """A one-time job runs; its ledger names its one fire with its run id and start, a paused job's time is
    skipped as paused, and the audit counts both."""
    soon = (datetime.now(UTC) + timedelta(seconds=4)).replace(microsecond=0)
    body = {
        "schedule": {"at": soon.isoformat()},
        "exact": True,
        "target": {"url": f"{local.url}/demo/target"},
    }
    status, job = api(local, "POST", "/v1/jobs", {**body, "name": "ledger once"})
    assert status == 201, job
    later = soon + timedelta(minutes=1)  # paused long before its time, however slow the host
    paused_body = {**body, "schedule": {"at": later.isoformat()}, "name": "ledger paused"}
    status, paused = api(local, "POST", "/v1/jobs", paused_body)
    assert status == 201, paused
    assert api(local, "POST", f"/v1/jobs/{paused['id']}/pause")[0] == 200

    def fires(job_id: str) -> list[dict[str, Any]]:
        answer = cli(local, "jobs", "fires", job_id, "--since", "5m", "--to", _after(later), "--json")
        assert answer.returncode == 0, answer.stderr
        return list(json.loads(answer.stdout)["fires"])

    ran = wait_for(lambda: [f for f in fires(job["id"]) if f["label"] in ("on_time", "late")])
    assert [f["run_id"] for f in ran] == [f"{job['id']}@{soon.strftime('%Y-%m-%dT%H:%M:%SZ')}"]
    assert ran[0]["status"] == "succeeded" or ran[0]["started_at"] is not None
    assert [(f["label"], f["reason"]) for f in fires(paused["id"])] == [("skipped", "paused")]

    table = cli(local, "jobs", "fires", job["id"], "--since", "5m", "--to", _after(soon))
    assert table.returncode == 0 and "SCHEDULED_AT" in table.stdout and ran[0]["label"] in table.stdout
    audit = cli(local, "audit", "--since", "5m", "--to", _after(later), "--json")
    assert audit.returncode == 0, audit.stderr
    counts = json.loads(audit.stdout)["counts"]
    assert counts["skipped"] >= 1 and counts["on_time"] + counts["late"] >= 1
    refused = cli(local, "audit", "--since", "yesterday")
    assert refused.returncode != 0 and "--since" in refused.stderr


def _after(instant: datetime) -> str:
    return (instant + timedelta(seconds=1)).isoformat()
