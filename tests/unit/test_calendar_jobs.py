"""Jobs that use a team's calendars, through the API on the in-memory twin: an exclusion or a business-day
schedule names calendars the team has (else 422 naming the field), the preview shows what the calendars did,
a calendar a job uses cannot be deleted (409 naming the job), a calendar change re-plans the jobs that use it
(their unclaimed next time, never a claimed run), and the poller claims with the dates the calendars hold when
it claims."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from duetime.adapters.memory import InMemoryCatalog, MemoryQueue, MemoryStore
from duetime.domain.calendars import days_to_store
from duetime.domain.clock import ManualClock
from duetime.domain.ids import partition_of
from duetime.domain.models import RunStatus
from duetime.scheduling.calendar_days import CalendarDays
from duetime.scheduling.poller import Poller, PollerConfig
from duetime.scheduling.preload import MinutePreload

from ..api_twin import serving_twin
from ..lambda_support import api_request

# Thursday 2026-12-17 12:00 UTC; Paris is UTC+1 in December.
NOW = datetime(2026, 12, 17, 12, 0, tzinfo=UTC)
TARGET = {"url": "https://example.com/hook"}
DAILY_9_PARIS = {"cron": "0 9 * * *", "timezone": "Europe/Paris"}


@dataclass
class Stack:
    token: str
    clock: ManualClock
    store: MemoryStore
    catalog: InMemoryCatalog
    queue: MemoryQueue

    def call(self, method: str, path: str, body: Any = None, query: dict[str, str] | None = None) -> Any:
        response = api_request(method, path, self.token, None if body is None else json.dumps(body), query)
        return response["statusCode"], json.loads(response["body"]) if response["body"] else None

    def poller(self) -> Poller:
        config = PollerConfig(partitions=list(range(64)))
        alerts = _NoAlerts()
        return Poller(self.store, self.store, self.queue, alerts, self.clock, config, calendars=self.catalog)


class _NoAlerts:
    def alert(self, *args: Any, **kwargs: Any) -> None:
        pass


@pytest.fixture
def stack() -> Iterator[Stack]:
    with serving_twin(NOW) as twin:
        yield Stack(twin.token, twin.clock, twin.store, twin.catalog, twin.queue)


def a_calendar(stack: Stack, name: str, dates: list[str]) -> dict[str, Any]:
    status, calendar = stack.call("POST", "/v1/calendars", {"name": name, "source": {"dates": dates}})
    assert status == 201, calendar
    return dict(calendar)


def a_job(stack: Stack, **fields: Any) -> dict[str, Any]:
    body = {"name": "report", "schedule": DAILY_9_PARIS, "target": TARGET, "exact": True, **fields}
    status, job = stack.call("POST", "/v1/jobs", body)
    assert status == 201, job
    return dict(job)


def test_a_job_naming_a_calendar_the_team_lacks_is_refused_naming_the_field(stack: Stack) -> None:
    a_calendar(stack, "closed", ["2026-12-18"])
    body = {"name": "r", "schedule": DAILY_9_PARIS, "target": TARGET}
    status, error = stack.call("POST", "/v1/jobs", {**body, "exclude": {"calendars": ["closed", "nope"]}})
    assert status == 422 and error["error"]["field"] == "exclude.calendars.1"
    assert "nope" in error["error"]["message"]

    business = {"business_day": 1, "at": "09:00", "calendars": ["nope"]}
    status, error = stack.call("POST", "/v1/jobs", {**body, "schedule": business})
    assert status == 422 and error["error"]["field"] == "schedule.calendars.0"
    assert stack.call("GET", "/v1/jobs")[1]["jobs"] == []  # nothing half-written


def test_an_excluded_date_is_skipped_and_the_preview_says_which_holiday(stack: Stack) -> None:
    a_calendar(stack, "closed", ["2026-12-18"])
    job = a_job(stack, exclude={"calendars": ["closed"]})
    assert job["exclude"] == {"calendars": ["closed"], "on_excluded": "skip", "rolled": "once"}
    assert job["next_nominal_at"] == "2026-12-19T08:00:00Z"  # Friday the 18th is excluded

    status, preview = stack.call("GET", f"/v1/jobs/{job['id']}/preview", query={"count": "3"})
    assert status == 200
    assert [run["nominal_at"] for run in preview["runs"]] == [
        "2026-12-19T08:00:00Z",
        "2026-12-20T08:00:00Z",
        "2026-12-21T08:00:00Z",
    ]
    assert preview["excluded"] == []  # the 18th lies before the first run listed


def test_a_holiday_rolled_to_the_next_business_day_is_marked_in_the_preview(stack: Stack) -> None:
    status, _ = stack.call(
        "POST", "/v1/calendars", {"name": "fr-public", "source": {"holidays": {"country": "FR"}}}
    )
    assert status == 201
    job = a_job(
        stack,
        schedule={"cron": "0 9 * * 5", "timezone": "Europe/Paris"},  # Fridays
        exclude={"calendars": ["fr-public"], "on_excluded": "next_business_day"},
    )
    status, preview = stack.call("GET", f"/v1/jobs/{job['id']}/preview", query={"count": "3"})
    assert status == 200
    runs = [(run["nominal_at"], run["rolled_from"]) for run in preview["runs"]]
    # Friday 25 December and Friday 1 January are public holidays in France: Monday 28th and Monday 4th.
    assert runs == [
        ("2026-12-18T08:00:00Z", []),
        ("2026-12-28T08:00:00Z", ["2026-12-25"]),
        ("2027-01-04T08:00:00Z", ["2027-01-01"]),
    ]
    christmas = preview["excluded"][0]
    assert christmas["date"] == "2026-12-25" and christmas["calendars"] == ["fr-public"]
    assert christmas["holiday"] == "Noël" or "Christmas" in christmas["holiday"]
    assert christmas["rolled_to"] == "2026-12-28T08:00:00Z"


def test_a_business_day_job_runs_on_the_nth_business_day_of_its_calendar(stack: Stack) -> None:
    a_calendar(stack, "closed", ["2027-01-01", "2027-01-04"])
    schedule = {"business_day": 2, "at": "18:30", "timezone": "Europe/Paris", "calendars": ["closed"]}
    job = a_job(stack, schedule=schedule)
    assert job["schedule"] == schedule
    # December's 2nd business day (Wednesday the 2nd) has passed. January 2027: Friday 1st and Monday 4th
    # are excluded, so Tuesday 5th is the 1st, Wednesday 6th the 2nd; February: Monday 1st, Tuesday 2nd.
    assert job["next_nominal_at"] == "2027-01-06T17:30:00Z"
    status, preview = stack.call("GET", f"/v1/jobs/{job['id']}/preview", query={"count": "2"})
    assert status == 200
    assert [run["nominal_at"] for run in preview["runs"]] == ["2027-01-06T17:30:00Z", "2027-02-02T17:30:00Z"]


def test_a_calendar_a_job_uses_cannot_be_deleted_and_the_409_names_the_job(stack: Stack) -> None:
    a_calendar(stack, "closed", ["2026-12-18"])
    job = a_job(stack, exclude={"calendars": ["closed"]})
    status, error = stack.call("DELETE", "/v1/calendars/closed")
    assert status == 409 and job["id"] in error["error"]["message"]
    assert stack.call("GET", "/v1/calendars/closed")[1]["used_by"] == [job["id"]]

    status, _ = stack.call("PATCH", f"/v1/jobs/{job['id']}", {"exclude": None})
    assert status == 200
    assert stack.call("GET", "/v1/calendars/closed")[1]["used_by"] == []
    assert stack.call("DELETE", "/v1/calendars/closed")[0] == 204


def test_a_calendar_change_re_plans_the_next_time_of_the_jobs_that_use_it(stack: Stack) -> None:
    calendar = a_calendar(stack, "closed", ["2026-12-25"])
    job = a_job(stack, exclude={"calendars": ["closed"]})
    assert job["next_nominal_at"] == "2026-12-18T08:00:00Z"

    body = {"source": {"dates": ["2026-12-18", "2026-12-25"]}, "version": calendar["version"]}
    assert stack.call("PUT", "/v1/calendars/closed", body)[0] == 200
    assert stack.call("GET", f"/v1/jobs/{job['id']}")[1]["next_nominal_at"] == "2026-12-19T08:00:00Z"

    assert stack.call("PUT", "/v1/calendars/closed", {"source": {"dates": ["2026-12-25"]}})[0] == 200
    assert stack.call("GET", f"/v1/jobs/{job['id']}")[1]["next_nominal_at"] == "2026-12-18T08:00:00Z"


def test_a_calendar_change_never_touches_a_claimed_run(stack: Stack) -> None:
    calendar = a_calendar(stack, "closed", ["2026-12-25"])
    job = a_job(stack, exclude={"calendars": ["closed"]})
    stack.clock.set(datetime(2026, 12, 18, 8, 0, 1, tzinfo=UTC))
    report = stack.poller().claim()
    assert report.runs_created == 1

    body = {"source": {"dates": ["2026-12-18", "2026-12-19", "2026-12-25"]}, "version": calendar["version"]}
    assert stack.call("PUT", "/v1/calendars/closed", body)[0] == 200
    status, runs = stack.call("GET", f"/v1/jobs/{job['id']}/runs")
    assert status == 200
    assert [(run["scheduled_at"], run["status"]) for run in runs["runs"]] == [
        ("2026-12-18T08:00:00Z", RunStatus.QUEUED.value)
    ]
    assert stack.call("GET", f"/v1/jobs/{job['id']}")[1]["next_nominal_at"] == "2026-12-20T08:00:00Z"


def test_the_poller_claims_with_the_dates_the_calendar_holds_when_it_claims(stack: Stack) -> None:
    a_calendar(stack, "closed", ["2030-01-01"])
    job = a_job(stack, exclude={"calendars": ["closed"]})
    assert job["next_nominal_at"] == "2026-12-18T08:00:00Z"
    # The calendar gains the 19th behind the API's back (as a re-plan lost to a crash would leave it): the
    # claim of the 18th computes the next time with the dates as they are now.
    stored = stack.catalog.get_calendar("alpha", "closed")
    assert stored is not None
    source = stored.source.model_copy(update={"dates": (datetime(2026, 12, 19).date(),)})
    after = stored.model_copy(
        update={"source": source, "version": stored.version + 1, "stored_days": days_to_store(source, NOW)}
    )
    assert stack.catalog.replace_calendar(stored, after, _change(after))

    stack.clock.set(datetime(2026, 12, 18, 8, 0, 1, tzinfo=UTC))
    assert stack.poller().claim().runs_created == 1
    assert stack.call("GET", f"/v1/jobs/{job['id']}")[1]["next_nominal_at"] == "2026-12-20T08:00:00Z"


def test_a_due_time_the_calendar_excludes_since_it_was_planned_gets_no_run(stack: Stack) -> None:
    """Between a calendar change and the re-plan of its jobs (or when a re-plan was cut short), a claim reads
    the calendar as it is: the stored time, now excluded, is recorded as skipped and the job moves on."""
    a_calendar(stack, "closed", ["2030-01-01"])
    job = a_job(stack, exclude={"calendars": ["closed"]})
    stored = stack.catalog.get_calendar("alpha", "closed")
    assert stored is not None
    source = stored.source.model_copy(update={"dates": (datetime(2026, 12, 18).date(),)})
    after = stored.model_copy(
        update={"source": source, "version": stored.version + 1, "stored_days": days_to_store(source, NOW)}
    )
    assert stack.catalog.replace_calendar(stored, after, _change(after))  # no re-plan: behind the API

    stack.clock.set(datetime(2026, 12, 18, 8, 0, 1, tzinfo=UTC))
    report = stack.poller().claim()
    assert (report.runs_created, report.runs_skipped) == (0, 1)
    runs = stack.call("GET", f"/v1/jobs/{job['id']}/runs")[1]["runs"]
    assert [(run["scheduled_at"], run["status"]) for run in runs] == [("2026-12-18T08:00:00Z", "skipped")]
    assert "excluded" in runs[0]["result"]["error"]
    assert stack.call("GET", f"/v1/jobs/{job['id']}")[1]["next_nominal_at"] == "2026-12-19T08:00:00Z"


def test_jobs_without_calendars_never_read_one(stack: Stack) -> None:
    job = a_job(stack)
    reads: list[tuple[str, str]] = []
    original = stack.catalog.get_calendar

    def counting(team_id: str, name: str) -> Any:
        reads.append((team_id, name))
        return original(team_id, name)

    stack.catalog.get_calendar = counting  # type: ignore[method-assign]
    stack.clock.set(datetime.fromisoformat(job["next_run_at"]) + timedelta(seconds=1))
    assert stack.poller().claim().runs_created == 1
    assert reads == []


def _change(calendar: Any) -> Any:
    from duetime.domain.calendars import calendar_change

    return calendar_change(None, calendar, NOW, "test")


def test_a_calendar_change_reaches_a_run_the_preload_already_holds(stack: Stack) -> None:
    """The coming minute's rows are read ahead (``MinutePreload``); a calendar change re-plans the job after
    that read: the held row's claim is a lost race (the job moved on), so no run is made for the excluded
    date, and the job's new time is claimed when it comes."""
    calendar = a_calendar(stack, "closed", ["2030-01-01"])
    job = a_job(stack, exclude={"calendars": ["closed"]})
    due = datetime.fromisoformat(job["next_run_at"])
    assert due == datetime(2026, 12, 18, 8, 0, tzinfo=UTC)
    preload = MinutePreload(
        stack.store,
        stack.queue,
        [partition_of(job["id"])],
        timedelta(seconds=10),
        calendars=CalendarDays(stack.catalog),
    )
    stack.clock.set(due - timedelta(seconds=8))
    assert preload.load_upcoming(stack.clock.now()) == 1

    body = {"source": {"dates": ["2026-12-18"]}, "version": calendar["version"]}
    assert stack.call("PUT", "/v1/calendars/closed", body)[0] == 200
    report = preload.fire(due + timedelta(seconds=0.5))
    assert (report.runs_created, report.lost_races) == (0, 1)
    assert stack.call("GET", f"/v1/jobs/{job['id']}/runs")[1]["runs"] == []

    stack.clock.set(datetime(2026, 12, 19, 8, 0, 1, tzinfo=UTC))
    assert stack.poller().claim().runs_created == 1
    runs = stack.call("GET", f"/v1/jobs/{job['id']}/runs")[1]["runs"]
    assert [run["scheduled_at"] for run in runs] == ["2026-12-19T08:00:00Z"]


