"""The CLI's calendar flags: ``duetime jobs create`` builds business-day schedules and a cron's exclusion
from flags and refuses flags of another kind; ``duetime preview`` reads calendars given by their sources
(``--holidays``, ``--dates``) and shows each excluded time and what became of it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from duetime.cli import UsageError, main, parser, spec_from_args

BASE = ("jobs", "create", "--name", "n", "--target", "https://example.com/hook")


def create_spec(*flags: str) -> dict[str, Any]:
    return spec_from_args(parser().parse_args([*BASE, *flags]))


def test_jobs_create_builds_a_business_day_schedule_from_business_day_and_time() -> None:
    spec = create_spec(
        "--business-day",
        "-1",
        "--time",
        "17:00",
        "--tz",
        "Europe/Paris",
        "--calendar",
        "fr",
        "--calendar",
        "x",
    )
    assert spec["schedule"] == {
        "business_day": -1,
        "at": "17:00",
        "timezone": "Europe/Paris",
        "calendars": ["fr", "x"],
    }
    assert "exclude" not in spec


def test_jobs_create_builds_a_crons_exclusion_from_its_flags() -> None:
    spec = create_spec(
        "--cron",
        "0 9 * * 1-5",
        "--exclude-calendar",
        "fr",
        "--exclude-calendar",
        "office",
        "--on-excluded",
        "next_business_day",
        "--rolled",
        "each",
    )
    assert spec["exclude"] == {
        "calendars": ["fr", "office"],
        "on_excluded": "next_business_day",
        "rolled": "each",
    }
    assert create_spec("--cron", "0 9 * * *", "--exclude-calendar", "fr")["exclude"] == {"calendars": ["fr"]}


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--business-day", "3"), "--business-day needs --time"),
        (("--cron", "0 9 * * *", "--time", "09:00"), "--time goes with --business-day"),
        (("--cron", "0 9 * * *", "--calendar", "fr"), "--calendar names a --business-day"),
        (("--cron", "0 9 * * *", "--on-excluded", "skip"), "exclude some first"),
        (("--cron", "0 9 * * *", "--rolled", "each"), "exclude some first"),
        (("--cron", "0 9 * * *", "--business-day", "1", "--time", "09:00"), "exactly one of"),
    ],
)
def test_jobs_create_refuses_flags_of_another_schedule_kind(flags: tuple[str, ...], says: str) -> None:
    with pytest.raises(UsageError, match=says):
        create_spec(*flags)


def test_jobs_create_help_says_time_is_the_business_days_and_at_a_one_time_jobs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["jobs", "create", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--business-day N" in text and "--time HH:MM" in text
    assert "with --business-day: the local time of day (--at is a one-time job's instant, not this)" in text


def preview(capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, str, str]:
    code = main(["preview", *flags])
    out, err = capsys.readouterr()
    return code, out, err


def test_preview_shows_each_excluded_time_and_where_it_rolled(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = preview(
        capsys,
        *("--cron", "0 9 * * 1-5", "--tz", "Europe/Paris", "--holidays", "FR", "--dates", "2026-12-24"),
        *("--on-excluded", "next_business_day", "--rolled", "each"),
        *("--after", "2026-12-22T00:00Z", "--count", "5"),
    )
    assert code == 0
    assert out.splitlines() == [
        "2026-12-22T09:00:00+01:00",
        "2026-12-23T09:00:00+01:00",
        "2026-12-24T09:00:00+01:00  excluded: rolled to 2026-12-28T09:00:01+01:00",
        "2026-12-25T09:00:00+01:00  excluded: rolled to 2026-12-28T09:00:02+01:00",
        "2026-12-28T09:00:00+01:00",
        "2026-12-28T09:00:01+01:00",
        "2026-12-28T09:00:02+01:00",
    ]


def test_preview_of_a_skip_lists_the_skipped_times_in_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = preview(
        capsys,
        "--cron",
        "0 9 * * *",
        "--holidays",
        "DE-BY",
        "--after",
        "2026-12-23T00:00Z",
        "--count",
        "3",
        "--json",
    )
    assert code == 0
    shown = json.loads(out)
    assert shown["times"] == [
        "2026-12-23T09:00:00+00:00",
        "2026-12-24T09:00:00+00:00",
        "2026-12-27T09:00:00+00:00",
    ]
    assert shown["excluded"] == [
        {"at": "2026-12-25T09:00:00+00:00", "runs_at": []},
        {"at": "2026-12-26T09:00:00+00:00", "runs_at": []},
    ]


def test_preview_of_a_rolled_once_shows_the_run_it_shares(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = preview(
        capsys,
        *("--cron", "0 9 * * MON", "--tz", "Europe/Paris", "--holidays", "FR"),
        *("--on-excluded", "previous_business_day", "--after", "2026-04-01T00:00Z", "--count", "2"),
    )
    assert code == 0
    assert out.splitlines() == [
        "2026-04-03T09:00:00+02:00",
        "2026-04-06T09:00:00+02:00  excluded: rolled to 2026-04-03T09:00:00+02:00",
        "2026-04-13T09:00:00+02:00",
    ]


def test_preview_of_a_business_day_schedule_reads_its_calendars_from_the_sources(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = preview(
        capsys,
        *("--business-day", "1", "--time", "08:00", "--tz", "Europe/Paris", "--holidays", "FR"),
        *("--dates", "2027-02-01", "--after", "2026-12-15T00:00Z", "--count", "3"),
    )
    assert code == 0
    assert out.split() == [
        "2027-01-04T08:00:00+01:00",  # 1 January a holiday, then a weekend
        "2027-02-02T08:00:00+01:00",  # Monday 1 February held by --dates
        "2027-03-01T08:00:00+01:00",
    ]


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--cron", "0 9 * * *", "--exclude-calendar", "fr"), "cannot read your team's calendars"),
        (("--business-day", "1", "--time", "08:00", "--calendar", "fr"), "cannot read your team's calendars"),
        (("--rate", "1 hour", "--holidays", "FR"), "exclude: is for cron schedules only"),
        (("--at", "2027-01-01T00:00:00Z", "--dates", "2027-01-01"), "exclude: is for cron schedules only"),
        (("--cron", "0 9 * * *", "--holidays", "XX"), "--holidays: source.holidays.country: 'XX'"),
        (("--cron", "0 9 * * *", "--holidays", "DE-ZZ"), "'ZZ' is not a subdivision of DE"),
        (("--cron", "0 9 * * *", "--dates", "2026-02-30"), "--dates: source.dates"),
        (("--business-day", "0", "--time", "08:00"), "schedule.business_day: "),
        (("--business-day", "1", "--time", "24:00"), "schedule.at: "),
        (("--business-day", "1", "--time", "08:00", "--tz", "Mars/Base"), "schedule.timezone: "),
        (("--business-day", "1", "--time", "08:00", "--holidays", "FR", "--rolled", "each"), "exclude some"),
    ],
)
def test_preview_refuses_bad_calendar_flags_naming_what_is_wrong(
    capsys: pytest.CaptureFixture[str], flags: tuple[str, ...], says: str
) -> None:
    code, _, err = preview(capsys, *flags)
    assert code == 2
    assert says in err
