"""``/v1/calendars`` through the api function, on the in-memory catalog: create, list, show (a year's days
with their names), replace under a version, delete, history; bad input is a 422 naming the field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from duetime.adapters.memory import InMemoryCatalog
from duetime.api import app as api
from duetime.api import request_context
from duetime.api.service import JobService
from duetime.api.team_admin import hash_token
from duetime.domain.clock import ManualClock
from duetime.domain.job_history import token_id

from ..lambda_support import api_request

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


class Limiter:
    def take(self, team: Any, now: Any) -> Any:
        return type("Decision", (), {"allowed": True, "retry_after_seconds": 0})()


@pytest.fixture
def tokens(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """Two teams on one in-memory catalog, served by the api function: team -> its admin token."""
    store: Any = None
    service = JobService(InMemoryCatalog(), store, store, ManualClock(NOW))
    made = {team: service.create_team(team)[1] for team in ("alpha", "beta")}
    monkeypatch.setattr(request_context, "_service_factory", lambda: service)
    monkeypatch.setattr(request_context, "_rate_limiter_factory", lambda: Limiter())
    api.service.cache_clear()
    api.rate_limiter.cache_clear()
    yield made
    api.service.cache_clear()
    api.rate_limiter.cache_clear()


def call(token: str, method: str, path: str, body: Any = None, **query: Any) -> tuple[int, Any]:
    sent = json.dumps(body) if body is not None else None
    response = api_request(method, path, token, sent, {k: str(v) for k, v in query.items()})
    return response["statusCode"], json.loads(response["body"]) if response["body"] else None


FRANCE = {"name": "fr", "source": {"holidays": {"country": "FR"}}, "description": "French public holidays"}
ICAL = (
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\nBEGIN:VEVENT\r\nUID:1@test\r\n"
    "DTSTART;VALUE=DATE:20261224\r\nDTEND;VALUE=DATE:20261226\r\nSUMMARY:Office closed\r\n"
    "END:VEVENT\r\nEND:VCALENDAR\r\n"
)


def test_a_created_calendar_shows_a_year_s_days_with_their_names(tokens: dict[str, str]) -> None:
    status, created = call(tokens["alpha"], "POST", "/v1/calendars", FRANCE)
    assert status == 201 and created["version"] == 1 and created["days"] is None
    status, shown = call(tokens["alpha"], "GET", "/v1/calendars/fr", year=2027)
    assert status == 200 and shown["year"] == 2027
    assert len(shown["days"]) == 11
    assert {"date": "2027-07-14", "name": shown["days"][6]["name"]} in shown["days"]
    assert all(day["name"] for day in shown["days"])


def test_an_ical_calendar_holds_its_events_days(tokens: dict[str, str]) -> None:
    status, _ = call(tokens["alpha"], "POST", "/v1/calendars", {"name": "office", "source": {"ical": ICAL}})
    assert status == 201
    _, shown = call(tokens["alpha"], "GET", "/v1/calendars/office", year=2026)
    assert shown["days"] == [
        {"date": "2026-12-24", "name": "Office closed"},
        {"date": "2026-12-25", "name": "Office closed"},
    ]


@pytest.mark.parametrize(
    ("source", "field"),
    [
        ({"holidays": {"country": "XX"}}, "source.holidays.country"),
        ({"holidays": {"country": "DE", "subdivision": "ZZ"}}, "source.holidays.subdivision"),
        ({"dates": ["2026-12-24", "2026-13-01"]}, "source.dates.1"),
        ({"ical": "BEGIN:VCALENDAR\r\nEND:VCALENDAR\r\n"}, "source.ical"),
    ],
)
def test_bad_input_is_a_422_naming_the_field(tokens: dict[str, str], source: Any, field: str) -> None:
    status, answer = call(tokens["alpha"], "POST", "/v1/calendars", {"name": "bad", "source": source})
    assert status == 422, answer
    assert answer["error"]["field"] == field and answer["error"]["message"].startswith(f"{field}: ")


def test_a_taken_name_is_a_409_naming_it(tokens: dict[str, str]) -> None:
    assert call(tokens["alpha"], "POST", "/v1/calendars", FRANCE)[0] == 201
    status, answer = call(tokens["alpha"], "POST", "/v1/calendars", FRANCE)
    assert status == 409 and answer["error"]["field"] == "name"
    assert call(tokens["beta"], "POST", "/v1/calendars", FRANCE)[0] == 201  # another team's names


def test_a_replace_under_a_stale_version_is_a_409_and_writes_nothing(tokens: dict[str, str]) -> None:
    call(tokens["alpha"], "POST", "/v1/calendars", FRANCE)
    eves = {"source": {"dates": ["2026-12-24", "2026-12-31"]}}
    status, replaced = call(tokens["alpha"], "PUT", "/v1/calendars/fr", {**eves, "version": 1})
    assert status == 200 and replaced["version"] == 2 and replaced["description"] is None
    status, answer = call(tokens["alpha"], "PUT", "/v1/calendars/fr", {**FRANCE_SOURCE, "version": 1})
    assert status == 409 and answer["error"]["field"] == "version"
    assert "at version 2, not 1" in answer["error"]["message"]
    status, replaced = call(tokens["alpha"], "PUT", "/v1/calendars/fr", FRANCE_SOURCE)  # no version: latest
    assert status == 200 and replaced["version"] == 3 and replaced["source"]["holidays"]["country"] == "FR"


FRANCE_SOURCE = {"source": {"holidays": {"country": "FR"}}}


def test_a_deleted_calendar_is_gone_its_history_stays_and_its_versions_stay_taken(
    tokens: dict[str, str],
) -> None:
    alpha = tokens["alpha"]
    call(alpha, "POST", "/v1/calendars", FRANCE)
    call(alpha, "PUT", "/v1/calendars/fr", {"source": {"dates": ["2026-12-24"]}})
    assert call(alpha, "DELETE", "/v1/calendars/fr", version=1)[0] == 409
    assert call(alpha, "DELETE", "/v1/calendars/fr", version=2)[0] == 204
    assert call(alpha, "GET", "/v1/calendars/fr")[0] == 404
    status, history = call(alpha, "GET", "/v1/calendars/fr/history")
    assert status == 200
    me = token_id(hash_token(alpha))
    assert [(c["action"], c["version"], c["token_id"]) for c in history["changes"]] == [
        ("delete", 2, me),
        ("update", 2, me),
        ("create", 1, me),
    ]
    assert history["changes"][1]["fields"]["source"] == {
        "from": "holidays of FR",
        "to": "1 dates, 2026-12-24 to 2026-12-24",
    }
    _, again = call(alpha, "POST", "/v1/calendars", FRANCE)
    assert again["version"] == 3


def test_another_team_s_calendar_answers_as_a_missing_one(tokens: dict[str, str]) -> None:
    call(tokens["alpha"], "POST", "/v1/calendars", FRANCE)
    assert call(tokens["beta"], "GET", "/v1/calendars/fr")[0] == 404
    assert call(tokens["beta"], "PUT", "/v1/calendars/fr", FRANCE_SOURCE)[0] == 404
    assert call(tokens["beta"], "DELETE", "/v1/calendars/fr")[0] == 404
    assert call(tokens["beta"], "GET", "/v1/calendars/fr/history")[0] == 404
    assert call(tokens["beta"], "GET", "/v1/calendars")[1] == {"calendars": [], "next_cursor": None}


def test_a_team_s_calendars_are_listed_by_name_page_by_page(tokens: dict[str, str]) -> None:
    for name in ("c", "a", "b"):
        call(tokens["alpha"], "POST", "/v1/calendars", {"name": name, "source": {"dates": ["2026-12-24"]}})
    status, first = call(tokens["alpha"], "GET", "/v1/calendars", limit=2)
    assert status == 200 and [c["name"] for c in first["calendars"]] == ["a", "b"]
    _, rest = call(tokens["alpha"], "GET", "/v1/calendars", limit=2, cursor=first["next_cursor"])
    assert [c["name"] for c in rest["calendars"]] == ["c"] and rest["next_cursor"] is None
    status, answer = call(tokens["beta"], "GET", "/v1/calendars", cursor=first["next_cursor"])
    assert status == 400 and answer["error"]["field"] == "cursor"


# --- duetime calendars: the CLI's requests, answered by the same api function ------------------------------


@pytest.fixture
def cli(tokens: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """``duetime`` with its client's requests answered in-process by the api function (as team alpha)."""
    from duetime import cli as command
    from duetime.client import ApiFailure, DuetimeClient

    def request(
        self: DuetimeClient, method: str, path: str, body: Any = None, query: Any = None, **_: Any
    ) -> Any:
        sent = {k: str(v) for k, v in (query or {}).items() if v is not None}
        status, answer = call(self.token, method, path, body, **sent)
        if status >= 400:
            raise ApiFailure(f"HTTP {status}: {answer['error']['message']}")
        return answer

    monkeypatch.setattr(DuetimeClient, "request", request)
    monkeypatch.setenv("DUETIME_TOKEN", tokens["alpha"])
    return command