def test_a_cron_whose_every_time_its_calendars_exclude_is_refused_naming_exclude(stack: Stack) -> None:
    status, _ = stack.call("POST", "/v1/calendars", {"name": "fr", "source": {"holidays": {"country": "FR"}}})
    assert status == 201
    christmas = {"cron": "0 9 25 12 *", "timezone": "Europe/Paris"}
    body = {"name": "xmas", "schedule": christmas, "target": TARGET, "exclude": {"calendars": ["fr"]}}
    status, error = stack.call("POST", "/v1/jobs", body)
    assert status == 422 and error["error"]["field"] == "exclude" and "ten years" in error["error"]["message"]
    rolled = {**body, "exclude": {"calendars": ["fr"], "on_excluded": "next_business_day"}}
    assert stack.call("POST", "/v1/jobs", rolled)[0] == 201  # rolled to the next business day: it runs


def test_a_preview_of_rolled_each_shows_the_second_each_date_was_spread_to(stack: Stack) -> None:
    """Daily at 09:00 Paris, Thursday 24 and Friday 25 excluded, rolled to the next business day, each: the
    24th and the 25th both roll onto Monday 28 (09:00), which has its own run; they run 1 and 2 s after it."""
    a_calendar(stack, "closed", ["2026-12-24", "2026-12-25"])
    rule = {"calendars": ["closed"], "on_excluded": "next_business_day", "rolled": "each"}
    job = a_job(stack, exclude=rule)
    status, preview = stack.call("GET", f"/v1/jobs/{job['id']}/preview", query={"count": "11"})
    assert status == 200
    monday = [
        (run["nominal_at"], run["rolled_from"]) for run in preview["runs"] if "12-28" in run["nominal_at"]
    ]
    assert monday == [
        ("2026-12-28T08:00:00Z", []),
        ("2026-12-28T08:00:01Z", ["2026-12-24"]),
        ("2026-12-28T08:00:02Z", ["2026-12-25"]),
    ]
    spread = {time["date"]: (time["rolled_to"], time["runs_at"]) for time in preview["excluded"]}
    assert spread == {
        "2026-12-24": ("2026-12-28T08:00:01Z", ["2026-12-28T08:00:01Z"]),
        "2026-12-25": ("2026-12-28T08:00:02Z", ["2026-12-28T08:00:02Z"]),
    }


