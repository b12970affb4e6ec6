"""Jobs that use calendars on DynamoDB Local: the calendar items count their jobs in the jobs' own
transactions (a delete in use is a 409 naming the job), a calendar change re-plans the job stored in DynamoDB,
a business-day schedule round-trips, and a poller reads the calendars through the catalog when it claims."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from duetime.adapters.dynamodb.catalog import DynamoCatalog
from duetime.domain.clock import ManualClock
from duetime.scheduling.poller import Poller, PollerConfig

from .api_support import JOB, Call
from .conftest import PARTITIONS, Stack


def _day(offset: int) -> str:
    return (datetime.now(UTC).date() + timedelta(days=offset)).isoformat()


def test_a_calendar_in_use_is_kept_and_its_change_re_plans_the_job(alpha: Call) -> None:
    created = alpha("POST", "/v1/calendars", {"name": "closed", "source": {"dates": [_day(20)]}})
    assert created.status == 201
    schedule = {"cron": "0 12 * * *", "timezone": "UTC"}
    body = {**JOB, "schedule": schedule, "exclude": {"calendars": ["closed"]}}
    job = alpha("POST", "/v1/jobs", body).body
    first = job["next_nominal_at"]
    assert first.startswith(_day(0)) or first.startswith(_day(1))

    refused = alpha("DELETE", "/v1/calendars/closed")
    assert refused.status == 409 and job["id"] in refused.body["error"]["message"]
    assert alpha("GET", "/v1/calendars/closed").body["used_by"] == [job["id"]]

    day = first[:10]
    change = {"source": {"dates": [day, _day(20)]}, "version": created.body["version"]}
    assert alpha("PUT", "/v1/calendars/closed", change).status == 200
    moved = alpha("GET", f"/v1/jobs/{job['id']}").body["next_nominal_at"]
    assert moved[:10] == (datetime.fromisoformat(day) + timedelta(days=1)).date().isoformat()

    assert alpha("DELETE", f"/v1/jobs/{job['id']}").status == 204
    assert alpha("DELETE", "/v1/calendars/closed").status == 204


def test_a_business_day_job_round_trips_through_dynamodb(alpha: Call) -> None:
    assert (
        alpha("POST", "/v1/calendars", {"name": "fr", "source": {"holidays": {"country": "FR"}}}).status
        == 201
    )
    schedule = {"business_day": -1, "at": "17:00", "timezone": "Europe/Paris", "calendars": ["fr"]}
    job = alpha("POST", "/v1/jobs", {**JOB, "schedule": schedule}).body
    stored = alpha("GET", f"/v1/jobs/{job['id']}").body
    assert stored["schedule"] == schedule and stored["next_nominal_at"] == job["next_nominal_at"]
    preview = alpha("GET", f"/v1/jobs/{job['id']}/preview", query={"count": "3"}).body
    assert len(preview["runs"]) == 3
    unknown = alpha("POST", "/v1/jobs", {**JOB, "schedule": {**schedule, "calendars": ["nope"]}})
    assert unknown.status == 422 and unknown.body["error"]["field"] == "schedule.calendars.0"


def test_the_poller_reads_the_jobs_calendars_when_it_claims(alpha: Call, stack: Stack) -> None:
    soon = datetime.now(UTC) + timedelta(hours=1)
    day_after = (soon.date() + timedelta(days=1)).isoformat()
    assert alpha("POST", "/v1/calendars", {"name": "off", "source": {"dates": [day_after]}}).status == 201
    schedule = {"cron": f"{soon.minute} {soon.hour} * * *", "timezone": "UTC"}
    job = alpha("POST", "/v1/jobs", {**JOB, "schedule": schedule, "exclude": {"calendars": ["off"]}}).body
    due = datetime.fromisoformat(job["next_run_at"])
    assert due.date() == soon.date()

    poller = Poller(
        stack.store,
        stack.store,
        stack.queue,
        stack.alerts,
        ManualClock(due + timedelta(seconds=1)),
        PollerConfig(partitions=list(range(PARTITIONS))),
        calendars=DynamoCatalog(stack.dynamodb, stack.names),
    )
    assert poller.claim().runs_created == 1
    after = alpha("GET", f"/v1/jobs/{job['id']}").body["next_nominal_at"]
    assert after[:10] == (soon.date() + timedelta(days=2)).isoformat()  # the day after is excluded


def test_a_job_key_is_unique_and_if_match_guards_writes_on_dynamodb(alpha: Call) -> None:
    created = alpha("PUT", "/v1/jobs/by-key/billing/nightly", {**JOB, "name": "nightly"})
    assert created.status == 201 and created.headers["ETag"] == created.body["etag"]
    taken = alpha("POST", "/v1/jobs", {**JOB, "key": "billing/nightly"})
    assert taken.status == 409 and taken.body["error"]["field"] == "key"

    edited = alpha("PATCH", f"/v1/jobs/{created.body['id']}", {"name": "edited"})
    assert edited.status == 200
    stale = alpha(
        "PUT", "/v1/jobs/by-key/billing/nightly", {**JOB, "name": "v2"}, {"If-Match": created.body["etag"]}
    )
    assert stale.status == 412
    assert alpha("GET", "/v1/jobs/by-key/billing/nightly").body["name"] == "edited"
    fresh = alpha(
        "PUT", "/v1/jobs/by-key/billing/nightly", {**JOB, "name": "v2"}, {"If-Match": edited.body["etag"]}
    )
    assert fresh.status == 200 and fresh.body["name"] == "v2"
    assert (
        alpha("DELETE", "/v1/jobs/by-key/billing/nightly", headers={"If-Match": fresh.body["etag"]}).status
        == 204
    )
    assert alpha("POST", "/v1/jobs", {**JOB, "key": "billing/nightly"}).status == 201  # the key is free again


# 284 characters, a daily rule of 1,728 instants a day: 52 s to accept, 62 s a year read, before refused
HOSTILE_ICAL = (
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:x\r\nBEGIN:VEVENT\r\nUID:a\r\nSUMMARY:Tick\r\n"
    "DTSTART:20260101T000000Z\r\nRRULE:FREQ=DAILY;BYHOUR=0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,"
    "21,22,23;BYMINUTE=0,5,10,15,20,25,30,35,40,45,50,55;BYSECOND=0,10,20,30,40,50\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
)


def test_a_hostile_ical_is_refused_at_once_naming_source_ical_and_nothing_is_stored(
    alpha: Call, stack: Stack
) -> None:
    started = time.perf_counter()
    refused = alpha("POST", "/v1/calendars", {"name": "tick", "source": {"ical": HOSTILE_ICAL}})
    assert refused.status == 422 and refused.body["error"]["field"] == "source.ical"
    assert time.perf_counter() - started < 2.0
    assert alpha("GET", "/v1/calendars/tick").status == 404
    assert DynamoCatalog(stack.dynamodb, stack.names).last_version("alpha", "tick") == 0
