"""``POST /v1/jobs/{id}/backfill`` through the api Lambda handler, on DynamoDB Local + LocalStack SQS: the
runs written under their scheduled ids, their messages paced on the queue, idempotence, validation."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from duetime.api.service import JobService
from duetime.domain.ids import make_run_id
from duetime.domain.timeutil import iso_z, parse_iso_z

from .api_support import JOB, Call, a_fresh_minute, make_call
from .conftest import Stack, hooked, wait_until

HOURLY = {**JOB, "schedule": {"cron": "0 * * * *", "timezone": "UTC"}}


def hours_ago(stack: Stack, hours: int) -> datetime:
    """The whole hour ``hours`` before the current one, by the store's clock."""
    return stack.clock.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=hours)


def window(start: datetime, end: datetime) -> dict[str, str]:
    return {"from": iso_z(start), "to": iso_z(end)}


def run_item(stack: Stack, run_id: str) -> dict[str, Any]:
    job_id, occurrence = run_id.split("@")
    key = {"job_id": {"S": job_id}, "occurrence": {"S": occurrence}}
    item: dict[str, Any] = stack.dynamodb.get_item(TableName=stack.names.runs, Key=key, ConsistentRead=True)[
        "Item"
    ]
    return item


def job_item(stack: Stack, job_id: str) -> dict[str, Any]:
    key = {"job_id": {"S": job_id}}
    item: dict[str, Any] = stack.dynamodb.get_item(TableName=stack.names.jobs, Key=key, ConsistentRead=True)[
        "Item"
    ]
    return item


def test_three_hours_of_an_hourly_job_are_three_queued_runs_and_again_none(alpha: Call, stack: Stack) -> None:
    job = alpha("POST", "/v1/jobs", HOURLY).body
    before = job_item(stack, job["id"])
    start = hours_ago(stack, 4)
    answer = alpha("POST", f"/v1/jobs/{job['id']}/backfill", window(start, start + timedelta(hours=3)))
    assert answer.status == 202 and answer.body == {"runs": 3}, answer.body
    expected = [make_run_id(job["id"], start + timedelta(hours=h)) for h in range(3)]
    runs = alpha("GET", f"/v1/jobs/{job['id']}/runs").body["runs"]
    assert [r["run_id"] for r in runs] == expected[::-1]  # newest first
    assert {r["status"] for r in runs} == {"queued"} and {r["attempt"] for r in runs} == {1}
    assert [r["scheduled_at"] for r in runs[::-1]] == [iso_z(start + timedelta(hours=h)) for h in range(3)]
    assert sorted(m.run_id for m in stack.messages()) == expected

    again = alpha("POST", f"/v1/jobs/{job['id']}/backfill", window(start, start + timedelta(hours=3)))
    assert again.status == 202 and again.body == {"runs": 0}
    assert stack.messages() == []
    assert len(alpha("GET", f"/v1/jobs/{job['id']}/runs").body["runs"]) == 3
    # The schedule is untouched: the job row is as it was (version, due time, due index keys).
    assert job_item(stack, job["id"]) == before
    assert alpha("GET", f"/v1/jobs/{job['id']}").body == job


def test_a_time_that_already_has_a_run_keeps_it(alpha: Call, stack: Stack) -> None:
    job = alpha("POST", "/v1/jobs", HOURLY).body
    start = hours_ago(stack, 5)
    middle = start + timedelta(hours=1)
    first = alpha("POST", f"/v1/jobs/{job['id']}/backfill", window(middle, middle + timedelta(hours=1)))
    assert first.body == {"runs": 1}
    # That run has since finished (as a worker records it).
    run_id = make_run_id(job["id"], middle)
    key = {k: v for k, v in run_item(stack, run_id).items() if k in ("job_id", "occurrence")}
    stack.dynamodb.update_item(
        TableName=stack.names.runs,
        Key=key,
        UpdateExpression="SET #s = :succeeded REMOVE reap_shard, reap_at",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":succeeded": {"S": "succeeded"}},
    )
    kept = run_item(stack, run_id)
    stack.messages()

    answer = alpha("POST", f"/v1/jobs/{job['id']}/backfill", window(start, start + timedelta(hours=3)))
    assert answer.status == 202 and answer.body == {"runs": 2}
    assert run_item(stack, run_id) == kept  # left alone: still succeeded, same stamps
    assert alpha("GET", f"/v1/runs/{run_id}").body["status"] == "succeeded"
    others = [make_run_id(job["id"], start + timedelta(hours=h)) for h in (0, 2)]
    assert sorted(m.run_id for m in stack.messages()) == others  # only the runs created are sent


