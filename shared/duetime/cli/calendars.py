"""``duetime calendars``: a team's calendars through the API (``/v1/calendars``), their source from flags:
``--holidays FR`` (``--subdivision BY``), ``--dates 2026-12-24,2026-12-31`` or ``--ical FILE`` (the file's
text is sent; duetime never fetches a URL)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any
from urllib.parse import quote

from duetime.cli.common import UsageError, api_flags, client_from, show

CALENDAR_COLUMNS = ["name", "source", "version", "description", "updated_at"]


def add_commands(commands: Any) -> None:
    group = commands.add_parser("calendars", help="a team's calendars: days jobs can skip or roll over")
    group.set_defaults(run=run_calendars)
    calendars = group.add_subparsers(dest="action", required=True)
    create = api_flags(calendars.add_parser("create", help="create a calendar"))
    create.add_argument("name", help="a-z, 0-9 and -, e.g. fr-holidays")
    add_source_flags(create)
    listing = api_flags(calendars.add_parser("list", help="your team's calendars, by name"))
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--cursor")
    shown = api_flags(calendars.add_parser("show", help="one calendar (with --year, that year's days)"))
    shown.add_argument("name")
    shown.add_argument("--year", type=int, help="list the days of this year the calendar holds")
    update = api_flags(calendars.add_parser("update", help="replace a calendar's source and description"))
    update.add_argument("name")
    add_source_flags(update)
    version_flag(update)
    delete = api_flags(calendars.add_parser("delete", help="delete a calendar (its history stays 90 days)"))
    delete.add_argument("name")
    version_flag(delete)
    history = api_flags(calendars.add_parser("history", help="a calendar's changes (90 days), newest first"))
    history.add_argument("name")
    history.add_argument("--limit", type=int, default=50)


def add_source_flags(parser: argparse.ArgumentParser) -> None:
    """The calendar's source: exactly one of three flags; and its description."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--holidays", metavar="COUNTRY", help="a country's public holidays (ISO code, e.g. FR)"
    )
    source.add_argument("--dates", help="explicit dates, YYYY-MM-DD separated by commas")
    source.add_argument("--ical", metavar="FILE", help="an iCalendar file (.ics): its events' days")
    parser.add_argument("--subdivision", help="with --holidays: a subdivision's too (e.g. BY in DE)")
    parser.add_argument("--description")


def version_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", type=int, help="the version you read: refused (409) if it changed since")


def source_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The ``source`` the flags describe (``duetime.domain.calendars.CalendarSource``)."""
    if args.subdivision and not args.holidays:
        raise UsageError("--subdivision goes with --holidays")
    if args.holidays:
        holidays = {
            "country": args.holidays,
            **({"subdivision": args.subdivision} if args.subdivision else {}),
        }
        return {"holidays": holidays}
    if args.dates:
        return {"dates": [day.strip() for day in args.dates.split(",") if day.strip()]}
    try:
        return {"ical": Path(args.ical).read_text(encoding="utf-8")}
    except OSError as exc:
        raise UsageError(f"--ical: cannot read {args.ical}: {exc.strerror}") from exc


def _path(name: str, action: str = "") -> str:
    return f"/v1/calendars/{quote(name, safe='')}" + (f"/{action}" if action else "")


def _row(calendar: dict[str, Any]) -> dict[str, Any]:
    source = calendar["source"]
    kind = next(k for k in ("holidays", "dates", "ical") if source.get(k) is not None)
    shown = {
        "holidays": lambda: "holidays " + "-".join(v for v in source["holidays"].values() if v),
        "dates": lambda: f"{len(source['dates'])} dates",
        "ical": lambda: f"iCalendar ({len(source['ical'])} characters)",
    }[kind]()
    return {**calendar, "source": shown}


def run_calendars(args: argparse.Namespace) -> None:
    client = client_from(args)
    action = args.action
    if action in ("create", "update"):
        body: dict[str, Any] = {"source": source_from_args(args), "description": args.description}
        if action == "create":
            show(client.request("POST", "/v1/calendars", {"name": args.name, **body}), args.json)
        else:
            versioned = {**body, "version": args.version} if args.version is not None else body
            show(client.request("PUT", _path(args.name), versioned), args.json)
    elif action == "list":
        data = client.request("GET", "/v1/calendars", query={"limit": args.limit, "cursor": args.cursor})
        rows = data if args.json else {**data, "calendars": [_row(c) for c in data["calendars"]]}
        show(rows, args.json, CALENDAR_COLUMNS, "calendars")
    elif action == "show":
        data = client.request("GET", _path(args.name), query={"year": args.year})
        if args.json or args.year is None:
            show(data if args.json else _row(data), args.json)
        else:
            show(data, False, ["date", "name"], "days")
    elif action == "delete":
        client.request("DELETE", _path(args.name), query={"version": args.version})
        show({"deleted": args.name}, args.json)
    elif action == "history":
        data = client.request("GET", _path(args.name, "history"), query={"limit": args.limit})
        if not args.json:
            data = {**data, "changes": [{**c, "fields": ", ".join(c["fields"])} for c in data["changes"]]}
        show(data, args.json, ["at", "action", "version", "token_id", "fields"], "changes")
