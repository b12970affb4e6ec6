"""``duetime jobs``, ``runs`` and ``preview``: jobs through the API, their specs built from flags, and a
schedule's next times offline."""

from __future__ import annotations

import argparse
import json
import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from pydantic import ValidationError

from duetime.cli import fires
from duetime.cli.common import (
    JOB_COLUMNS,
    RUN_COLUMNS,
    SIGNING_KEY_COLUMNS,
    UsageError,
    api_flags,
    client_from,
    json_flag,
    show,
)
from duetime.cli.schedule_calendars import (
    add_calendar_source_flags,
    add_schedule_calendar_flags,
    business_day_schedule,
    check_calendar_flags,
    excluded_times,
    exclusion,
    preview_calendars,
)
from duetime.domain.aws_targets import QUEUE_URL_PATTERN
from duetime.domain.dst import gap_end
from duetime.domain.errors import from_validation_error
from duetime.domain.models import JobSpec

if TYPE_CHECKING:
    from duetime.api.previews import UpcomingRun


def add_commands(commands: Any) -> None:
    group = commands.add_parser("jobs", help="create and manage jobs")
    group.set_defaults(run=run_jobs)
    jobs = group.add_subparsers(dest="action", required=True)
    add_create_flags(api_flags(jobs.add_parser("create", help="register a job")))
    listing = api_flags(jobs.add_parser("list", help="list your jobs"))
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--cursor")
    listing.add_argument("--label", help="only jobs with this label, KEY:VALUE")
    listing.add_argument("--search", help="only jobs with a name word starting with each of these words")
    history = api_flags(jobs.add_parser("history", help="a job's changes (90 days), newest first"))
    history.add_argument("id")
    history.add_argument("--limit", type=int, default=50)
    fires.add_fires_command(jobs)
    for action in ("get", "pause", "resume", "delete"):
        api_flags(jobs.add_parser(action, help=f"{action} a job")).add_argument("id")
    api_flags(
        jobs.add_parser(
            "signing-key", help="the keys (whsec_...) the job's target verifies its calls' signatures with"
        )
    ).add_argument("id")
    trigger = api_flags(jobs.add_parser("trigger", help="run a job now (its schedule is not touched)"))
    trigger.add_argument("id")
    trigger.add_argument("--body", help="this run's request body, sent as given (default: the job's)")
    backfill = api_flags(
        jobs.add_parser("backfill", help="runs for a job's past times in [--from, --to), paced; idempotent")
    )
    backfill.add_argument("id")
    backfill.add_argument("--from", dest="start", required=True, help="ISO-8601 with an offset (inclusive)")
    backfill.add_argument("--to", dest="end", required=True, help="ISO-8601 with an offset (exclusive), past")
    group = commands.add_parser("runs", help="a job's runs")
    group.set_defaults(run=run_runs)
    runs = group.add_subparsers(dest="action", required=True)
    run_list = api_flags(runs.add_parser("list", help="runs of a job, newest first"))
    run_list.add_argument("id", help="job id")
    run_list.add_argument("--limit", type=int, default=20)
    run_list.add_argument("--cursor")
    api_flags(runs.add_parser("get", help="one run")).add_argument("id", help="run id")
    api_flags(runs.add_parser("retry", help="send a failed or dead run back to the queue")).add_argument("id")
    api_flags(runs.add_parser("cancel", help="cancel a queued, waiting or running run")).add_argument("id")
    preview = commands.add_parser("preview", help="next run times of a schedule (offline)")
    preview.set_defaults(run=run_preview)
    add_schedule_flags(preview)
    add_calendar_source_flags(preview)
    preview.add_argument("--after", help="ISO-8601 instant (default now)")
    preview.add_argument("--count", type=int, default=5)
    json_flag(preview)


