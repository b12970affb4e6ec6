"""Misfire policies after a two-hour outage, with an injected clock (no store involved)."""

from datetime import UTC, datetime, timedelta

from duetime.domain.claim_plan import (
    MAX_SKIPPED_RECORDED,
    RUN_ALL_CAP,
    PlannedRun,
    SkippedTime,
    make_claim,
    plan_claim,
)
from duetime.domain.clock import ManualClock
from duetime.domain.models import Job, JobSpec, MisfirePolicy, RunStatus

CREATED = datetime(2026, 12, 1, 7, 30, tzinfo=UTC)


def hourly_job(misfire: MisfirePolicy, **extra: object) -> Job:
    from duetime.domain.claim_plan import initial_state

    spec = JobSpec.model_validate(
        {
            "name": "report",
            "schedule": {"cron": "0 * * * *", "timezone": "UTC"},
            "target": {"url": "https://example.com"},
            "exact": True,
            "misfire": misfire,
            **extra,
        }
    )
    job = Job(
        **spec.model_dump(), id="01JDZ3K6R2V9Q8T7S6P5N4M3K2", team="t", created_at=CREATED, updated_at=CREATED
    )
    return job.model_copy(update={"state": initial_state(job, CREATED)})


def after_outage() -> tuple[ManualClock, datetime]:
    # The job is due at 08:00; the scheduler is down from 07:59 to 10:00:30 (08:00, 09:00, 10:00 due).
    clock = ManualClock(datetime(2026, 12, 1, 7, 59, tzinfo=UTC))
    clock.advance(timedelta(hours=2, seconds=90).total_seconds())
    return clock, datetime(2026, 12, 1, 11, 0, tzinfo=UTC)


def test_run_once_makes_one_run_for_the_latest_missed_time_and_continues_in_the_future() -> None:
    clock, next_hour = after_outage()
    plan = plan_claim(hourly_job(MisfirePolicy.RUN_ONCE), clock.now())
    assert [r.nominal_at.hour for r in plan.runs] == [10]
    assert plan.missed == 2 and plan.dropped == 2
    assert plan.next_state.next_nominal_at == next_hour
    assert plan.next_state.last_scheduled_at == datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def test_run_all_makes_one_run_per_missed_time() -> None:
    clock, next_hour = after_outage()
    plan = plan_claim(hourly_job(MisfirePolicy.RUN_ALL), clock.now())
    assert [r.nominal_at.hour for r in plan.runs] == [8, 9, 10]
    assert plan.next_state.next_nominal_at == next_hour


def test_skip_makes_no_run_for_missed_times_but_keeps_the_one_inside_the_grace() -> None:
    clock, next_hour = after_outage()
    plan = plan_claim(hourly_job(MisfirePolicy.SKIP), clock.now())
    assert [r.nominal_at.hour for r in plan.runs] == [10]  # 10:00 is 30 s old: within the 60 s grace
    clock.advance(120)
    plan = plan_claim(hourly_job(MisfirePolicy.SKIP), clock.now())
    assert plan.runs == () and plan.dropped == 3
    assert plan.next_state.next_nominal_at == next_hour


def test_run_all_is_capped() -> None:
    job = hourly_job(MisfirePolicy.RUN_ALL)
    plan = plan_claim(job, CREATED + timedelta(days=5))
    assert len(plan.runs) == RUN_ALL_CAP
    assert plan.next_state.next_nominal_at is not None
    assert plan.next_state.next_nominal_at > CREATED + timedelta(days=5)


def test_an_on_time_claim_creates_exactly_the_due_run() -> None:
    job = hourly_job(MisfirePolicy.RUN_ONCE)
    plan = plan_claim(job, datetime(2026, 12, 1, 8, 0, 1, tzinfo=UTC))
    assert [r.nominal_at.hour for r in plan.runs] == [8] and plan.missed == 0
    claim = make_claim(plan, datetime(2026, 12, 1, 8, 0, 1, tzinfo=UTC))
    assert claim.runs[0].run_id == "01JDZ3K6R2V9Q8T7S6P5N4M3K2@2026-12-01T08:00:00Z"
    assert claim.runs[0].queue_deadline == datetime(2026, 12, 1, 8, 10, 1, tzinfo=UTC)
    assert plan.next_state.version == job.state.version + 1