OFFICE_ICAL = (
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\nBEGIN:VEVENT\r\nUID:1@test\r\n"
    "DTSTART;VALUE=DATE:20261218\r\nRRULE:FREQ=YEARLY\r\nSUMMARY:Office party\r\n"
    "END:VEVENT\r\nEND:VCALENDAR\r\n"
)


def test_once_written_an_ical_calendar_is_read_by_the_api_previews_and_claims_without_expanding_it(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its days are stored when it is written: after that, nothing reads it by expanding the iCalendar (the
    expander and the library under it raise if called), for a GET of a year, a preview or a poller's claim."""
    status, _ = stack.call("POST", "/v1/calendars", {"name": "office", "source": {"ical": OFFICE_ICAL}})
    assert status == 201
    job = a_job(stack, exclude={"calendars": ["office"], "on_excluded": "next_business_day"})
    assert job["next_nominal_at"] == "2026-12-19T08:00:00Z"  # Friday the 18th rolls to Monday the 21st

    expansions: list[Any] = []

    def expanding(*args: Any, **kwargs: Any) -> Any:
        expansions.append(args)
        raise AssertionError("a read expanded an iCalendar")

    import recurring_ical_events

    from duetime.domain import calendars, ical_days

    monkeypatch.setattr(recurring_ical_events, "of", expanding)
    monkeypatch.setattr(ical_days, "expanded_days", expanding)
    monkeypatch.setattr(calendars, "expanded_days", expanding)

    status, shown = stack.call("GET", "/v1/calendars/office", query={"year": "2031"})
    assert status == 200 and shown["days"] == [{"date": "2031-12-18", "name": "Office party"}]
    status, preview = stack.call("GET", f"/v1/jobs/{job['id']}/preview", query={"count": "3"})
    assert status == 200 and preview["runs"][2]["rolled_from"] == ["2026-12-18"]
    assert preview["excluded"][0]["holiday"] == "Office party"
    stack.clock.set(datetime(2026, 12, 19, 8, 0, 1, tzinfo=UTC))
    assert stack.poller().claim().runs_created == 1
    assert stack.call("GET", f"/v1/jobs/{job['id']}")[1]["next_nominal_at"] == "2026-12-20T08:00:00Z"
    assert expansions == []


def test_writing_a_calendar_again_a_year_later_moves_the_years_it_stores(stack: Stack) -> None:
    status, _ = stack.call("POST", "/v1/calendars", {"name": "office", "source": {"ical": OFFICE_ICAL}})
    assert status == 201
    first = stack.catalog.get_calendar("alpha", "office")
    assert first is not None and first.stored_days is not None
    assert (first.stored_days.first_year, first.stored_days.last_year) == (2025, 2037)
    stack.clock.set(datetime(2028, 1, 3, tzinfo=UTC))
    assert stack.call("PUT", "/v1/calendars/office", {"source": {"ical": OFFICE_ICAL}})[0] == 200
    again = stack.catalog.get_calendar("alpha", "office")
    assert again is not None and again.stored_days is not None
    assert (again.stored_days.first_year, again.stored_days.last_year) == (2027, 2039)


def test_a_refused_ical_writes_nothing(stack: Stack) -> None:
    hostile = OFFICE_ICAL.replace("FREQ=YEARLY", "FREQ=DAILY;BYHOUR=1,2;BYMINUTE=0,1,2;BYSECOND=0,1,2")
    status, error = stack.call("POST", "/v1/calendars", {"name": "office", "source": {"ical": hostile}})
    assert status == 422 and error["error"]["field"] == "source.ical"
    assert stack.call("GET", "/v1/calendars/office")[0] == 404
    assert stack.call("POST", "/v1/calendars", {"name": "office", "source": {"ical": OFFICE_ICAL}})[0] == 201
    daily = OFFICE_ICAL.replace("FREQ=YEARLY", "FREQ=DAILY")  # 365 days a year: past the days a year
    status, error = stack.call("PUT", "/v1/calendars/office", {"source": {"ical": daily}})
    assert (
        status == 422
        and error["error"]["field"] == "source.ical"
        and "at most 200 days" in error["error"]["message"]
    )
    _, shown = stack.call("GET", "/v1/calendars/office")
    assert shown["version"] == 1 and shown["source"]["ical"] == OFFICE_ICAL
    assert [c["action"] for c in stack.call("GET", "/v1/calendars/office/history")[1]["changes"]] == [
        "create"
    ]
