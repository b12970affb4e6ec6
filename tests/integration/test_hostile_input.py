"""A written list of hostile inputs and the answers they must get; nothing is ever written for them."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from duetime.adapters.dynamodb.job_index import history_pk, label_pk, words_pk

from .api_support import JOB, Call, make_call
from .conftest import Stack

JOB_URL = "https://example.com/hook"


def target(url: str, **extra: Any) -> dict[str, Any]:
    return {**JOB, "target": {"url": url, **extra}}


def aws(kind: str, **fields: Any) -> dict[str, Any]:
    """A job with an AWS target of ``kind`` called under an opted-in role (so only ``fields`` are wrong)."""
    return {**JOB, "target": {"type": kind, "role_arn": ROLE, **fields}}


ACCOUNT = "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/duetime-target-ops"
QUEUE = f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/jobs"
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
    ("the redaction marker as a URL's token", target(JOB_URL + "?token=***"), 422, "target.url"),
    ("the redaction marker as a URL's password", target("https://u:***@example.com/"), 422, "target.url"),
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
    ("a public host's SSH port (a port scan)", target("http://93.184.216.34:22/"), 422, "target.url"),
    (
        "a webhook on a public host's mail port",
        {**JOB, "notify": [{"type": "webhook", "url": "https://93.184.216.34:25/", "events": ["dead"]}]},
        422,
        "notify.0.url",
    ),
    ("success deadline under a minute", {**JOB, "success_deadline_seconds": 30}, 422, DEADLINE_FIELD),
    ("success deadline as text", {**JOB, "success_deadline_seconds": "1h"}, 422, DEADLINE_FIELD),
    ("body over the limit", {**JOB, "name": "x" * (70 * 1024)}, 413, None),
    ("a rate of 5,000 digits", {**JOB, "schedule": {"rate": "1" * 5_000 + " days"}}, 422, "schedule.rate"),
    (
        "a cron of 10,000 characters",
        {**JOB, "schedule": {"cron": "0 0 * * " + "1," * 5_000 + "1", "timezone": "UTC"}},
        422,
        "schedule.cron",
    ),
    # AWS targets
    ("an unknown target type", {**JOB, "target": {"type": "smtp", "url": JOB_URL}}, 422, "target"),
    (
        "an S3 ARN as a function",
        aws("lambda", function_arn="arn:aws:s3:::bucket"),
        422,
        "target.function_arn",
    ),
    (
        "a function ARN with a short account",
        aws("lambda", function_arn="arn:aws:lambda:us-east-1:1234:function:f"),
        422,
        "target.function_arn",
    ),
    (
        "a queue URL that is not SQS",
        aws("sqs", queue_url=f"https://example.com/{ACCOUNT}/q", message="m"),
        422,
        "target.queue_url",
    ),
    (
        "a queue URL on a look-alike host",
        aws("sqs", queue_url=f"https://sqs.us-east-1.amazonaws.com.evil.io/{ACCOUNT}/q", message="m"),
        422,
        "target.queue_url",
    ),
    (
        "a metadata URL as a queue",
        aws("sqs", queue_url="http://169.254.169.254/latest", message="m"),
        422,
        "target.queue_url",
    ),
    (
        "a FIFO queue without a group",
        aws("sqs", queue_url=QUEUE + ".fifo", message="m"),
        422,
        "target.message_group_id",
    ),
    ("a NUL in a message", aws("sqs", queue_url=QUEUE, message="a\u0000b"), 422, "target.message"),
    (
        "a topic ARN of another service",
        aws("sns", topic_arn=f"arn:aws:sqs:us-east-1:{ACCOUNT}:t", message="m"),
        422,
        "target.topic_arn",
    ),
    ("an event source of AWS's", aws("eventbridge", detail_type="d", source="aws.s3"), 422, "target.source"),
    (
        "duetime's key in a detail",
        aws("eventbridge", detail_type="d", detail={"duetime": {}}),
        422,
        "target.detail",
    ),
    ("a detail that is a list", aws("eventbridge", detail_type="d", detail=[1]), 422, "target.detail"),
    (
        "a state machine ARN that is an activity",
        aws("stepfunctions", state_machine_arn=f"arn:aws:states:us-east-1:{ACCOUNT}:activity:a"),
        422,
        "target.state_machine_arn",
    ),
    (
        "a role that did not opt in",
        {
            **JOB,
            "target": {
                "type": "sns",
                "topic_arn": f"arn:aws:sns:us-east-1:{ACCOUNT}:t",
                "message": "m",
                "role_arn": f"arn:aws:iam::{ACCOUNT}:role/Admin",
            },
        },
        422,
        "target.role_arn",
    ),
    (
        "an opted-in name under a path",
        {
            **JOB,
            "target": {
                "type": "sns",
                "topic_arn": f"arn:aws:sns:us-east-1:{ACCOUNT}:t",
                "message": "m",
                "role_arn": f"arn:aws:iam::{ACCOUNT}:role/x/duetime-target-a",
            },
        },
        422,
        "target.role_arn",
    ),
    (
        "an AWS target with no role, the team having none",
        {**JOB, "target": {"type": "sns", "topic_arn": f"arn:aws:sns:us-east-1:{ACCOUNT}:t", "message": "m"}},
        422,
        "target.role_arn",
    ),
    (
        "an HTTP field on an AWS target",
        aws("lambda", function_arn=f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:f", url=JOB_URL),
        422,
        "target.url",
    ),
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


DEEP = 1_000
HOSTILE_JSON: list[tuple[str, str, str]] = [
    # (what, raw body, words the 400's message holds)
    ("JSON nested 1,000 deep", '{"name": ' + "[" * DEEP + "]" * DEEP + "}", "nested deeper than"),
    (
        "JSON objects nested 1,000 deep",
        '{"name": ' + '{"a": ' * DEEP + "1" + "}" * DEEP + "}",
        "nested deeper",
    ),
    ("an integer of 5,000 digits", '{"name": "n", "jitter_seconds": ' + "1" * 5_000 + "}", "4300 digits"),
    ("a negative integer of 5,000 digits", '{"timeout_seconds": -' + "9" * 5_000 + "}", "4300 digits"),
    ("NaN, which JSON has not", '{"name": "n", "body": {"ratio": NaN}}', "holds NaN"),
    ("-Infinity, which JSON has not", '{"timeout_seconds": -Infinity}', "holds -Infinity"),
]


@pytest.mark.parametrize(("what", "raw", "words"), HOSTILE_JSON, ids=[h[0] for h in HOSTILE_JSON])
def test_json_that_would_exhaust_the_parser_is_a_400_naming_the_problem_on_every_route_with_a_body(
    alpha: Call, stack: Stack, what: str, raw: str, words: str
) -> None:
    job = alpha("POST", "/v1/jobs", JOB).body
    before = rows(stack)
    for method, path in (
        ("POST", "/v1/jobs"),
        ("PATCH", f"/v1/jobs/{job['id']}"),
        ("POST", f"/v1/jobs/{job['id']}/trigger"),
        ("POST", f"/v1/jobs/{job['id']}/backfill"),
        ("PUT", "/v1/team/aws-role"),
    ):
        answer = alpha(method, path, raw=raw)
        assert answer.status == 400, (what, method, path, answer.body)
        assert answer.body["error"]["code"] == "bad_request" and words in answer.body["error"]["message"]
    assert rows(stack) == before  # nothing written


def cursor_of(value: Any) -> str:
    """A cursor as this API encodes one (URL-safe base64 of JSON), holding ``value``."""
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()


# Each listing with a cursor: its path, its query, and a start key of its shape (the attributes of the key it
# pages through, its partition key's value among them); "{job}" is the job's id.
LISTINGS: list[tuple[str, str, dict[str, str], dict[str, str]]] = [
    ("jobs", "/v1/jobs", {}, {"team": "alpha", "job_id": "{job}"}),
    (
        "labelled jobs",
        "/v1/jobs",
        {"label": "env:prod"},
        {"pk": label_pk("alpha", "env", "prod"), "sk": "{job}"},
    ),
    ("jobs by name", "/v1/jobs", {"q": "nightly"}, {"pk": words_pk("alpha"), "sk": "nightly#{job}"}),
    ("runs", "/v1/jobs/{job}/runs", {}, {"job_id": "{job}", "occurrence": "2026-12-01T00:00:00Z"}),
    ("history", "/v1/jobs/{job}/history", {}, {"pk": history_pk("{job}"), "sk": "2026-12-01T00:00:00#ab"}),
]


def wrong_shapes(key: dict[str, str]) -> list[tuple[str, Any]]:
    """Well-formed cursors (base64 of valid JSON) that are not a start key of ``key``'s shape."""
    first, *_, last = key
    typed = {name: {"S": value} for name, value in key.items()}
    return [
        ("a JSON list", [1, 2]),
        ("a JSON string", "next"),
        ("an empty object", {}),
        ("the partition key alone", {first: typed[first]}),
        ("a value that is a number", {**typed, last: {"S": 5}}),
        ("a value with no type", {**typed, last: {}}),
        ("a value of the number type", {**typed, last: {"N": "x"}}),
        ("a value of two types", {**typed, last: {"S": "a", "N": "1"}}),
        ("an empty value", {**typed, last: {"S": ""}}),
        ("a value over DynamoDB's key limit", {**typed, last: {"S": "k" * 1_100}}),
        ("a value that is no UTF-8", {**typed, last: {"S": "\ud800"}}),
        ("an attribute that is no key", {**typed, "name": {"S": "x"}}),
    ]


