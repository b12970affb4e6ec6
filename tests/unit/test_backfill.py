"""Backfill: which nominal times a window covers, the 1,000 cap, the validation, and the pace at which the
runs become due (``JobService.backfill`` on a fake catalog and queue; the store's side is in
``tests/integration/test_backfill.py``)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from duetime.api.service import JobService, backfill_pace, backfill_plan
from duetime.domain.clock import ManualClock
from duetime.domain.errors import InvalidInput, NotFound, RateLimited
from duetime.domain.ids import make_run_id
from duetime.domain.models import MAX_BACKFILL_RUNS, Job, JobSpec, Run, RunStatus, Team
from duetime.domain.schedule import nominals_between, rate_anchor
from duetime.ports import RunMessage

NOW = datetime(2026, 12, 1, 12, 0, 0, 250_000, tzinfo=UTC)
CREATED = datetime(2026, 1, 1, tzinfo=UTC)
TEAM = Team(team_id="t", max_concurrency=50)
JOB_ID = "01JDZ3K6R2V9Q8T7S6P5N4M3K2"


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def job(schedule: dict[str, Any], team: str = "t", **spec: Any) -> Job:
    body = {"name": "j", "schedule": schedule, "target": {"url": "https://example.com/hook"}, **spec}
    return Job(
        **JobSpec.model_validate(body).model_dump(),
        id=JOB_ID,
        team=team,
        created_at=CREATED,
        updated_at=CREATED,
    )


def window(j: Job, start: str, end: str, limit: int = MAX_BACKFILL_RUNS) -> list[str]:
    times = nominals_between(j, rate_anchor(j, j.created_at), utc(start), utc(end), limit)
    return [t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in times]


class Catalog:
    """A job and the runs written so far; ``insert_runs`` writes the runs whose id is new."""

    def __init__(self, j: Job, existing: Sequence[str] = ()) -> None:
        self.job = j
        self.run_ids = set(existing)
        self.inserted: list[Run] = []

    def get_job(self, job_id: str) -> Job | None:
        return self.job if job_id == self.job.id else None

    def insert_runs(self, runs: Sequence[Run]) -> list[Run]:
        assert len({r.run_id for r in runs}) == len(runs)
        created = [r for r in runs if r.run_id not in self.run_ids]
        self.run_ids |= {r.run_id for r in created}
        self.inserted += created
        return created

    def insert_run(self, run: Run) -> bool:
        return bool(self.insert_runs([run]))


class Queue:
    def __init__(self) -> None:
        self.sent: dict[int, list[str]] = {}
        self._lock = threading.Lock()

    def send(self, messages: Sequence[RunMessage], delay_seconds: int = 0) -> None:
        with self._lock:
            self.sent.setdefault(delay_seconds, []).extend(m.run_id for m in messages)


def service(
    j: Job, existing: Sequence[str] = (), clock: ManualClock | None = None
) -> tuple[JobService, Catalog, Queue]:
    catalog, queue, unused = Catalog(j, existing), Queue(), None
    svc = JobService(catalog, unused, queue, clock or ManualClock(NOW))  # type: ignore[arg-type]
    return svc, catalog, queue


# --- the times a window covers ----------------------------------------------------------------------------


# America/New_York: 2026-03-08 02:00 EST -> 03:00 EDT; 2026-11-01 02:00 EDT -> 01:00 EST.
DST_WINDOWS = [
    (
        "30 2 * * *",
        ("2026-03-07T00:00:00Z", "2026-03-10T00:00:00Z"),
        ["2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"],
        "spring forward: 02:30 does not exist and runs once at 03:00 EDT",
    ),
    (
        "30 1 * * *",
        ("2026-10-31T00:00:00Z", "2026-11-03T00:00:00Z"),
        ["2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"],
        "fall back: 01:30 happens twice and runs once, at the first (EDT)",
    ),
    (
        "0 * * * *",
        ("2026-11-01T04:00:00Z", "2026-11-01T08:00:00Z"),
        ["2026-11-01T04:00:00Z", "2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z"],
        "fall back, hourly: every real hour, both 01:00s",
    ),
]


@pytest.mark.parametrize(("cron", "span", "expected", "why"), DST_WINDOWS)
def test_a_cron_window_across_a_dst_change_has_the_schedules_times(
    cron: str, span: tuple[str, str], expected: list[str], why: str
) -> None:
    j = job({"cron": cron, "timezone": "America/New_York"})
    assert window(j, *span) == expected, why


def test_the_window_takes_from_and_leaves_out_to() -> None:
    j = job({"cron": "0 * * * *", "timezone": "UTC"})
    assert window(j, "2026-06-01T10:00:00Z", "2026-06-01T12:00:00Z") == [
        "2026-06-01T10:00:00Z",
        "2026-06-01T11:00:00Z",
    ]
    # A from past the second leaves that second's time out; a to past it takes it in.
    assert window(j, "2026-06-01T10:00:00.5+00:00", "2026-06-01T12:00:00.5+00:00") == [
        "2026-06-01T11:00:00Z",
        "2026-06-01T12:00:00Z",
    ]
    assert window(j, "2026-06-01T10:00:01Z", "2026-06-01T11:00:00Z") == []


def test_a_rate_counts_from_its_anchor_and_stops_at_end_at() -> None:
    j = job({"rate": "15 minutes"}, start_at="2026-06-01T10:05:00Z", end_at="2026-06-01T10:40:00Z")
    # Nothing before start_at (the anchor), nothing after end_at.
    assert window(j, "2026-06-01T09:00:00Z", "2026-06-01T12:00:00Z") == [
        "2026-06-01T10:05:00Z",
        "2026-06-01T10:20:00Z",
        "2026-06-01T10:35:00Z",
    ]
    created = job({"rate": "1 hour"})  # anchored to its creation
    assert window(created, "2026-06-01T09:30:00Z", "2026-06-01T12:30:00Z") == [
        "2026-06-01T10:00:00Z",
        "2026-06-01T11:00:00Z",
        "2026-06-01T12:00:00Z",
    ]


def test_an_at_job_has_its_one_time_in_a_window_that_holds_it() -> None:
    j = job({"at": "2026-06-01T10:00:00Z"})
    assert window(j, "2026-06-01T00:00:00Z", "2026-06-02T00:00:00Z") == ["2026-06-01T10:00:00Z"]
    assert window(j, "2026-06-01T10:00:01Z", "2026-06-02T00:00:00Z") == []
    assert window(j, "2026-06-01T00:00:00Z", "2026-06-01T10:00:00Z") == []


# --- the service: cap, validation, pace ---------------------------------------------------------------------


EVERY_MINUTE = {"cron": "* * * * *", "timezone": "UTC"}


def minutes_back(count: int) -> dict[str, str]:
    """A window of ``count`` minutes ending a minute before NOW."""
    end = NOW.replace(second=0, microsecond=0) - timedelta(minutes=1)
    return {"from": (end - timedelta(minutes=count)).isoformat(), "to": end.isoformat()}


def test_a_window_of_1000_times_is_backfilled_and_1001_is_refused_naming_to() -> None:
    svc, catalog, queue = service(job(EVERY_MINUTE))
    with pytest.raises(InvalidInput) as refused:
        svc.backfill(TEAM, JOB_ID, minutes_back(MAX_BACKFILL_RUNS + 1))
    assert refused.value.field == "to" and "1,000" in refused.value.message
    assert catalog.inserted == [] and queue.sent == {}
    assert svc.backfill(TEAM, JOB_ID, minutes_back(MAX_BACKFILL_RUNS)) == MAX_BACKFILL_RUNS
    assert len(catalog.inserted) == MAX_BACKFILL_RUNS
    assert sum(len(ids) for ids in queue.sent.values()) == MAX_BACKFILL_RUNS
    assert max(queue.sent) == (MAX_BACKFILL_RUNS - 1) // 25 <= 900  # SQS's longest delay


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"from": "2026-12-01T10:00:00Z"}, "to"),
        ({"to": "2026-12-01T10:00:00Z"}, "from"),
        ({"from": "2026-12-01T10:00:00Z", "to": "2026-12-01T09:00:00Z"}, "to"),
        ({"from": "2026-12-01T10:00:00Z", "to": "2026-12-01T10:00:00Z"}, "to"),
        ({"from": "2026-12-01T10:00:00Z", "to": "2026-12-01T12:00:01Z"}, "to"),  # after NOW
        ({"from": "2026-12-01T10:00:00", "to": "2026-12-01T11:00:00Z"}, "from"),  # no offset
        ({"from": "2026-12-01T10:00:00Z", "to": "2026-12-01T11:00:00"}, "to"),
        ({"from": 1_796_119_200, "to": "2026-12-01T11:00:00Z"}, "from"),  # not ISO-8601
        ({"from": "yesterday", "to": "2026-12-01T11:00:00Z"}, "from"),
        ({"from": "1969-12-31T23:00:00Z", "to": "2026-12-01T11:00:00Z"}, "from"),
        ({"from": "0001-01-01T00:00:00+05:00", "to": "2026-12-01T11:00:00Z"}, "from"),  # before year 1 in UTC
        ({"from": "2026-12-01T10:00:00Z", "to": "9999-12-31T23:00:00-05:00"}, "to"),  # after year 9999
        ({"from": "2026-12-01T10:00:00Z", "to": "2026-12-01T11:00:00Z", "paused": True}, "paused"),
    ],
)
def test_bad_windows_are_refused_naming_the_field_and_write_nothing(body: dict[str, Any], field: str) -> None:
    svc, catalog, queue = service(job(EVERY_MINUTE))
    with pytest.raises(InvalidInput) as refused:
        svc.backfill(TEAM, JOB_ID, body)
    assert refused.value.field == field, refused.value.message
    assert catalog.inserted == [] and queue.sent == {}


def test_to_may_be_now_and_a_paused_job_may_be_backfilled() -> None:
    svc, catalog, _ = service(job(EVERY_MINUTE, paused=True))
    assert svc.backfill(TEAM, JOB_ID, {"from": "2026-12-01T11:58:00Z", "to": NOW.isoformat()}) == 3
    assert [r.nominal_at for r in catalog.inserted] == [
        utc("2026-12-01T11:58:00Z"),
        utc("2026-12-01T11:59:00Z"),
        utc("2026-12-01T12:00:00Z"),  # NOW is a quarter second past it
    ]


def test_another_teams_job_is_not_found() -> None:
    svc, catalog, queue = service(job(EVERY_MINUTE, team="other"))
    with pytest.raises(NotFound):
        svc.backfill(TEAM, JOB_ID, minutes_back(3))
    assert catalog.inserted == [] and queue.sent == {}


def test_runs_take_the_scheduled_ids_and_times_that_have_a_run_are_left_alone() -> None:
    j = job({"cron": "0 * * * *", "timezone": "UTC"})
    existing = make_run_id(JOB_ID, utc("2026-12-01T09:00:00Z"))
    svc, catalog, queue = service(j, [existing])
    body = {"from": "2026-12-01T08:00:00Z", "to": "2026-12-01T11:00:00Z"}
    assert svc.backfill(TEAM, JOB_ID, body) == 2
    expected = [make_run_id(JOB_ID, utc(t)) for t in ("2026-12-01T08:00:00Z", "2026-12-01T10:00:00Z")]
    assert [r.run_id for r in catalog.inserted] == expected
    assert all(r.status is RunStatus.QUEUED and r.attempt == 1 and r.team == "t" for r in catalog.inserted)
    assert queue.sent == {0: expected}  # only the runs created are sent
    assert svc.backfill(TEAM, JOB_ID, body) == 0  # the same request again
    assert queue.sent == {0: expected}


def test_the_pace_is_half_the_teams_concurrency_a_second_and_at_least_two() -> None:
    assert [backfill_pace(Team(team_id="t", max_concurrency=c)) for c in (1, 3, 4, 5, 50, 10_000)] == [
        2,
        2,
        2,
        2,
        25,
        5_000,
    ]
    svc, catalog, queue = service(job(EVERY_MINUTE))
    assert svc.backfill(TEAM, JOB_ID, minutes_back(60)) == 60  # max_concurrency 50: 25 a second
    runs = catalog.inserted
    assert [r.nominal_at for r in runs] == sorted(r.nominal_at for r in runs)  # in time order
    assert [(r.fire_at - NOW).total_seconds() for r in runs] == [0.0] * 25 + [1.0] * 25 + [2.0] * 10
    assert all(r.queue_deadline == r.fire_at + svc.queue_deadline for r in runs)
    assert {delay: len(ids) for delay, ids in queue.sent.items()} == {0: 25, 1: 25, 2: 10}
    assert queue.sent[1] == [r.run_id for r in runs[25:50]]


def test_a_plan_never_needs_a_delay_sqs_refuses() -> None:
    nominals = [NOW - timedelta(minutes=i) for i in range(MAX_BACKFILL_RUNS, 0, -1)]
    plan = backfill_plan(nominals, NOW, 2)
    assert (plan[-1].fire_at - NOW).total_seconds() == (MAX_BACKFILL_RUNS - 1) // 2 <= 900
    assert [p.nominal_at for p in plan] == nominals
    with pytest.raises(AssertionError):
        backfill_plan(nominals * 2, NOW, 2)  # 999 s: more than SQS's 900


# --- the CLI ------------------------------------------------------------------------------------------------


def test_the_cli_posts_the_window_to_the_backfill_route(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from duetime import cli
    from duetime.client import DuetimeClient

    sent: list[tuple[str, str, Any]] = []

    def request(self: DuetimeClient, method: str, path: str, body: Any = None, **_: Any) -> Any:
        sent.append((method, path, body))
        return {"runs": 3}

    monkeypatch.setattr(DuetimeClient, "request", request)
    start, end = "2026-12-01T08:00:00Z", "2026-12-01T11:00:00Z"
    assert cli.main(["jobs", "backfill", JOB_ID, "--from", start, "--to", end, "--token", "t", "--json"]) == 0
    assert sent == [("POST", f"/v1/jobs/{JOB_ID}/backfill", {"from": start, "to": end})]
    assert capsys.readouterr().out.strip() == '{"runs": 3}'
    with pytest.raises(SystemExit):  # --to is required
        cli.main(["jobs", "backfill", JOB_ID, "--from", start, "--token", "t"])
    assert len(sent) == 1


# --- runs_per_minute: how many runs triggers and backfills may create -------------------------------------


def test_a_backfill_past_the_teams_runs_per_minute_is_refused_whole() -> None:
    """The budget pays for a window's runs all at once, before any is written: 6 runs when 4 are left is a
    429 naming runs_per_minute (Retry-After: the rest of the minute), and not one run is created or sent."""
    team = Team(team_id="t", runs_per_minute=10)
    clock = ManualClock(NOW)
    svc, catalog, queue = service(job(EVERY_MINUTE), clock=clock)
    assert svc.backfill(team, JOB_ID, minutes_back(6)) == 6
    before = (list(catalog.inserted), dict(queue.sent))
    with pytest.raises(RateLimited) as refused:
        svc.backfill(team, JOB_ID, {"from": "2026-12-01T10:00:00Z", "to": "2026-12-01T10:06:00Z"})
    assert (refused.value.status, refused.value.code, refused.value.field) == (
        429,
        "rate_limited",
        "runs_per_minute",
    )
    assert "10 runs a minute" in refused.value.message and "4 are left" in refused.value.message
    assert refused.value.headers() == {"Retry-After": "60"}  # NOW is a quarter second into its minute
    assert (catalog.inserted, queue.sent) == before  # nothing half-created
    clock.set(utc("2026-12-01T12:01:00Z"))  # the next minute on the store's clock
    assert svc.backfill(team, JOB_ID, {"from": "2026-12-01T10:00:00Z", "to": "2026-12-01T10:06:00Z"}) == 6


def test_a_window_holding_more_than_runs_per_minute_is_refused_naming_to() -> None:
    """It could never be paid for: a 422 to split it, not a 429 to retry forever."""
    svc, catalog, queue = service(job(EVERY_MINUTE))
    with pytest.raises(InvalidInput) as refused:
        svc.backfill(Team(team_id="t", runs_per_minute=5), JOB_ID, minutes_back(6))
    assert refused.value.field == "to" and "runs_per_minute: 5" in refused.value.message
    assert catalog.inserted == [] and queue.sent == {}


def test_times_that_already_had_a_run_are_given_back_so_a_repeated_backfill_costs_nothing() -> None:
    """A repeated window asks for its runs (it needs room for them while it runs), finds them made, and
    gives them back: the budget is left as it was."""
    team = Team(team_id="t", runs_per_minute=6)
    svc, catalog, _ = service(job(EVERY_MINUTE))
    assert svc.backfill(team, JOB_ID, minutes_back(3)) == 3
    for _ in range(3):
        assert svc.backfill(team, JOB_ID, minutes_back(3)) == 0
    assert svc.backfill(team, JOB_ID, {"from": "2026-12-01T10:00:00Z", "to": "2026-12-01T10:03:00Z"}) == 3
    assert len(catalog.inserted) == 6


def test_triggers_and_backfills_share_the_teams_runs_per_minute() -> None:
    team = Team(team_id="t", runs_per_minute=3)
    clock = ManualClock(NOW)
    svc, catalog, queue = service(job(EVERY_MINUTE), clock=clock)
    assert svc.backfill(team, JOB_ID, minutes_back(2)) == 2
    clock.advance(1)  # a trigger's run id is unique per second
    svc.trigger(team, JOB_ID)
    clock.advance(1)
    with pytest.raises(RateLimited) as refused:
        svc.trigger(team, JOB_ID)
    assert refused.value.field == "runs_per_minute" and refused.value.headers() == {"Retry-After": "58"}
    assert len(catalog.inserted) == 3 and sum(len(ids) for ids in queue.sent.values()) == 3