def test_a_paused_job_may_be_backfilled_and_stays_paused(alpha: Call, stack: Stack) -> None:
    job = alpha("POST", "/v1/jobs", HOURLY).body
    paused = alpha("POST", f"/v1/jobs/{job['id']}/pause").body
    start = hours_ago(stack, 2)
    answer = alpha("POST", f"/v1/jobs/{job['id']}/backfill", window(start, start + timedelta(hours=2)))
    assert answer.status == 202 and answer.body == {"runs": 2}
    assert alpha("GET", f"/v1/jobs/{job['id']}").body == paused


@pytest.mark.parametrize(
    ("case", "field"),
    [
        ("missing to", "to"),
        ("to before from", "to"),
        ("to in the future", "to"),
        ("no offset", "from"),
        ("not a time", "from"),
        ("unknown field", "colour"),
        ("over 1,000 times", "to"),
    ],
)
def test_bad_input_is_422_naming_the_field_and_writes_nothing(
    alpha: Call, stack: Stack, case: str, field: str
) -> None:
    job = alpha("POST", "/v1/jobs", {**JOB, "schedule": {"cron": "* * * * *", "timezone": "UTC"}}).body
    start = hours_ago(stack, 3)
    good = window(start, start + timedelta(hours=1))
    body: dict[str, Any] = {
        "missing to": {"from": good["from"]},
        "to before from": window(start, start - timedelta(hours=1)),
        "to in the future": window(start, stack.clock.now() + timedelta(minutes=5)),
        "no offset": {**good, "from": good["from"].removesuffix("Z")},
        "not a time": {**good, "from": "last tuesday"},
        "unknown field": {**good, "colour": "red"},
        "over 1,000 times": window(start - timedelta(minutes=1001 - 60), start + timedelta(hours=1)),
    }[case]
    answer = alpha("POST", f"/v1/jobs/{job['id']}/backfill", body)
    assert answer.status == 422, answer.body
    assert answer.body["error"]["code"] == "invalid" and answer.body["error"]["field"] == field, answer.body
    assert alpha("GET", f"/v1/jobs/{job['id']}/runs").body["runs"] == []
    assert stack.messages() == []


def test_another_teams_job_is_404_like_a_missing_one(alpha: Call, beta: Call, stack: Stack) -> None:
    job = alpha("POST", "/v1/jobs", HOURLY).body
    body = window(hours_ago(stack, 3), hours_ago(stack, 1))
    foreign = beta("POST", f"/v1/jobs/{job['id']}/backfill", body)
    missing = beta("POST", "/v1/jobs/01JDZ3K6R2V9Q8T7S6P5N4M3K2/backfill", body)
    assert foreign.status == missing.status == 404
    assert foreign.body["error"]["code"] == missing.body["error"]["code"] == "not_found"
    assert alpha("GET", f"/v1/jobs/{job['id']}/runs").body["runs"] == []


def test_runs_are_paced_by_the_teams_concurrency_and_checked_from_their_fire_time(
    service: JobService, stack: Stack
) -> None:
    """A team of max_concurrency 4 gets 2 runs a second: the i-th run fires i // 2 seconds on, its message
    delayed as long, and its first reap check (a lease after its message is visible) counts from then."""
    small = make_call(service.create_team("small", max_concurrency=4)[1])
    job = small("POST", "/v1/jobs", HOURLY).body
    delays: dict[str, int] = {}

    def record(params: dict[str, Any], **_: Any) -> None:
        for entry in params["Entries"]:
            delays[entry["MessageBody"].split('"')[3]] = entry["DelaySeconds"]

    start = hours_ago(stack, 7)
    with hooked(stack.sqs, "provide-client-params.sqs.SendMessageBatch", record):
        answer = small("POST", f"/v1/jobs/{job['id']}/backfill", window(start, start + timedelta(hours=7)))
    assert answer.status == 202 and answer.body == {"runs": 7}
    expected = [make_run_id(job["id"], start + timedelta(hours=h)) for h in range(7)]
    assert [delays[run_id] for run_id in expected] == [0, 0, 1, 1, 2, 2, 3]
    items = [run_item(stack, run_id) for run_id in expected]
    created = parse_iso_z(items[0]["created_at"]["S"])
    fire = [parse_iso_z(item["fire_at"]["S"]) for item in items]
    assert [(f - fire[0]).total_seconds() for f in fire] == [0, 0, 1, 1, 2, 2, 3]
    assert abs((fire[0] - created).total_seconds()) <= 1
    for item, at in zip(items, fire, strict=True):
        assert parse_iso_z(item["queue_deadline"]["S"]) == at + service.queue_deadline
        assert parse_iso_z(item["reap_at"]["S"]) == at + service.catalog.lease_check
    received: list[str] = []
    wait_until(lambda: received.extend(m.run_id for m in stack.messages()) or len(received) >= 7, timeout=20)
    assert sorted(received) == expected


