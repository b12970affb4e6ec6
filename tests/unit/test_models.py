"""Bad input raises a validation error that names the field."""

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from duetime.domain.errors import field_path
from duetime.domain.models import JobSpec

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
GOOD: dict[str, Any] = {
    "name": "n",
    "schedule": {"rate": "5 minutes"},
    "target": {"url": "https://example.com"},
}


def error_fields(overrides: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        JobSpec.model_validate({**GOOD, **overrides}, context={"now": NOW})
    return [field_path(tuple(e["loc"])) for e in caught.value.errors()]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"schedule": {"cron": "0 0 * *", "timezone": "UTC"}}, "schedule.cron"),
        ({"schedule": {"cron": "0 0 0 * * * *", "timezone": "UTC"}}, "schedule.cron"),
        ({"schedule": {"cron": "0 0 30 2 *", "timezone": "UTC"}}, "schedule.cron"),
        ({"schedule": {"cron": "61 * * * *", "timezone": "UTC"}}, "schedule.cron"),
        ({"schedule": {"cron": "0 0 * * *", "timezone": "Mars/Olympus"}}, "schedule.timezone"),
        ({"schedule": {"cron": "0 0 * * *", "timezone": "+02:00"}}, "schedule.timezone"),
        ({"schedule": {"rate": "0 minutes"}}, "schedule.rate"),
        ({"schedule": {"rate": "-5 minutes"}}, "schedule.rate"),
        ({"schedule": {"rate": "5 fortnights"}}, "schedule.rate"),
        ({"schedule": {"rate": "99999999999999999999 days"}}, "schedule.rate"),
        ({"schedule": {"rate": "367 days"}}, "schedule.rate"),
        ({"schedule": {"at": "2026-11-30T00:00:00Z"}}, "schedule.at"),
        ({"schedule": {"at": "2026-12-24T00:00:00"}}, "schedule.at"),
        ({"schedule": {"rate": "5 minutes", "cron": "* * * * *"}}, "schedule"),
        ({"start_at": "2026-12-02T00:00:00Z", "end_at": "2026-12-01T00:00:00Z"}, "end_at"),
        ({"colour": "blue"}, "colour"),
        ({"target": {"url": "https://e.com", "verb": "GET"}}, "target.verb"),
        ({"target": {"url": "ftp://e.com"}}, "target.url"),
        ({"target": {"url": "https://e.com", "headers": {"X-A": "a\r\nInjected: 1"}}}, "target.headers"),
        ({"target": {"url": "https://e.com", "headers": {"Idempotency-Key": "mine"}}}, "target.headers"),
        ({"retry": {"max_attempts": 0}}, "retry.max_attempts"),
        ({"retry": {"backoff_seconds": [10, 3600]}}, "retry.backoff_seconds.1"),
        ({"jitter_seconds": -1}, "jitter_seconds"),
        ({"timeout_seconds": 100000}, "timeout_seconds"),
        ({"misfire": "sometimes"}, "misfire"),
    ],
)
def test_bad_input_names_the_field(overrides: dict[str, Any], field: str) -> None:
    assert field in error_fields(overrides)


def test_cron_error_message_says_why() -> None:
    with pytest.raises(ValidationError, match="never fires"):
        JobSpec.model_validate({**GOOD, "schedule": {"cron": "0 0 30 2 *"}})
    with pytest.raises(ValidationError, match="exactly 5 fields"):
        JobSpec.model_validate({**GOOD, "schedule": {"cron": "0 0 * * * 2026"}})


def test_defaults_match_the_documented_policy() -> None:
    spec = JobSpec.model_validate({**GOOD, "schedule": {"cron": "@daily", "timezone": "Europe/Berlin"}})
    assert spec.jitter_seconds == 300 and not spec.exact and spec.misfire == "run_once"
    assert spec.retry.max_attempts == 4 and spec.retry.backoff_seconds == [10, 30, 120]
    assert spec.schedule.cron == "0 0 * * *"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ({"cron": "0 0 * * " + "1," * 200 + "1"}, "cron is longer than 256 characters"),
        ({"rate": "1" * 5_000 + " days"}, "rate is longer than 64 characters"),  # int() would raise on it
    ],
)
def test_a_cron_or_rate_over_its_length_bound_is_refused_before_it_is_read(
    schedule: dict[str, str], message: str
) -> None:
    with pytest.raises(ValidationError, match=message) as caught:
        JobSpec.model_validate({**GOOD, "schedule": schedule}, context={"now": NOW})
    assert field_path(tuple(caught.value.errors()[0]["loc"])) == f"schedule.{next(iter(schedule))}"


def test_a_stored_cron_over_the_bound_is_still_read() -> None:
    """A job written before the bound keeps running: the bound is a client's."""
    long_cron = "0 0 * * " + "1," * 200 + "1"
    stored = JobSpec.model_validate({**GOOD, "schedule": {"cron": long_cron}}, context={"stored": True})
    assert stored.schedule.cron == long_cron  # type: ignore[union-attr]
