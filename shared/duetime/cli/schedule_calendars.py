"""The calendar flags of ``duetime jobs create`` and ``duetime preview``: a business-day schedule
(``--business-day N --time HH:MM``, its ``--calendar``s), a cron's exclusions (``--exclude-calendar``,
``--on-excluded``, ``--rolled``), and, for the offline preview that cannot read a team's calendars, calendars
given by their sources (``--holidays FR`` / ``DE-BY``, ``--dates 2026-12-24,2026-12-31``)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import ValidationError

from duetime.cli.common import UsageError
from duetime.domain.calendars import CalendarDates, CalendarSpec
from duetime.domain.errors import from_validation_error
from duetime.domain.models import JobSpec
from duetime.domain.schedule import excluded_times_between

SOURCE_FLAGS = "--holidays or --dates"
LOOKBACK = timedelta(days=40)  # a preview's cron times start this far back: rolls into the shown times count


def add_schedule_calendar_flags(parser: argparse.ArgumentParser) -> None:
    """The business-day kind and a cron's exclusion (``jobs create`` and ``preview`` both)."""
    parser.add_argument(
        "--business-day",
        type=int,
        metavar="N",
        help="a schedule kind: the N-th business day of each month (1 the first, -1 the last; -23..23, "
        "not 0) at --time in --tz; business days are Monday to Friday except the dates of --calendar",
    )
    parser.add_argument(
        "--time",
        metavar="HH:MM",
        help="with --business-day: the local time of day (--at is a one-time job's instant, not this)",
    )
    parser.add_argument(
        "--calendar",
        action="append",
        metavar="NAME",
        help="with --business-day: a team calendar whose dates are not business days (repeatable, up to 5)",
    )
    parser.add_argument(
        "--exclude-calendar",
        action="append",
        metavar="NAME",
        help="with --cron: a team calendar whose dates the cron does not run on (repeatable, up to 5)",
    )
    parser.add_argument(
        "--on-excluded",
        choices=["skip", "next_business_day", "previous_business_day"],
        help="a cron time on an excluded date: no run (skip, the default), or its wall time on the next or "
        "previous business day",
    )
    parser.add_argument(
        "--rolled",
        choices=["once", "each"],
        help="times rolled onto one instant: one run (once, the default) or a run each, a second apart",
    )


def add_calendar_source_flags(parser: argparse.ArgumentParser) -> None:
    """``preview``: calendars given by their sources, in place of a team's calendars it cannot read."""
    parser.add_argument(
        "--holidays",
        action="append",
        metavar="COUNTRY[-SUBDIVISION]",
        help="a country's public holidays as a calendar, e.g. FR or DE-BY (repeatable): excluded by --cron, "
        "not business days for --business-day",
    )
    parser.add_argument(
        "--dates",
        action="append",
        metavar="YYYY-MM-DD,...",
        help="explicit dates as a calendar, e.g. 2026-12-24,2026-12-31 (repeatable)",
    )


def business_day_schedule(args: argparse.Namespace, calendars: list[str]) -> dict[str, Any]:
    """``--business-day N --time HH:MM`` (in ``--tz``) as a schedule reading ``calendars``."""
    if args.time is None:
        raise UsageError("--business-day needs --time HH:MM, the local time it runs at")
    return {"business_day": args.business_day, "at": args.time, "timezone": args.tz, "calendars": calendars}


def check_calendar_flags(args: argparse.Namespace, excluding: bool) -> None:
    """Refuses flags that belong to another schedule kind; ``excluding``: the cron excludes calendars."""
    business = args.business_day is not None
    if args.time is not None and not business:
        raise UsageError("--time goes with --business-day (a one-time job's instant is --at)")
    if args.calendar and not business:
        raise UsageError(
            "--calendar names a --business-day schedule's calendars; a cron's are --exclude-calendar"
        )
    if (args.on_excluded or args.rolled) and not excluding:
        raise UsageError(
            "--on-excluded and --rolled say what a cron does on excluded dates: exclude some first"
        )


def exclusion(args: argparse.Namespace, calendars: list[str]) -> dict[str, Any]:
    """``{"exclude": {...}}`` of ``calendars`` and the flags; nothing when there are none."""
    if not calendars:
        return {}
    rule = {"calendars": calendars}
    rule.update({key: getattr(args, key) for key in ("on_excluded", "rolled") if getattr(args, key)})
    return {"exclude": rule}


def calendar_specs(args: argparse.Namespace) -> list[CalendarSpec]:
    """``--holidays`` and ``--dates`` as calendars named for what they are (``holidays-de-by``)."""
    sources: list[tuple[str, dict[str, Any]]] = []
    for code in getattr(args, "holidays", None) or []:
        country, _, subdivision = code.partition("-")
        holidays = {"country": country, **({"subdivision": subdivision} if subdivision else {})}
        sources.append((f"holidays-{code.lower()}", {"holidays": holidays}))
    for n, text in enumerate(getattr(args, "dates", None) or [], start=1):
        sources.append((f"dates-{n}", {"dates": [day.strip() for day in text.split(",") if day.strip()]}))
    specs = []
    for name, source in sources:
        try:
            specs.append(CalendarSpec.model_validate({"name": name, "source": source}))
        except ValidationError as exc:
            flag = "--holidays" if "holidays" in source else "--dates"
            raise UsageError(f"{flag}: {from_validation_error(exc).message}") from exc
    return specs


def preview_calendars(args: argparse.Namespace) -> tuple[dict[str, Any], CalendarDates | None]:
    """The preview's schedule fields that read calendars (a business-day schedule or the cron's exclusion,
    over the calendars of ``--holidays`` / ``--dates``) and those calendars' dates; the team's calendars
    (``--calendar``, ``--exclude-calendar``) cannot be read offline."""
    if args.calendar or args.exclude_calendar:
        raise UsageError(f"preview cannot read your team's calendars: give their sources with {SOURCE_FLAGS}")
    specs = calendar_specs(args)
    names = [spec.name for spec in specs]
    check_calendar_flags(args, excluding=bool(names) and args.business_day is None)
    if args.business_day is not None:
        fields = {"schedule": business_day_schedule(args, names)}
    else:
        fields = exclusion(args, names)
    return fields, CalendarDates(specs) if specs else None


@dataclass(frozen=True)
class ExcludedTime:
    """A cron time on an excluded date and where it runs instead (nowhere: skipped)."""

    at: datetime
    runs_at: list[datetime]

    def as_json(self, zone: ZoneInfo) -> dict[str, Any]:
        return {
            "at": self.at.astimezone(zone).isoformat(),
            "runs_at": [r.astimezone(zone).isoformat() for r in self.runs_at],
        }

    def shown(self, zone: ZoneInfo) -> str:
        if not self.runs_at:
            return f"{self.at.astimezone(zone).isoformat()}  excluded: skipped"
        moved = ", ".join(run.astimezone(zone).isoformat() for run in self.runs_at)
        return f"{self.at.astimezone(zone).isoformat()}  excluded: rolled to {moved}"


def excluded_times(spec: JobSpec, after: datetime, until: datetime) -> list[ExcludedTime]:
    """The cron's own times in (after, until] on its excluded dates, each with the runs it became."""
    fates = excluded_times_between(spec, after - LOOKBACK, until + timedelta(seconds=1), 100_000)
    return [ExcludedTime(at, runs) for at, runs in sorted(fates.items()) if after < at <= until]