def test_a_full_request_of_1000_runs_keeps_within_aws_limits(alpha: Call, stack: Stack) -> None:
    """1,000 runs: 40 BatchExecuteStatements of 25 INSERTs and SendMessageBatches of 10 (every client here
    refuses what AWS would), 25 runs a second over 40 seconds for a team of max_concurrency 50."""
    job = alpha("POST", "/v1/jobs", {**JOB, "schedule": {"cron": "* * * * *", "timezone": "UTC"}}).body
    delays: list[int] = []
    statements: list[int] = []

    def record_sends(params: dict[str, Any], **_: Any) -> None:
        delays.extend(entry["DelaySeconds"] for entry in params["Entries"])

    def record_writes(params: dict[str, Any], **_: Any) -> None:
        statements.append(len(params["Statements"]))

    end = hours_ago(stack, 1)
    body = window(end - timedelta(minutes=1000), end)
    with (
        hooked(stack.sqs, "provide-client-params.sqs.SendMessageBatch", record_sends),
        hooked(stack.dynamodb, "provide-client-params.dynamodb.BatchExecuteStatement", record_writes),
    ):
        answer = alpha("POST", f"/v1/jobs/{job['id']}/backfill", body)
    assert answer.status == 202 and answer.body == {"runs": 1000}, answer.body
    assert statements == [25] * 40
    assert sorted(delays) == [second for second in range(40) for _ in range(25)]
    count = stack.dynamodb.query(
        TableName=stack.names.runs,
        KeyConditionExpression="job_id = :job",
        ExpressionAttributeValues={":job": {"S": job["id"]}},
        Select="COUNT",
    )["Count"]
    assert count == 1000


def test_a_backfill_past_the_teams_runs_per_minute_is_refused_whole(
    alpha: Call, stack: Stack, service: JobService
) -> None:
    """A backfill of 6 when 4 of the minute's runs are left is a 429 naming runs_per_minute, and creates no
    run and sends no message: nothing half created. A window that could never fit is a 422 naming ``to``."""
    team = service.catalog.get_team("alpha")
    assert team is not None
    stack.store.put_team(team.model_copy(update={"runs_per_minute": 10}))
    job = alpha("POST", "/v1/jobs", {**JOB, "schedule": {"cron": "* * * * *", "timezone": "UTC"}}).body
    end = hours_ago(stack, 1)
    a_fresh_minute(stack)
    first = alpha("POST", f"/v1/jobs/{job['id']}/backfill", window(end - timedelta(minutes=6), end))
    assert first.status == 202 and first.body == {"runs": 6}, first.body

    # At once, within the same minute (reading the queue first took long enough on a loaded host to cross
    # into the next minute, whose budget is whole again).
    earlier = window(end - timedelta(minutes=12), end - timedelta(minutes=6))
    refused = alpha("POST", f"/v1/jobs/{job['id']}/backfill", earlier)
    assert refused.status == 429, refused.body
    error = refused.body["error"]
    assert (error["code"], error["field"]) == ("rate_limited", "runs_per_minute")
    assert "10 runs a minute" in error["message"] and "4 are left" in error["message"]
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    runs = alpha("GET", f"/v1/jobs/{job['id']}/runs").body["runs"]
    assert len(runs) == 6  # not one of the 6 asked for
    sent = [m.run_id for m in stack.messages()]
    assert sorted(sent) == sorted(r["run_id"] for r in runs)  # the first backfill's 6, none of the refused

    too_big = alpha("POST", f"/v1/jobs/{job['id']}/backfill", window(end - timedelta(minutes=30), end))
    assert too_big.status == 422 and too_big.body["error"]["field"] == "to", too_big.body
    assert "runs_per_minute: 10" in too_big.body["error"]["message"]
