"""``duetime jobs fires`` and ``duetime audit``: the fire ledger (``GET /v1/jobs/{id}/fires``,
``GET /v1/audit``) for people: every time a job should have fired and what became of it, and a team's
counts per label with the jobs that missed."""

from __future__ import annotations

import argparse
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from duetime.cli.common import UsageError, api_flags, client_from, show, table
from duetime.domain.fire_ledger import FireLabel

FIRE_COLUMNS = ["scheduled_at", "label", "reason", "late_seconds", "attempts", "detail"]
LABELS = tuple(label.value for label in FireLabel)
_SINCE = re.compile(r"^(\d+)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def since(text: str) -> timedelta:
    """``--since``: a count and a unit (``90s``, ``30m``, ``24h``, ``7d``)."""
    match = _SINCE.match(text.strip())
    if match is None or int(match[1]) == 0:
        raise UsageError(f"--since takes a count and a unit s, m, h or d, e.g. 24h (got {text!r})")
    return timedelta(**{_UNITS[match[2]]: int(match[1])})


def window_flags(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--since", help="how far back from --to (or now): 90s, 30m, 24h, 7d; default 24h")
    parser.add_argument(
        "--from", dest="start", help="window start, ISO-8601 with an offset (instead of --since)"
    )
    parser.add_argument(
        "--to", dest="end", help="window end (exclusive), ISO-8601 with an offset; default now"
    )
    parser.add_argument(
        "--late-after", type=int, default=5, help="a start later than this many seconds is late (default 5)"
    )
    return parser


def add_fires_command(jobs: Any) -> None:
    """``duetime jobs fires ID``: under the ``jobs`` group."""
    fires = window_flags(
        api_flags(jobs.add_parser("fires", help="every time a job should have fired, and what happened"))
    )
    fires.add_argument("id")
    fires.add_argument("--all", action="store_true", help="follow next_from to the window's end")


def add_commands(commands: Any) -> None:
    audit = commands.add_parser(
        "audit", help="the fire ledger across your jobs: counts per label, the misses"
    )
    audit.set_defaults(run=run_audit)
    window_flags(api_flags(audit))


def _window(args: argparse.Namespace) -> dict[str, Any]:
    """The window's query: ``--from``/``--to`` as given, or ``--since`` back from ``--to`` (or from this
    machine's clock: the API's own default is the last 24 hours up to the store's now)."""
    if args.since and args.start:
        raise UsageError("give --since or --from, not both")
    query: dict[str, Any] = {"to": args.end, "late_after_seconds": args.late_after}
    if args.start:
        query["from"] = args.start
    elif args.since:
        span = since(args.since)
        try:
            end = datetime.fromisoformat(args.end.replace("Z", "+00:00")) if args.end else datetime.now(UTC)
        except ValueError as exc:
            raise UsageError(f"--to: not an ISO-8601 instant ({args.end!r})") from exc
        query["from"] = (end - span).isoformat()
    return query


def run_fires(args: argparse.Namespace) -> None:
    client = client_from(args)
    query = _window(args)
    path = client.job_path(args.id, "fires")
    data = client.request("GET", path, query=query)
    while args.all and data.get("next_from"):
        more = client.request("GET", path, query={**query, "from": data["next_from"]})
        data = {**more, "fires": data["fires"] + more["fires"], "window_start": data["window_start"]}
    if args.all:
        counted = Counter(fire["label"] for fire in data["fires"])
        data["counts"] = {label: counted.get(label, 0) for label in LABELS}
    if args.json:
        show(data, True)
        return
    for note in data.get("notes", []):
        print(f"note: {note}")
    print(table(data["fires"], FIRE_COLUMNS))
    print("  ".join(f"{label} {data['counts'].get(label, 0)}" for label in LABELS))
    if data.get("next_from"):
        print(f"(more: --from {data['next_from']}, or --all)")


def run_audit(args: argparse.Namespace) -> None:
    client = client_from(args)
    query = _window(args)
    counts: Counter[str] = Counter()
    missed: list[dict[str, Any]] = []
    checked, cursor, first = 0, None, None
    while True:
        page = client.request("GET", "/v1/audit", query={**query, "cursor": cursor})
        first = first or page
        counts.update(page["counts"])
        missed += page["jobs_with_misses"]
        checked += page["jobs_checked"]
        cursor = page.get("next_cursor")
        if not cursor:
            break
    result = {
        "window_start": first["window_start"],
        "window_end": first["window_end"],
        "jobs_checked": checked,
        "counts": {label: counts.get(label, 0) for label in LABELS},
        "jobs_with_misses": missed,
    }
    if args.json:
        show(result, True)
        return
    print(f"{checked} jobs, {result['window_start']} to {result['window_end']}")
    print(table([result["counts"]], list(LABELS)))
    if missed:
        rows = [
            {
                "job_id": job["job_id"],
                "name": job["name"],
                "missed": job["missed"],
                "first_missed": job["misses"][0]["scheduled_at"] if job["misses"] else "",
                "why": job["misses"][0]["reason"] if job["misses"] else "",
            }
            for job in missed
        ]
        print(table(rows, ["job_id", "name", "missed", "first_missed", "why"]))
    else:
        print("no missed fires")