def add_create_flags(create: argparse.ArgumentParser) -> None:
    """``jobs create``: a job's spec from flags (or ``--file``)."""
    create.add_argument("--file", help="a JSON job body instead of the flags below")
    create.add_argument("--name")
    add_schedule_flags(create)
    create.add_argument(
        "--target-url",
        "--target",
        dest="target_url",
        help="an HTTP URL; or an AWS target: a Lambda function, SNS topic, Step Functions state machine or "
        "EventBridge bus ARN, eventbridge:<bus name>, or an SQS queue URL",
    )
    create.add_argument("--method", default="POST")
    create.add_argument("--header", action="append", help="NAME:VALUE (repeatable)")
    create.add_argument(
        "--body",
        help="what the target is sent: an HTTP body, an SQS/SNS message, a Lambda payload, Step Functions "
        "input or EventBridge detail (JSON, else text)",
    )
    create.add_argument("--role-arn", help="AWS targets: the role to call under (default: the team's)")
    create.add_argument("--group-id", help="SQS/SNS FIFO targets: the message group id")
    create.add_argument("--detail-type", help="EventBridge targets: the event's detail-type")
    create.add_argument("--source", help="EventBridge targets: the event's source (default duetime)")
    create.add_argument("--jitter", type=int, help="jitter window in seconds (default 300)")
    create.add_argument("--exact", action="store_true", help="fire at the exact second (uses quota)")
    create.add_argument("--misfire", choices=["run_once", "run_all", "skip"])
    create.add_argument(
        "--overlap",
        choices=["allow", "skip", "buffer_one"],
        help="while the previous run is unfinished: run anyway (default), skip, or wait (one at most)",
    )
    create.add_argument(
        "--catchup-window", type=int, help="seconds a run may start late before misfire applies (default 60)"
    )
    create.add_argument(
        "--success-deadline",
        type=int,
        help="seconds after each scheduled time by which its run must have succeeded, or a missed alert",
    )
    create.add_argument(
        "--notify",
        action="append",
        metavar="EVENTS=ADDRESS",
        help="tell a webhook URL or an SNS topic ARN of the job's events (failed, dead, missed, recovered), "
        "e.g. dead,missed=https://hooks.example.com/duetime (repeatable)",
    )
    create.add_argument("--max-attempts", type=int)
    create.add_argument("--backoff", help="seconds, comma separated, e.g. 10,30,120")
    create.add_argument("--timeout", type=int, help="target timeout in seconds")
    create.add_argument("--start-at")
    create.add_argument("--end-at")
    create.add_argument("--paused", action="store_true")
    create.add_argument("--label", action="append", help="KEY=VALUE (repeatable, up to 20)")
    create.add_argument("--idempotency-key")


# --- job specs from flags --------------------------------------------------------------------------------


def spec_from_args(args: argparse.Namespace) -> dict[str, Any]:
    if args.file:
        with open(args.file) as handle:
            loaded: dict[str, Any] = json.load(handle)
        return loaded
    body: dict[str, Any] = {
        "name": args.name,
        "schedule": schedule_from_args(args),
        "target": target_from_args(args),
        **dst_from_args(args),
        **exclusion(args, args.exclude_calendar or []),
    }
    check_calendar_flags(args, excluding=bool(args.exclude_calendar))
    if args.header and body["target"]["type"] != "http":
        raise UsageError("--header is for HTTP targets")
    if args.header:
        headers = {}
        for header in args.header:
            name, sep, value = header.partition(":")
            if not sep:
                raise UsageError(f"--header needs NAME:VALUE, got {header!r}")
            headers[name.strip()] = value.strip()
        body["target"]["headers"] = headers
    if args.body is not None and body["target"]["type"] == "http":
        body["target"]["body"] = args.body
    for flag, key in (
        ("jitter", "jitter_seconds"),
        ("misfire", "misfire"),
        ("catchup_window", "catchup_window_seconds"),
        ("success_deadline", "success_deadline_seconds"),
        ("overlap", "overlap"),
        ("timeout", "timeout_seconds"),
        ("start_at", "start_at"),
        ("end_at", "end_at"),
    ):
        if getattr(args, flag) is not None:
            body[key] = getattr(args, flag)
    if args.exact:
        body["exact"] = True
    if args.paused:
        body["paused"] = True
    if args.label:
        body["labels"] = dict(_pair(text, "--label", "KEY=VALUE") for text in args.label)
    if args.max_attempts is not None or args.backoff is not None:
        body["retry"] = {}
        if args.max_attempts is not None:
            body["retry"]["max_attempts"] = args.max_attempts
        if args.backoff is not None:
            body["retry"]["backoff_seconds"] = [int(b) for b in args.backoff.split(",")]
    if args.notify:
        body["notify"] = [notify_channel(value) for value in args.notify]
    return body


AWS_TARGET_KINDS = {  # an ARN's service: the AWS target's type and the field the ARN fills
    "lambda": ("lambda", "function_arn"),
    "sns": ("sns", "topic_arn"),
    "states": ("stepfunctions", "state_machine_arn"),
    "events": ("eventbridge", "event_bus_name"),
}


