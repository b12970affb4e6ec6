"""Run ids: a scheduled run's is its job and nominal time; a manual run's can never equal one."""

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from duetime.domain.ids import is_manual_run_id, make_manual_run_id, make_run_id, split_run_id

JOB = "01JDZ3K6R2V9Q8T7S6P5N4M3K2"
AT = datetime(2026, 12, 1, tzinfo=UTC)


def test_a_scheduled_run_id_keeps_the_nominal_time_and_round_trips() -> None:
    run_id = make_run_id(JOB, AT)
    assert run_id == f"{JOB}@2026-12-01T00:00:00Z"
    assert split_run_id(run_id) == (JOB, "2026-12-01T00:00:00Z")
    assert not is_manual_run_id(run_id)


def test_a_manual_run_id_has_the_trigger_time_and_a_suffix_of_its_own() -> None:
    run_id = make_manual_run_id(JOB, AT, nonce="0123456789")
    assert run_id == f"{JOB}@2026-12-01T00:00:00Z~manual-0123456789"
    assert split_run_id(run_id) == (JOB, "2026-12-01T00:00:00Z~manual-0123456789")
    assert is_manual_run_id(run_id)
    assert make_manual_run_id(JOB, AT) != make_manual_run_id(JOB, AT)  # two triggers in one second


@given(st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)))
def test_no_manual_run_id_equals_a_scheduled_one(at: datetime) -> None:
    manual = make_manual_run_id(JOB, at)
    assert manual != make_run_id(JOB, at)
    assert split_run_id(manual)[1] > split_run_id(make_run_id(JOB, at))[1]  # it sorts after, by time


@pytest.mark.parametrize(
    "text",
    [
        JOB,
        f"@{AT:%Y-%m-%dT%H:%M:%SZ}",
        f"{JOB}@2026-12-01",
        f"{JOB}@2026-13-01T00:00:00Z",  # the shape of a time, not a time
        f"{JOB}@2026-12-01T00:00:00Z~manual-",
        f"{JOB}@2026-12-01T00:00:00Z~manual-XYZ0123456",
        f"{JOB}@2026-12-01T00:00:00Z~other-0123456789",
    ],
)
def test_anything_else_is_not_a_run_id(text: str) -> None:
    with pytest.raises(ValueError):
        split_run_id(text)