@pytest.mark.parametrize(
    ("listing", "path", "query", "key"), LISTINGS, ids=[listing[0] for listing in LISTINGS]
)
def test_a_well_formed_cursor_of_the_wrong_shape_is_a_400_naming_the_cursor_on_every_listing(
    alpha: Call, listing: str, path: str, query: dict[str, str], key: dict[str, str]
) -> None:
    job = alpha("POST", "/v1/jobs", {**JOB, "labels": {"env": "prod"}}).body
    path = path.replace("{job}", job["id"])
    key = {name: value.replace("{job}", job["id"]) for name, value in key.items()}
    for what, value in wrong_shapes(key):
        answer = alpha("GET", path, query={**query, "cursor": cursor_of(value)})
        assert answer.status == 400, (what, listing, answer.body)
        assert answer.body["error"]["field"] == "cursor", (what, listing, answer.body)
    # the right shape is taken (a page after that key)
    right = {name: {"S": value} for name, value in key.items()}
    assert alpha("GET", path, query={**query, "cursor": cursor_of(right)}).status == 200, listing


def test_a_search_refuses_the_cursor_of_another_search_of_the_same_team(alpha: Call) -> None:
    for name in ("nightly a", "nightly b", "weekly c"):
        assert alpha("POST", "/v1/jobs", {**JOB, "name": name}).status == 201
    cursor = alpha("GET", "/v1/jobs", query={"q": "nightly", "limit": "1"}).body["next_cursor"]
    assert cursor
    refused = alpha("GET", "/v1/jobs", query={"q": "weekly", "cursor": cursor})
    assert refused.status == 400 and refused.body["error"]["field"] == "cursor", refused.body
    taken = alpha("GET", "/v1/jobs", query={"q": "nightly", "cursor": cursor})
    assert taken.status == 200 and [j["name"] for j in taken.body["jobs"]] == ["nightly b"], taken.body
