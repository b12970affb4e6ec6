"""A written list of hostile inputs and the answers they must get; nothing is ever written for them."""

from __future__ import annotations

from typing import Any

import pytest

from .api_support import JOB, Call, make_call
from .conftest import Stack

JOB_URL = "https://example.com/hook"


def target(url: str, **extra: Any) -> dict[str, Any]:
    return {**JOB, "target": {"url": url, **extra}}


DEADLINE_FIELD = "success_deadline_seconds"
HOSTILE: list[tuple[str, dict[str, Any] | str, int, str | None]] = [
    # (what, body or raw text, expected status, field named)
    ("label key with markup", {**JOB, "labels": {"<script>": "x"}}, 422, "labels"),
    ("label value with a NUL", {**JOB, "labels": {"env": "pr\u0000od"}}, 422, "labels"),
    ("label value that is an object", {**JOB, "labels": {"env": {"$ne": 1}}}, 422, "labels.env"),
    ("21 labels", {**JOB, "labels": {f"k{i}": "v" for i in range(21)}}, 422, "labels"),
    ("labels that are a list", {**JOB, "labels": ["env:prod"]}, 422, "labels"),
    ("malformed JSON", '{"name": ', 400, None),
    ("JSON that is not an object", "[1, 2, 3]", 422, None),
    ("unknown top-level field", {**JOB, "owner": "mallory"}, 422, "owner"),
    ("unknown nested field", target(JOB_URL, proxy="http://evil"), 422, "target.proxy"),
    (
        "cron that never fires (30 Feb)",
        {**JOB, "schedule": {"cron": "0 0 30 2 *", "timezone": "UTC"}},
        422,
        "schedule.cron",
    ),
    ("6-field cron", {**JOB, "schedule": {"cron": "0 0 0 * * *", "timezone": "UTC"}}, 422, "schedule.cron"),
    (
        "7-field cron",
        {**JOB, "schedule": {"cron": "0 0 0 * * * 2026", "timezone": "UTC"}},
        422,
        "schedule.cron",
    ),
    (
        "time zone abbreviation",
        {**JOB, "schedule": {"cron": "0 0 * * *", "timezone": "PST"}},
        422,
        "schedule.timezone",
    ),
    (
        "UTC offset as a time zone",
        {**JOB, "schedule": {"cron": "0 0 * * *", "timezone": "UTC+02:00"}},
        422,
        "schedule.timezone",
    ),
    (
        "path traversal as a time zone",
        {**JOB, "schedule": {"cron": "0 0 * * *", "timezone": "../../etc/passwd"}},
        422,
        "schedule.timezone",
    ),
    ("negative rate", {**JOB, "schedule": {"rate": "-1 minutes"}}, 422, "schedule.rate"),
    ("huge rate", {**JOB, "schedule": {"rate": "99999999999999999999 days"}}, 422, "schedule.rate"),
    ("negative jitter", {**JOB, "jitter_seconds": -5}, 422, "jitter_seconds"),
    ("huge timeout", {**JOB, "timeout_seconds": 10**12}, 422, "timeout_seconds"),
    ("huge attempts", {**JOB, "retry": {"max_attempts": 10**9}}, 422, "retry.max_attempts"),
    ("float where an integer belongs", {**JOB, "jitter_seconds": 1.5}, 422, "jitter_seconds"),
    ("CRLF in a header value", target(JOB_URL, headers={"X-A": "a\r\nX-Injected: 1"}), 422, "target.headers"),
    ("LF in a header name", target(JOB_URL, headers={"X\nB": "1"}), 422, "target.headers"),
    ("LF ending a header name", target(JOB_URL, headers={"X-B\n": "1"}), 422, "target.headers"),
    ("the redaction marker as a value", target(JOB_URL, headers={"X-B": "***"}), 422, "target.headers"),
    ("a cron alias not in the list", {**JOB, "schedule": {"cron": "@often"}}, 422, "schedule.cron"),
    (
        "overriding the idempotency key",
        target(JOB_URL, headers={"idempotency-key": "x"}),
        422,
        "target.headers",
    ),
    (
        "forging duetime's signature",
        target(JOB_URL, headers={"X-Duetime-Signature": "t=1,v1=0"}),
        422,
        "target.headers",
    ),
    ("file URL", target("file:///etc/passwd"), 422, "target.url"),
    ("loopback IPv4", target("http://127.0.0.1/"), 422, "target.url"),
    ("loopback, short form", target("http://127.1/"), 422, "target.url"),
    ("loopback, decimal", target("http://2130706433/"), 422, "target.url"),
    ("loopback, hex", target("http://0x7f000001/"), 422, "target.url"),
    ("loopback IPv6", target("http://[::1]/"), 422, "target.url"),
    ("IPv4-mapped IPv6 private", target("http://[::ffff:192.168.1.1]/"), 422, "target.url"),
    ("private 10/8", target("http://10.0.0.1/"), 422, "target.url"),
    ("private 172.16/12", target("http://172.16.0.1/"), 422, "target.url"),
    (
        "link-local / cloud metadata",
        target("http://169.254.169.254/latest/meta-data/iam/"),
        422,
        "target.url",
    ),
    ("IPv6 unique local", target("http://[fd12::1]/"), 422, "target.url"),
    ("a DNS name resolving to loopback", target("http://localhost:9000/"), 422, "target.url"),
    ("unspecified address", target("http://0.0.0.0/"), 422, "target.url"),
    ("success deadline under a minute", {**JOB, "success_deadline_seconds": 30}, 422, DEADLINE_FIELD),
    ("success deadline as text", {**JOB, "success_deadline_seconds": "1h"}, 422, DEADLINE_FIELD),
    ("body over the limit", {**JOB, "name": "x" * (70 * 1024)}, 413, None),
]


def rows(stack: Stack) -> int:
    return sum(
        stack.dynamodb.scan(TableName=t, Select="COUNT")["Count"]  # test inspection only
        for t in (stack.names.jobs, stack.names.runs)
    )


@pytest.mark.parametrize(("what", "body", "status", "field"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_input_gets_a_clear_4xx_and_writes_nothing(
    alpha: Call, stack: Stack, what: str, body: dict[str, Any] | str, status: int, field: str | None
) -> None:
    before = rows(stack)
    answer = alpha("POST", "/v1/jobs", raw=body) if isinstance(body, str) else alpha("POST", "/v1/jobs", body)
    assert answer.status == status, (what, answer.body)
    assert set(answer.body) == {"error"} and answer.body["error"]["message"]
    if field is not None:
        assert answer.body["error"].get("field") == field, (what, answer.body)
    assert rows(stack) == before  # nothing written


def test_another_teams_ids_answer_exactly_like_missing_ones(alpha: Call, service: Any) -> None:
    job = alpha("POST", "/v1/jobs", JOB).body
    mallory = make_call(service.create_team("mallory")[1])
    theirs = mallory("GET", f"/v1/jobs/{job['id']}")
    missing = mallory("GET", "/v1/jobs/01JDZ3K6R2V9Q8T7S6P5N4M3K2")
    assert theirs.status == missing.status == 404
    assert theirs.body["error"]["code"] == missing.body["error"]["code"]
    assert mallory("POST", f"/v1/jobs/{job['id']}/trigger").status == 404
    assert alpha("GET", f"/v1/jobs/{job['id']}/runs").body["runs"] == []  # mallory's trigger wrote nothing
