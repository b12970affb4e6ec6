"""A job's DST policy through the API (the api function on the in-memory twin) and the CLI: created with
``dst``, shown by GET, changed and removed by PATCH (which reschedules), refused with 422 naming the field,
and marked in the job's preview."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from duetime.cli.jobs import add_create_flags, add_schedule_flags, run_preview, spec_from_args

from ..api_twin import serving_twin
from ..lambda_support import api_request

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
JOB: dict[str, Any] = {
    "name": "nightly export",
    "schedule": {"cron": "30 2 * * *", "timezone": "America/New_York"},
    "target": {"url": "https://example.com/hook"},
    "exact": True,
}


@pytest.fixture
def token() -> Iterator[str]:
    with serving_twin(NOW) as twin:
        yield twin.token


def call(token: str, method: str, path: str, body: Any = None, query: dict[str, str] | None = None) -> Any:
    response = api_request(method, path, token, None if body is None else json.dumps(body), query)
    return response["statusCode"], json.loads(response["body"]) if response["body"] else None


def test_a_jobs_dst_policy_is_created_shown_changed_and_removed(token: str) -> None:
    status, job = call(token, "POST", "/v1/jobs", {**JOB, "dst": {"gap": "skip"}})
    assert status == 201 and job["dst"] == {"gap": "skip", "overlap": None}
    assert job["next_nominal_at"] == "2026-03-02T07:30:00Z"
    path = f"/v1/jobs/{job['id']}"
    assert call(token, "GET", path)[1]["dst"] == {"gap": "skip", "overlap": None}

    status, changed = call(token, "PATCH", path, {"dst": {"gap": "shift", "overlap": "both"}})
    assert status == 200 and changed["dst"] == {"gap": "shift", "overlap": "both"}
    assert call(token, "GET", path)[1]["dst"] == {"gap": "shift", "overlap": "both"}

    status, removed = call(token, "PATCH", path, {"dst": None})
    assert status == 200 and removed["dst"] is None and call(token, "GET", path)[1]["dst"] is None


def test_a_dst_change_reschedules_the_job(token: str) -> None:
    _, job = call(
        token, "POST", "/v1/jobs", {**JOB, "schedule": {"cron": "30 2 8 3 *", "timezone": "America/New_York"}}
    )
    assert job["next_nominal_at"] == "2026-03-08T07:00:00Z"  # 02:30 does not exist that day: 03:00 EDT
    _, skipping = call(token, "PATCH", f"/v1/jobs/{job['id']}", {"dst": {"gap": "skip"}})
    assert skipping["next_nominal_at"] == "2027-03-08T07:30:00Z"  # a year on, when 02:30 exists (EST)


@pytest.mark.parametrize(
    ("dst", "field"),
    [
        ({"gap": "later"}, "dst.gap"),
        ({"overlap": "twice"}, "dst.overlap"),
        ({"gap": "skip", "fold": "first"}, "dst.fold"),
        ("skip", "dst"),
    ],
)
def test_a_bad_dst_policy_is_a_422_naming_the_field(token: str, dst: Any, field: str) -> None:
    status, body = call(token, "POST", "/v1/jobs", {**JOB, "dst": dst})
    assert status == 422 and body["error"]["field"] == field, body


@pytest.mark.parametrize("schedule", [{"rate": "5 minutes"}, {"at": "2026-12-01T10:00:00Z"}])
def test_a_dst_policy_on_a_rate_or_at_is_a_422_naming_dst(token: str, schedule: dict[str, str]) -> None:
    status, body = call(token, "POST", "/v1/jobs", {**JOB, "schedule": schedule, "dst": {"gap": "skip"}})
    assert status == 422 and body["error"]["field"] == "dst", body
    assert "instant, not a wall time" in body["error"]["message"]


def test_patching_a_cron_with_a_policy_into_a_rate_needs_the_policy_removed(token: str) -> None:
    _, job = call(token, "POST", "/v1/jobs", {**JOB, "dst": {"overlap": "both"}})
    path = f"/v1/jobs/{job['id']}"
    status, body = call(token, "PATCH", path, {"schedule": {"rate": "1 hour"}})
    assert status == 422 and body["error"]["field"] == "dst"
    assert call(token, "PATCH", path, {"schedule": {"rate": "1 hour"}, "dst": None})[0] == 200


def test_the_preview_marks_a_moved_run_and_lists_skipped_wall_times_apart(token: str) -> None:
    _, shifted = call(token, "POST", "/v1/jobs", JOB)
    runs = call(token, "GET", f"/v1/jobs/{shifted['id']}/preview", query={"count": "9"})[1]["runs"]
    moved = [(r["nominal_at"], r["dst_shifted"], r["dst_effect"]) for r in runs if r["dst_effect"]]
    assert moved == [("2026-03-08T07:00:00Z", True, "moved")]

    _, skipping = call(token, "POST", "/v1/jobs", {**JOB, "dst": {"gap": "skip"}})
    _, preview = call(token, "GET", f"/v1/jobs/{skipping['id']}/preview", query={"count": "9"})
    times = [r["nominal_at"] for r in preview["runs"]]  # daily from 2 March
    assert times[5:7] == ["2026-03-07T07:30:00Z", "2026-03-09T06:30:00Z"]
    assert preview["skipped"] == [{"wall_time": "2026-03-08T02:30:00"}]
    assert not any(r["dst_effect"] for r in preview["runs"])


# --- the CLI's flags ---------------------------------------------------------------------------------------


def parsed(*argv: str, create: bool = True) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    if create:
        add_create_flags(parser)
    else:
        add_schedule_flags(parser)
        parser.add_argument("--after")
        parser.add_argument("--count", type=int, default=5)
        parser.add_argument("--json", action="store_true")
    return parser.parse_args(list(argv))


def test_jobs_create_sends_the_dst_flags_as_the_jobs_policy() -> None:
    base = ("--name", "n", "--cron", "30 2 * * *", "--target", "https://example.com")
    assert spec_from_args(parsed(*base, "--dst-gap", "skip"))["dst"] == {"gap": "skip"}
    both = spec_from_args(parsed(*base, "--dst-gap", "shift", "--dst-overlap", "last"))
    assert both["dst"] == {"gap": "shift", "overlap": "last"}
    assert "dst" not in spec_from_args(parsed(*base))
    with pytest.raises(SystemExit):
        parsed(*base, "--dst-overlap", "second")


def test_duetime_preview_shows_each_policys_marks_and_skipped_times(
    capsys: pytest.CaptureFixture[str],
) -> None:
    spring = (
        "--cron",
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2026-03-07T00:00:00Z",
        "--count",
        "3",
    )
    run_preview(parsed(*spring, create=False))
    assert capsys.readouterr().out.splitlines() == [
        "2026-03-07T02:30:00-05:00",
        "2026-03-08T03:00:00-04:00  moved",
        "2026-03-09T02:30:00-04:00",
    ]
    run_preview(parsed(*spring, "--dst-gap", "skip", create=False))
    assert capsys.readouterr().out.splitlines() == [
        "2026-03-07T02:30:00-05:00",
        "2026-03-08T02:30:00  skipped",
        "2026-03-09T02:30:00-04:00",
        "2026-03-10T02:30:00-04:00",
    ]
    fall = (
        "--cron",
        "30 1 * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2026-11-01T00:00:00Z",
        "--count",
        "2",
    )
    run_preview(parsed(*fall, "--dst-overlap", "both", "--json", create=False))
    shown = json.loads(capsys.readouterr().out)
    assert shown["runs"] == [
        {"at": "2026-11-01T01:30:00-04:00", "dst_effect": "doubled"},
        {"at": "2026-11-01T01:30:00-05:00", "dst_effect": "doubled"},
    ]
    assert shown["times"] == [run["at"] for run in shown["runs"]] and shown["skipped"] == []
