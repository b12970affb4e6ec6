"""The claim path's faster ways to the same result: each is checked against the general path it stands for."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pydantic
import pytest

from duetime.adapters.dynamodb import conditions as c
from duetime.adapters.dynamodb import partiql
from duetime.adapters.dynamodb.codec import Item, item_to_job, job_to_item, run_payload, run_payload_by_dict
from duetime.domain.claim_plan import Claim, initial_state, make_claim, plan_claim
from duetime.domain.models import CronSchedule, HttpTarget, Job, JobSpec, JobState
from duetime.domain.timeutil import ISO_Z, MINUTE_BUCKET, iso_z, minute_bucket, to_utc

CRONS = [
    "0 0 * * *",
    "  */5\t* * *  1-5 ",
    "@daily",
    "@hourly",
    "0 12 1,15 * MON",
    "30\t\t2 * * *",
    "0 9 LW * 5L",
    " cron( 0 9 ? * MON-FRI\t* ) ",
]


@pytest.mark.parametrize("cron", CRONS)
def test_a_stored_cron_reads_as_the_client_path_reads_it(cron: str) -> None:
    sent = CronSchedule.model_validate({"cron": cron, "timezone": "Europe/Berlin"})
    for _ in range(2):  # the second read is the cached one
        stored = CronSchedule.model_validate(
            {"cron": cron, "timezone": "Europe/Berlin"}, context={"stored": True}
        )
        assert stored == sent
        assert stored.cron == sent.cron


@pytest.mark.parametrize("cron", ["@often", "0 0 * *", "0 0 * * * *", "0 0 % * *", "cron(0 0 * * ?)"])
def test_a_stored_cron_that_is_no_cron_is_still_refused(cron: str) -> None:
    for _ in range(2):
        with pytest.raises(pydantic.ValidationError) as stored:
            CronSchedule.model_validate({"cron": cron}, context={"stored": True})
        with pytest.raises(pydantic.ValidationError) as sent:
            CronSchedule.model_validate({"cron": cron})
        assert stored.value.errors()[0]["msg"] == sent.value.errors()[0]["msg"]


def test_a_minute_bucket_is_the_text_strftime_makes() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    instants = [
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(999, 12, 31, 23, 59, 59, tzinfo=UTC),
        datetime(1000, 1, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
        datetime(2026, 10, 25, 2, 30, fold=1, tzinfo=berlin),  # the second 02:30 of a fall-back
        datetime(2026, 12, 3, 12, 0, 59, 999_999, tzinfo=timezone(timedelta(hours=-5))),
    ]
    start = datetime(2026, 12, 3, tzinfo=UTC)
    instants += [start + timedelta(seconds=7 * k + 0.25) for k in range(2000)]
    for instant in instants:
        assert minute_bucket(instant) == to_utc(instant).strftime(MINUTE_BUCKET)


CREATED = datetime(2026, 12, 3, 8, 0, 5, tzinfo=UTC)
NOW = datetime(2026, 12, 3, 12, 0, 1, 123_456, tzinfo=UTC)
QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/q"
SPECS: list[dict[str, Any]] = [
    {"target": {"url": "https://example.com/a"}},
    {"target": {"url": "https://example.com/h", "headers": {"X-Token": "s"}, "method": "PUT", "body": "b"}},
    {"target": {"url": "https://exämple.com/ü", "body": 'naïve \u2603 \x7f \x01 \t\n"quoted" \\ /'}},
    {"target": {"url": "https://example.com/c", "body": 'control \x01\x1f\t\r\n\b\f "q" \\ / ~'}},
    {"target": {"type": "sqs", "queue_url": QUEUE_URL, "message": "m"}},
    {"target": {"type": "lambda", "function_arn": "arn:aws:lambda:us-east-1:123456789012:function:f"}},
    {
        "target": {
            "type": "lambda",
            "function_arn": "arn:aws:lambda:us-east-1:123456789012:function:f",
            "payload": {"floats": [1e16, 1e-7, 0.1, 1.0], "big": 2**70},
        }
    },
    {"target": {"url": "https://example.com/d"}, "success_deadline_seconds": 600},
    {
        "target": {"url": "https://example.com/o"},
        "overlap": "buffer_one",
        "misfire": "run_all",
        "schedule": {"rate": "1 minute"},
    },
    {"target": {"url": "https://example.com/s"}, "overlap": "buffer_one", "success_deadline_seconds": 3600},
    {"target": {"url": "https://example.com/r"}, "misfire": "run_all", "schedule": {"rate": "1 minute"}},
    {"target": {"url": "https://example.com/t"}, "retry": {"max_attempts": 7, "backoff_seconds": [1, 2]}},
]


def claims_of(spec: dict[str, Any]) -> list[Claim]:
    """A claim of a job of ``spec`` due at noon (hours after its creation): its runs and skipped runs."""
    job_spec = JobSpec.model_validate({"name": "j", "schedule": {"cron": "0 12 * * *"}, **spec})
    job = Job(**job_spec.model_dump(), id="01JOB", team="t", created_at=CREATED, updated_at=CREATED)
    job = job.model_copy(update={"state": initial_state(job, CREATED)})
    return [make_claim(plan_claim(job, NOW), NOW)]


@pytest.mark.parametrize("spec", SPECS)
def test_a_run_payload_is_the_text_of_the_general_path(spec: dict[str, Any]) -> None:
    runs = [run for claim in claims_of(spec) for run in (*claim.runs, *claim.skipped)]
    buffered = runs[0].model_copy(update={"waits_for": 'a "run" \u2603'})  # any text, even this
    for run in [*runs, buffered]:
        assert run_payload(run) == run_payload_by_dict(run)
        assert json.loads(run_payload(run)) == json.loads(run_payload_by_dict(run))
    assert any(run.success_by for run in runs) == ("success_deadline_seconds" in spec)


def test_the_specs_cover_what_a_payload_holds() -> None:
    runs = [run for spec in SPECS for claim in claims_of(spec) for run in (*claim.runs, *claim.skipped)]
    assert {type(run.target).__name__ for run in runs} >= {"HttpTarget", "SqsTarget", "LambdaTarget"}
    assert any(run.waits_for for run in runs) and any(run.success_by for run in runs)
    assert any(isinstance(run.target, HttpTarget) and run.target.headers for run in runs)
    assert not all(run.target.model_dump_json().isascii() for run in runs)  # some go by the dict path


def test_an_instant_formats_as_strftime_formats_it_also_from_the_cache() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    first = datetime(2026, 10, 25, 2, 30, fold=0, tzinfo=berlin)
    second = first.replace(fold=1)  # equal to ``first`` as Python compares them, an hour later
    instants = [
        first,
        second,
        datetime(999, 12, 31, 23, 59, 59, tzinfo=UTC),
        datetime(1000, 1, 1, tzinfo=UTC),
    ]
    start = datetime(2026, 12, 3, tzinfo=UTC)
    instants += [start + timedelta(seconds=k // 3, microseconds=k % 3) for k in range(3000)]
    for _ in range(2):
        for instant in instants:
            assert iso_z(instant) == to_utc(instant).strftime(ISO_Z)
    assert iso_z(first) == "2026-10-25T00:30:00Z" and iso_z(second) == "2026-10-25T01:30:00Z"


def test_an_insert_names_its_item_s_attributes_in_order_whichever_text_it_shares() -> None:
    items: list[Item] = [
        {"job_id": {"S": "j"}, "occurrence": {"S": "o"}, "n": {"N": "1"}},
        {"job_id": {"S": "k"}, "occurrence": {"S": "p"}, "n": {"N": "2"}},
        {"occurrence": {"S": "p"}, "job_id": {"S": "k"}},
    ]
    for item in items * 2:
        statement = partiql.insert("runs", item, c.RUN_IS_NEW)
        fields = ", ".join(f"'{name}': ?" for name in item)
        assert statement.text == f'INSERT INTO "runs" VALUE {{{fields}}}'
        assert statement.parameters == [item[name] for name in item]


@pytest.mark.parametrize("spec", SPECS)
def test_a_job_read_from_its_item_is_the_job_with_its_state_as_given(spec: dict[str, Any]) -> None:
    (claim,) = claims_of(spec)
    ended = JobState(last_scheduled_at=NOW.replace(microsecond=0), version=7, active_run="01JOB@x")
    for job in (claim.plan.job, claim.plan.job.model_copy(update={"state": ended})):
        read = item_to_job(job_to_item(job, NOW))
        assert read == job
        assert read.state.model_fields_set == set(JobState.model_fields)
