"""``GET /v1/load``'s cost follows its work (``JobService.load`` on a fake catalog): one request of the team's
API rate per 100 jobs read and per 1,000 fire times computed, paid as the walk goes; a refusal ends it; a
window holding more than ``MAX_LOAD_FIRE_TIMES`` is a 422 naming ``to``; and the answer is the one
``upcoming_runs`` gives, job by job."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from duetime.api.previews import upcoming_runs
from duetime.api.service import MAX_LOAD_FIRE_TIMES, JobService, load_cost
from duetime.domain.catalog import Page
from duetime.domain.errors import InvalidInput, RateLimited
from duetime.domain.ids import new_job_id
from duetime.domain.models import Job, Team
from duetime.domain.timeutil import minute_bucket

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
DAY = (NOW, NOW + timedelta(hours=24))


def a_job(schedule: dict[str, Any], **spec: Any) -> Job:
    return Job.model_validate(
        {
            "name": "load",
            "schedule": schedule,
            "target": {"url": "https://example.com/hook"},
            **spec,
            "id": new_job_id(),
            "team": "t",
            "created_at": NOW - timedelta(days=1),
            "updated_at": NOW - timedelta(days=1),
            "state": {"next_nominal_at": NOW, "next_fire_at": NOW, "version": 0},
        }
    )


class Catalog:
    """The team's jobs, a page at a time, and how many pages were read."""

    def __init__(self, jobs: list[Job]) -> None:
        self.jobs = jobs
        self.pages = 0

    def team_jobs(self, team_id: str, limit: int, cursor: str | None) -> Page:
        self.pages += 1
        start = int(cursor or 0)
        more = start + limit < len(self.jobs)
        return Page(self.jobs[start : start + limit], str(start + limit) if more else None)


class Bucket:
    """The team's API rate as ``load`` sees it: ``pay`` calls, refused after ``allowed`` of them."""

    def __init__(self, allowed: int = 1_000_000) -> None:
        self.allowed = allowed
        self.paid: list[tuple[int, int]] = []

    def pay(self, jobs: int, fire_times: int) -> None:
        if len(self.paid) >= self.allowed:
            raise RateLimited(f"refused after {jobs} jobs and {fire_times} fire times", 1)
        self.paid.append((jobs, fire_times))


def load(
    jobs: list[Job], window: tuple[datetime, datetime], bucket: Bucket
) -> tuple[dict[str, int], Catalog]:
    catalog: Any = Catalog(jobs)
    unused: Any = None
    return JobService(catalog, unused, unused, unused).load(TEAM, *window, bucket.pay), catalog


TEAM = Team(team_id="t")
HOURLY = {"rate": "1 hour"}
EVERY_MINUTE = {"rate": "1 minute"}


def test_load_pays_a_request_per_100_jobs_and_per_1000_fire_times_as_it_walks() -> None:
    bucket = Bucket()
    minutes, catalog = load([a_job(HOURLY) for _ in range(250)], DAY, bucket)
    assert sum(minutes.values()) == 250 * 24 == 6_000 and catalog.pages == 3
    assert load_cost(250, 6_000) == 3 + 5  # the request itself paid the first of the 8
    assert len(bucket.paid) == 7
    assert bucket.paid == sorted(bucket.paid)  # paid as the walk went, not all at the end


def test_a_short_window_costs_what_it_computes_not_a_day_per_job() -> None:
    bucket = Bucket()
    minutes, _ = load([a_job(EVERY_MINUTE) for _ in range(100)], (NOW, NOW + timedelta(minutes=5)), bucket)
    assert sum(minutes.values()) == 500 and bucket.paid == []  # 100 jobs, 500 fire times: the request


def test_when_the_teams_rate_cannot_pay_the_walk_ends_with_its_429() -> None:
    bucket = Bucket(allowed=2)
    with pytest.raises(RateLimited):
        load([a_job(HOURLY) for _ in range(250)], DAY, bucket)
    assert len(bucket.paid) == 2


def test_a_window_holding_more_than_the_most_fire_times_a_request_computes_is_refused_naming_to() -> None:
    jobs = [a_job(EVERY_MINUTE) for _ in range(MAX_LOAD_FIRE_TIMES // 1440 + 1)]
    with pytest.raises(InvalidInput) as refused:
        load(jobs, DAY, Bucket())
    assert refused.value.field == "to" and f"{MAX_LOAD_FIRE_TIMES:,}" in refused.value.message
    minutes, _ = load(jobs[:-1], DAY, Bucket())  # a job fewer fits
    assert sum(minutes.values()) == (len(jobs) - 1) * 1440


def test_the_answer_is_upcoming_runs_fire_times_in_the_window_paused_jobs_left_out() -> None:
    jobs = [
        a_job({"cron": "*/7 * * * *", "timezone": "America/New_York"}, jitter_seconds=300),
        a_job({"rate": "90 minutes"}, exact=True),
        a_job({"cron": "30 2 * * *", "timezone": "Europe/Berlin"}),
        a_job(EVERY_MINUTE, paused=True),
    ]
    start, end = NOW + timedelta(minutes=3, seconds=30), NOW + timedelta(hours=20)
    expected: Counter[str] = Counter()
    for job in jobs[:3]:
        after = start - timedelta(seconds=1)
        for upcoming in upcoming_runs(job, job.id, job.created_at, after, 24 * 60 + 1):
            if start <= upcoming.fire_at < end:
                expected[minute_bucket(upcoming.fire_at)] += 1
    minutes, _ = load(jobs, (start, end), Bucket())
    assert minutes == dict(sorted(expected.items())) and sum(minutes.values()) > 150