def target_kind(address: str) -> tuple[str, str]:
    """The target type ``--target`` names and the field it fills: an ARN of a function, topic, state machine
    or event bus; ``eventbridge:<bus name>``; an SQS queue URL (https://sqs.<region>...., or LocalStack's);
    anything else is an HTTP URL."""
    parts = address.split(":")
    if address.startswith("arn:") and len(parts) > 2 and parts[2] in AWS_TARGET_KINDS:
        return AWS_TARGET_KINDS[parts[2]]
    if address.startswith("eventbridge:"):
        return "eventbridge", "event_bus_name"
    if re.fullmatch(QUEUE_URL_PATTERN, address):
        return "sqs", "queue_url"
    return "http", "url"


def target_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The job's target from ``--target`` (its type read from it: ``target_kind``) and the flags for it:
    ``--body`` is an HTTP body, an SQS or SNS message, or a Lambda payload, Step Functions input or
    EventBridge detail (as the JSON it holds, else as text)."""
    address = args.target_url or ""
    kind, field = target_kind(address)
    if kind == "http":
        return {"type": "http", "url": args.target_url, "method": args.method}
    target: dict[str, Any] = {"type": kind, field: address.removeprefix("eventbridge:")}
    if args.body is not None:
        payload = {"lambda": "payload", "stepfunctions": "input", "eventbridge": "detail"}.get(
            kind, "message"
        )
        target[payload] = args.body if payload == "message" else _json_or_text(args.body)
    flags = {
        "role_arn": "role_arn",
        "group_id": "message_group_id",
        "detail_type": "detail_type",
        "source": "source",
    }
    for flag, key in flags.items():
        if getattr(args, flag, None) is not None:
            target[key] = getattr(args, flag)
    return target


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def notify_channel(value: str) -> dict[str, Any]:
    """``--notify EVENTS=ADDRESS``: a webhook for a URL, an SNS topic for an ARN."""
    events, sep, address = value.partition("=")
    if not sep or not events or not address:
        raise UsageError(
            f"--notify needs EVENTS=URL or EVENTS=TOPIC_ARN, e.g. dead,missed=https://…; got {value!r}"
        )
    kinds = [event.strip() for event in events.split(",")]
    if address.startswith("arn:"):
        return {"type": "sns", "topic_arn": address, "events": kinds}
    return {"type": "webhook", "url": address, "events": kinds}


def schedule_from_args(args: argparse.Namespace) -> dict[str, Any]:
    chosen = [k for k in ("cron", "rate", "at", "business_day") if getattr(args, k) is not None]
    if len(chosen) != 1:
        raise UsageError("give exactly one of --cron, --rate, --at or --business-day N (with --time HH:MM)")
    if args.business_day is not None:
        return business_day_schedule(args, args.calendar or [])
    if args.cron:
        return {"cron": args.cron, "timezone": args.tz}
    return {"rate": args.rate} if args.rate else {"at": args.at}


def dst_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """``{"dst": {...}}`` from ``--dst-gap`` and ``--dst-overlap``; nothing when neither is given."""
    policy = {
        side: value
        for side, value in (("gap", args.dst_gap), ("overlap", args.dst_overlap))
        if value is not None
    }
    return {"dst": policy} if policy else {}


def add_schedule_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cron",
        help='5-field cron, e.g. "0 0 * * *" or "0 9 LW * *" (or @daily..., or "cron(0 9 ? * MON-FRI *)")',
    )
    parser.add_argument("--tz", default="UTC", help="IANA time zone for --cron (default UTC)")
    parser.add_argument("--rate", help='e.g. "5 minutes"')
    parser.add_argument("--at", help="one time, ISO-8601 with an offset")
    parser.add_argument(
        "--dst-gap",
        choices=["shift", "skip"],
        help="--cron: a wall time spring-forward skips runs at the gap's end (shift) or not at all (skip); "
        "default: shift for a fixed-time cron, skip for an hourly one",
    )
    parser.add_argument(
        "--dst-overlap",
        choices=["first", "last", "both"],
        help="--cron: a wall time fall-back repeats runs at its first occurrence, its last, or both; "
        "default: first for a fixed-time cron, both for an hourly one",
    )
    add_schedule_calendar_flags(parser)


def _pair(text: str, flag: str, shape: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep:
        raise SystemExit(f"{flag} takes {shape}, e.g. env=prod (got {text!r})")
    return key, value


# --- commands --------------------------------------------------------------------------------------------


def run_jobs(args: argparse.Namespace) -> None:
    client = client_from(args)
    action = args.action
    if action == "create":
        headers = {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else None
        show(client.request("POST", "/v1/jobs", spec_from_args(args), headers=headers), args.json)
    elif action == "list":
        query = {"limit": args.limit, "cursor": args.cursor, "label": args.label, "q": args.search}
        show(client.request("GET", "/v1/jobs", query=query), args.json, JOB_COLUMNS, "jobs")
    elif action == "history":
        data = client.request("GET", client.job_path(args.id, "history"), query={"limit": args.limit})
        if not args.json:  # a table shows which fields changed; --json has from and to
            data = {**data, "changes": [{**c, "fields": ", ".join(c["fields"])} for c in data["changes"]]}
        show(data, args.json, ["at", "action", "token_id", "fields"], "changes")
    elif action == "fires":
        fires.run_fires(args)
    elif action == "get":
        show(client.request("GET", client.job_path(args.id)), args.json)
    elif action == "signing-key":
        keys = client.request("GET", client.job_path(args.id, "signing-key"))
        show(keys, args.json, SIGNING_KEY_COLUMNS, "keys")
    elif action in ("pause", "resume"):
        show(client.request("POST", client.job_path(args.id, action)), args.json)
    elif action == "trigger":
        sent = {"body": args.body} if args.body is not None else None
        show(client.request("POST", client.job_path(args.id, "trigger"), sent), args.json)
    elif action == "backfill":
        window = {"from": args.start, "to": args.end}
        show(client.request("POST", client.job_path(args.id, "backfill"), window), args.json)
    elif action == "delete":
        client.request("DELETE", client.job_path(args.id))
        show({"deleted": args.id}, args.json)


def run_runs(args: argparse.Namespace) -> None:
    client = client_from(args)
    if args.action == "list":
        data = client.request(
            "GET", client.job_path(args.id, "runs"), query={"limit": args.limit, "cursor": args.cursor}
        )
        show(data, args.json, RUN_COLUMNS, "runs")
    elif args.action == "get":
        show(client.request("GET", client.run_path(args.id)), args.json)
    else:  # retry, cancel
        show(client.request("POST", client.run_path(args.id, args.action)), args.json)


_JUST_BEFORE = timedelta(microseconds=1)


def _shown_run(run: UpcomingRun, zone: ZoneInfo) -> str:
    at = run.nominal_at.astimezone(zone).isoformat()
    return f"{at}  {run.dst_effect}" if run.dst_effect else at


def run_preview(args: argparse.Namespace) -> None:
    """The schedule's next times in its zone, each with what daylight saving did to it, and the wall times
    a spring-forward skipped that get no run; with calendars (``--holidays``, ``--dates``), a cron's times on
    excluded dates and what became of them (``--json``: ``times``, ``runs`` with ``dst_effect``, ``skipped``
    and ``excluded``)."""
    from duetime.api.previews import preview_of

    after = datetime.fromisoformat(args.after).astimezone(UTC) if args.after else datetime.now(UTC)
    calendar_fields, days = preview_calendars(args)
    body = {
        "name": "preview",
        "schedule": schedule_from_args(args),
        "target": {"url": "https://example.com"},
        "exact": True,
        **dst_from_args(args),
        **calendar_fields,
    }
    try:
        spec = JobSpec.model_validate(body)
    except ValidationError as exc:
        raise UsageError(from_validation_error(exc).message) from exc
    if days is not None:
        spec = spec.with_days_off(days)
    zone = ZoneInfo(args.tz)
    preview = preview_of(spec, None, after, after, args.count)
    skipped_at = preview.skipped
    skipped = [naive.isoformat() for naive in skipped_at]
    excluded = excluded_times(spec, after, preview.runs[-1].nominal_at if preview.runs else after)
    if args.json:
        runs = [
            {"at": r.nominal_at.astimezone(zone).isoformat(), "dst_effect": r.dst_effect}
            for r in preview.runs
        ]
        shown: dict[str, Any] = {"times": [run["at"] for run in runs], "runs": runs, "skipped": skipped}
        if spec.exclude is not None:
            shown["excluded"] = [time.as_json(zone) for time in excluded]
        print(json.dumps(shown))
        return
    lines = [(r.nominal_at, _shown_run(r, zone)) for r in preview.runs]
    lines += [(time.at, time.shown(zone)) for time in excluded]
    # a skipped wall time is listed where the clock jumped over it, before the run at that instant
    lines += [(gap_end(naive, zone) - _JUST_BEFORE, f"{naive.isoformat()}  skipped") for naive in skipped_at]
    print("\n".join(text for _, text in sorted(lines)))