def test_a_one_time_job_ends_after_its_claim() -> None:
    job = hourly_job(MisfirePolicy.RUN_ONCE, schedule={"at": "2026-12-01T09:00:00Z"})
    plan = plan_claim(job, datetime(2026, 12, 1, 9, 0, 5, tzinfo=UTC))
    assert len(plan.runs) == 1
    assert plan.next_state.next_nominal_at is None and plan.next_state.next_fire_at is None


def hours(times: tuple[PlannedRun, ...] | tuple[SkippedTime, ...]) -> list[int]:
    return [(t.planned if isinstance(t, SkippedTime) else t).nominal_at.hour for t in times]


def test_every_due_time_without_a_run_is_recorded_as_skipped_with_its_reason() -> None:
    clock, _ = after_outage()
    once = plan_claim(hourly_job(MisfirePolicy.RUN_ONCE), clock.now())
    assert hours(once.runs) == [10] and hours(once.skipped) == [8, 9]
    assert all("run_once runs only the latest" in s.reason for s in once.skipped)
    clock.advance(120)
    skip = plan_claim(hourly_job(MisfirePolicy.SKIP), clock.now())
    assert skip.runs == () and hours(skip.skipped) == [8, 9, 10]
    assert "past the catch-up window of 60 s" in skip.skipped[0].reason
    claim = make_claim(skip, clock.now())
    assert [r.status for r in claim.skipped] == [RunStatus.SKIPPED] * 3 and claim.runs == ()
    record = claim.skipped[0]
    assert record.run_id == "01JDZ3K6R2V9Q8T7S6P5N4M3K2@2026-12-01T08:00:00Z"
    assert record.finished_at == clock.now() and record.queue_deadline is None
    assert record.result is not None and record.result.error == skip.skipped[0].reason


def test_run_all_past_its_cap_and_a_disabled_team_record_skipped_runs_too() -> None:
    capped = plan_claim(hourly_job(MisfirePolicy.RUN_ALL), CREATED + timedelta(hours=60, minutes=1))
    assert len(capped.runs) == RUN_ALL_CAP and len(capped.skipped) == 60 - RUN_ALL_CAP
    assert capped.skipped[0].planned.nominal_at > capped.runs[-1].nominal_at  # the times past the cap
    assert "at most 48 missed times" in capped.skipped[0].reason
    disabled = plan_claim(
        hourly_job(MisfirePolicy.RUN_ALL), datetime(2026, 12, 1, 8, 0, 1, tzinfo=UTC), team_active=False
    )
    assert disabled.runs == () and [s.reason for s in disabled.skipped] == ["the team is disabled"]


def test_a_long_outage_records_only_the_latest_skipped_times() -> None:
    plan = plan_claim(hourly_job(MisfirePolicy.SKIP), CREATED + timedelta(days=30))
    assert plan.dropped == 30 * 24 and len(plan.skipped) == MAX_SKIPPED_RECORDED
    assert plan.skipped[-1].planned.nominal_at == CREATED + timedelta(days=30, minutes=-30)


def test_a_jobs_catchup_window_decides_what_is_late() -> None:
    clock, _ = after_outage()
    clock.advance(60)  # claimed at 10:01:30: 10:00 is 90 s late, 09:00 61.5 min, 08:00 121.5 min
    default = plan_claim(hourly_job(MisfirePolicy.SKIP), clock.now())
    assert default.runs == ()  # 90 s late: past the default 60 s
    wide = plan_claim(hourly_job(MisfirePolicy.SKIP, catchup_window_seconds=7200), clock.now())
    assert hours(wide.runs) == [9, 10] and hours(wide.skipped) == [8]  # a window of 2 h
    narrow = plan_claim(hourly_job(MisfirePolicy.SKIP), clock.now(), grace=timedelta(seconds=120))
    assert hours(narrow.runs) == [10]  # no window of its own: the installation's default (here 120 s)
    zero = plan_claim(
        hourly_job(MisfirePolicy.SKIP, catchup_window_seconds=0), clock.now(), grace=timedelta(hours=9)
    )
    assert zero.runs == ()  # its own window wins over the installation's
