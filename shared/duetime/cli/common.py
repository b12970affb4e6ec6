"""What every command group shares: the API's flags (declared once), the client they make, how answers are
printed, and the usage error (exit 2)."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from typing import Any

from duetime.client import DuetimeClient


class UsageError(Exception):
    pass


def api_flags(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The flags of every command that calls the API: where, with which token, and ``--json``."""
    parser.add_argument("--url", help="API base URL (or DUETIME_URL; default http://127.0.0.1:8080)")
    parser.add_argument("--token", help="API token (or DUETIME_TOKEN)")
    return json_flag(parser)


def json_flag(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    return parser


def client_from(args: argparse.Namespace) -> DuetimeClient:
    url = args.url or os.environ.get("DUETIME_URL") or "http://127.0.0.1:8080"
    token = args.token or os.environ.get("DUETIME_TOKEN")
    if not token:
        raise UsageError("no token: pass --token or set DUETIME_TOKEN")
    return DuetimeClient(url, token)


# --- output ----------------------------------------------------------------------------------------------


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    cells = [[("" if row.get(c) is None else str(row.get(c))) for c in columns] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(line.rstrip() for line in lines)


JOB_COLUMNS = ["id", "name", "schedule", "paused", "next_run_at"]
RUN_COLUMNS = ["run_id", "status", "attempt", "scheduled_at", "finished_at"]
SIGNING_KEY_COLUMNS = ["key_id", "secret", "until"]
TOKEN_COLUMNS = ["token_id", "name", "scope", "created_at", "created_by", "in_use"]


def _job_row(job: dict[str, Any]) -> dict[str, Any]:
    schedule = job["schedule"]
    text = (
        f"cron {schedule['cron']} {schedule.get('timezone', 'UTC')}"
        if "cron" in schedule
        else f"rate {schedule['rate']}"
        if "rate" in schedule
        else f"at {schedule['at']}"
    )
    return {**job, "schedule": text}


def show(data: Any, as_json: bool, columns: Sequence[str] | None = None, rows_key: str | None = None) -> None:
    if as_json:
        print(json.dumps(data))
        return
    if rows_key is not None and columns is not None:
        rows = data[rows_key]
        print(table([_job_row(r) for r in rows] if rows_key == "jobs" else rows, columns))
        if data.get("next_cursor"):
            print(f"(more: --cursor {data['next_cursor']})")
    elif isinstance(data, dict):
        width = max((len(k) for k in data), default=0)
        for key, value in data.items():
            print(f"{key.ljust(width)}  {json.dumps(value) if isinstance(value, (dict, list)) else value}")
