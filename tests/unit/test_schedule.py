"""Schedule math without DST: rates, one-shots, start/end, jitter, and the next time from the last one."""

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from duetime.domain.claim_plan import initial_state
from duetime.domain.ids import jitter_offset_seconds, partition_of
from duetime.domain.models import Job, JobSpec
from duetime.domain.schedule import fire_time, next_nominal_after, rate_anchor

T0 = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)
TARGET = {"url": "https://example.com/hook"}


def job(**overrides: object) -> Job:
    spec = {"name": "j", "schedule": {"rate": "5 minutes"}, "target": TARGET, **overrides}
    return Job(
        **JobSpec.model_validate(spec).model_dump(),
        id="01JDZ3K6R2V9Q8T7S6P5N4M3K2",
        team="t",
        created_at=T0,
        updated_at=T0,
    )


def test_rate_is_anchored_to_the_jobs_start_not_to_now() -> None:
    j = job(start_at="2026-12-01T10:02:00Z")
    anchor = rate_anchor(j, j.created_at)
    assert next_nominal_after(j, anchor, T0) == datetime(2026, 12, 1, 10, 2, tzinfo=UTC)
    # 10:13:41 is late; the next time is still on the 10:02 + 5k grid.
    assert next_nominal_after(j, anchor, datetime(2026, 12, 1, 10, 13, 41, tzinfo=UTC)) == datetime(
        2026, 12, 1, 10, 17, tzinfo=UTC
    )


def test_next_time_comes_from_the_last_scheduled_time_so_lateness_does_not_drift() -> None:
    j = job(schedule={"cron": "0 * * * *", "timezone": "UTC"})
    last = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    assert next_nominal_after(j, T0, last) == datetime(2026, 12, 1, 11, 0, tzinfo=UTC)


def test_at_runs_once() -> None:
    at = T0 + timedelta(hours=1)
    j = job(schedule={"at": at.isoformat()})
    assert next_nominal_after(j, T0, T0) == at
    assert next_nominal_after(j, T0, at) is None


def test_nothing_runs_after_end_at() -> None:
    j = job(end_at="2026-12-01T10:12:00Z")
    assert next_nominal_after(j, T0, datetime(2026, 12, 1, 10, 5, tzinfo=UTC)) == datetime(
        2026, 12, 1, 10, 10, tzinfo=UTC
    )
    assert next_nominal_after(j, T0, datetime(2026, 12, 1, 10, 10, tzinfo=UTC)) is None


def test_a_new_job_is_first_due_strictly_after_now() -> None:
    j = job()
    state = initial_state(j, T0)
    assert state.next_nominal_at == T0 + timedelta(minutes=5)
    assert state.next_fire_at is not None and state.next_nominal_at <= state.next_fire_at


def test_jitter_is_stable_and_within_the_window() -> None:
    offsets = {jitter_offset_seconds(f"job-{i}", 300) for i in range(2000)}
    assert offsets <= set(range(300)) and len(offsets) > 250  # spread over the window
    assert jitter_offset_seconds("job-1", 300) == jitter_offset_seconds("job-1", 300)


def test_exact_jobs_fire_at_the_nominal_second_and_jitter_never_passes_the_next_run() -> None:
    nominal = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)
    assert fire_time("x", job(exact=True), nominal, None) == nominal
    every_minute = job(schedule={"rate": "1 minute"}, jitter_seconds=300)
    for i in range(200):
        fire = fire_time(f"job-{i}", every_minute, nominal, nominal + timedelta(minutes=1))
        assert nominal <= fire < nominal + timedelta(minutes=1)


def test_partitions_are_stable_and_spread() -> None:
    assert partition_of("01JDZ3K6R2V9Q8T7S6P5N4M3K2") == partition_of("01JDZ3K6R2V9Q8T7S6P5N4M3K2")
    counts = [0] * 64
    for i in range(6400):
        counts[partition_of(f"job-{i}")] += 1
    assert min(counts) > 50 and max(counts) < 160


def test_a_random_cron_field_is_refused() -> None:
    # croniter reads "R" as a value drawn anew at every parse: the schedule would move at every read.
    for cron in ("R 0 * * *", "0 r/6 * * *"):
        with pytest.raises(ValidationError, match="random value"):
            JobSpec.model_validate({"name": "j", "schedule": {"cron": cron}, "target": TARGET})


def test_a_stored_cron_that_can_never_fire_ends_its_schedule() -> None:
    # Valid when every Sunday of February counted; under Vixie cron's day rule it needs a 30 February.
    spec = {"name": "j", "schedule": {"cron": "0 0 30 2 */7"}, "target": TARGET}
    stored = JobSpec.model_validate(spec, context={"stored": True})
    assert next_nominal_after(stored, T0, T0) is None


def test_the_next_cron_time_is_computed_once_for_the_many_jobs_that_share_it() -> None:
    """At midnight a poller plans thousands of claims of jobs sharing a schedule and a nominal time: the
    answer is a pure function of (expression, zone, instant), so it is cached, and equal instants in other
    zones are the same question."""
    from datetime import UTC, datetime, timedelta, timezone

    from duetime.domain.schedule import cron_next_after

    after = datetime(2031, 3, 30, 0, 0, tzinfo=UTC)
    first = cron_next_after("30 2 * * *", "Europe/Berlin", after)  # 02:30 does not exist that day (DST)
    misses = cron_next_after.cache_info().misses
    same_instant = after.astimezone(timezone(timedelta(hours=5)))
    assert cron_next_after("30 2 * * *", "Europe/Berlin", same_instant) == first
    assert cron_next_after.cache_info().misses == misses
    assert first == datetime(2031, 3, 30, 1, 0, tzinfo=UTC)  # the skipped wall time runs as the clocks jump