def test_the_cli_creates_lists_shows_updates_and_deletes_calendars(
    cli: Any, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["calendars", "create", "fr", "--holidays", "FR", "--description", "France"]) == 0
    assert cli.main(["calendars", "create", "eves", "--dates", "2026-12-24, 2026-12-31"]) == 0
    (tmp_path / "office.ics").write_text(ICAL)
    assert cli.main(["calendars", "create", "office", "--ical", str(tmp_path / "office.ics")]) == 0
    capsys.readouterr()
    assert cli.main(["calendars", "list"]) == 0
    listed = capsys.readouterr().out
    assert "holidays FR" in listed and "2 dates" in listed and "iCalendar (" in listed
    assert cli.main(["calendars", "show", "fr", "--year", "2027", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["days"]) == 11
    assert cli.main(["calendars", "update", "eves", "--dates", "2026-12-24", "--version", "1"]) == 0
    assert cli.main(["calendars", "update", "eves", "--dates", "2026-12-31", "--version", "1"]) == 1
    assert "at version 2, not 1" in capsys.readouterr().err
    assert cli.main(["calendars", "delete", "eves", "--version", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"deleted": "eves"}
    assert cli.main(["calendars", "history", "eves", "--json"]) == 0
    assert [c["action"] for c in json.loads(capsys.readouterr().out)["changes"]] == [
        "delete",
        "update",
        "create",
    ]


def test_the_cli_refuses_a_subdivision_without_a_country_and_a_file_it_cannot_read(
    cli: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["calendars", "create", "x", "--dates", "2026-12-24", "--subdivision", "BY"]) == 2
    assert cli.main(["calendars", "create", "x", "--ical", "/nonexistent.ics"]) == 2
    assert "--ical: cannot read /nonexistent.ics" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # a source is required, and only one
        cli.main(["calendars", "create", "x", "--holidays", "FR", "--dates", "2026-12-24"])
