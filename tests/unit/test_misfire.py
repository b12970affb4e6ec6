"""Misfire policies after a two-hour outage, with an injected clock (no store involved)."""

from datetime import UTC, datetime, timedelta

from duetime.claim_plan import RUN_ALL_CAP, make_claim, plan_claim
from duetime.clock import ManualClock
from duetime.models import Job, JobSpec, MisfirePolicy

CREATED = datetime(2026, 12, 1, 7, 30, tzinfo=UTC)


def hourly_job(misfire: MisfirePolicy, **extra: object) -> Job:
    from duetime.claim_plan import initial_state

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
