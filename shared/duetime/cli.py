"""The ``duetime`` command: the local system, the API from a terminal, and offline previews.

Exit codes: 0 success, 1 an error (one line on stderr), 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

from pydantic import ValidationError

from duetime.aws_targets import QUEUE_URL_PATTERN
from duetime.cli_teams import add_team_commands, run_teams
from duetime.client import ApiFailure, DuetimeClient
from duetime.errors import from_validation_error
from duetime.models import JobSpec
from duetime.tokens import TokenScope


class UsageError(Exception):
    pass


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
    }
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
    chosen = [k for k in ("cron", "rate", "at") if getattr(args, k)]
    if len(chosen) != 1:
        raise UsageError("give exactly one of --cron, --rate or --at")
    if args.cron:
        return {"cron": args.cron, "timezone": args.tz}
    return {"rate": args.rate} if args.rate else {"at": args.at}


def add_schedule_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cron", help='5-field cron, e.g. "0 0 * * *" (or @daily...)')
    parser.add_argument("--tz", default="UTC", help="IANA time zone for --cron (default UTC)")
    parser.add_argument("--rate", help='e.g. "5 minutes"')
    parser.add_argument("--at", help="one time, ISO-8601 with an offset")


# --- commands --------------------------------------------------------------------------------------------


def client_from(args: argparse.Namespace) -> DuetimeClient:
    url = args.url or os.environ.get("DUETIME_URL") or "http://127.0.0.1:8080"
    token = args.token or os.environ.get("DUETIME_TOKEN")
    if not token:
        raise UsageError("no token: pass --token or set DUETIME_TOKEN")
    return DuetimeClient(url, token)


def _pair(text: str, flag: str, shape: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep:
        raise SystemExit(f"{flag} takes {shape}, e.g. env=prod (got {text!r})")
    return key, value


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


def run_team(args: argparse.Namespace) -> None:
    client = client_from(args)
    if args.action == "set-aws-role":
        show(client.request("PUT", "/v1/team/aws-role", {"role_arn": args.role_arn}), args.json)
    elif args.action == "remove-aws-role":
        client.request("DELETE", "/v1/team/aws-role")
        show({"aws_role_arn": None}, args.json)
    else:
        show(client.request("GET", "/v1/team"), args.json)


def run_tokens(args: argparse.Namespace) -> None:
    client = client_from(args)
    if args.action == "list":
        show(client.request("GET", "/v1/tokens"), args.json, TOKEN_COLUMNS, "tokens")
    elif args.action == "create":
        issued = client.request("POST", "/v1/tokens", {"name": args.name, "scope": args.scope})
        show(issued, args.json)
        if not args.json:
            print("Keep the token now: duetime stores only its hash.", file=sys.stderr)
    elif args.action == "revoke":
        client.request("DELETE", f"/v1/tokens/{quote(args.token_id, safe='')}")
        show({"revoked": args.token_id}, args.json)
    else:
        show(client.request("GET", "/v1/token"), args.json)


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


def run_preview(args: argparse.Namespace) -> None:
    from duetime.service import upcoming_runs

    after = datetime.fromisoformat(args.after).astimezone(UTC) if args.after else datetime.now(UTC)
    body = {
        "name": "preview",
        "schedule": schedule_from_args(args),
        "target": {"url": "https://example.com"},
        "exact": True,
    }
    try:
        spec = JobSpec.model_validate(body)
    except ValidationError as exc:
        raise UsageError(from_validation_error(exc).message) from exc
    zone = ZoneInfo(args.tz)
    times = [
        r.nominal_at.astimezone(zone).isoformat() for r in upcoming_runs(spec, None, after, after, args.count)
    ]
    if args.json:
        print(json.dumps({"times": times}))
    else:
        print("\n".join(times))


def deployed_local_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """A bench's ``--deployed-local``, ``--port`` and ``--redeploy``."""
    parser.add_argument(
        "--deployed-local",
        action="store_true",
        help=f"{what} (deployed with scripts/deploy_local.sh --detach, and stopped afterwards, if no "
        "LocalStack answers on --port)",
    )
    parser.add_argument("--port", type=int, help="with --deployed-local: DUETIME_DEPLOYED_PORT or 4610")
    parser.add_argument(
        "--redeploy", action="store_true", help="with --deployed-local: replace a stack found on --port"
    )


def spike_modes(text: str) -> list[str]:
    """``--modes``: fan_out and/or alone, comma-separated."""
    from duetime.bench.deployed_spike import MODES

    modes = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise argparse.ArgumentTypeError(f"{', '.join(unknown) or 'none'}: the modes are {', '.join(MODES)}")
    return modes


def run_deployed_local(args: argparse.Namespace) -> None:
    from pathlib import Path

    from duetime.deployed_local import DeployedStack, team_token, wait_until_jobs_can_be_created

    stack = DeployedStack.from_outputs(Path(args.outputs), args.endpoint)
    token, secret = team_token(stack, args.team)
    wait_until_jobs_can_be_created(stack.api_url, token)
    if args.json:
        print(json.dumps({"api": stack.api_url, "token": token, "signing_secret": secret, "team": args.team}))
    else:
        print(f"duetime deployed on LocalStack: api={stack.api_url} token={token}", flush=True)


def run_bench(args: argparse.Namespace) -> None:
    if args.action == "versus":
        run_versus_bench(args)
        return
    if args.action == "idle":
        from duetime.bench.idle import run_idle

        idle = run_idle(
            args.minutes, args.groups, args.run_seconds, hot_standby=args.hot_standby, rest=not args.awake
        )
        print(json.dumps(idle) if args.json else "\n".join(f"{k:36} {v}" for k, v in idle.items()))
        return
    if args.action == "spike" and args.deployed_local:
        from duetime.bench.deployed_spike import run_deployed_spike

        result = run_deployed_spike(args.jobs, args.port, args.redeploy, args.holder_rows, args.modes)
    elif args.action == "spike":
        from duetime.bench.spike import run_spike

        result = run_spike(
            args.jobs,
            args.exact_fraction,
            args.jitter,
            args.workers,
            chart=args.chart,
            own_cores=not args.shared_cores,
        )
    elif args.action == "midnight":
        from duetime.bench.midnight import run_midnight_args

        result = run_midnight_args(args)
    elif args.action == "preload":
        from duetime.bench.preload import run_preload

        result = run_preload(args.jobs)
    elif args.action == "runcpu":
        from duetime.bench.run_cpu import run_cpu, run_cpu_calibrated

        if args.runs > 1 or args.save_calibration:
            if args.target != "http":
                raise SystemExit("--runs and --save-calibration measure the HTTP path (the model's)")
            result = run_cpu_calibrated(args.jobs, args.runs, args.save_calibration)
        else:
            result = run_cpu(args.jobs, args.target)
    elif args.deployed_local:
        from duetime.bench.deployed import run_deployed_precision

        result = run_deployed_precision(args.jobs, args.minutes, args.port, args.redeploy)
    else:
        from duetime.bench.precision import run_precision

        result = run_precision(args.jobs, args.minutes, args.workers)
    if args.json:
        print(json.dumps(result))
    else:
        show(result, False)


def run_versus_bench(args: argparse.Namespace) -> None:
    """duetime's spike, then the APScheduler 4 + PostgreSQL peer's: both figures and their ratio (a peer that
    cannot run raises PeerUnavailable: one line on stderr, exit 1, no figure compared)."""
    from pathlib import Path

    from duetime.bench.versus import describe, run_versus

    peer_dir = Path(args.peer_dir) if args.peer_dir else None
    result = run_versus(args.jobs, args.processes, args.workers, peer_dir)
    print(json.dumps(result) if args.json else describe(result))


def run_chaos(args: argparse.Namespace) -> int:
    from duetime.bench.chaos import run_chaos as chaos

    result = chaos(args.seed, args.minutes)
    if args.json:
        print(json.dumps(result))
    else:
        for key in (
            "runs",
            "expected_runs",
            "faults_injected",
            "lost",
            "duplicates_succeeded",
            "target_calls",
            "repeat_calls_same_key",
            "stale_writes_rejected",
            "duplicate_messages_dropped",
        ):
            print(f"{key.replace('_', ' '):30} {result[key]}")
        print(f"{'faults':30} {result['faults']}")
        print(f"{'max in flight / caps':30} {result['max_in_flight']} / {result['caps']}")
        print(f"{'run statuses':30} {result['run_statuses']}")
        for violation in result["violations"]:
            print(f"VIOLATION: {violation}")
        print("all promises held" if not result["violations"] else "PROMISES BROKEN")
    return 1 if result["violations"] else 0


def run_plan(args: argparse.Namespace) -> None:
    from duetime.bench.fixed_cost import StackDefaults
    from duetime.bench.plan import PlanInputs, capacity_plan, minutes_needing_prescale, parse_count
    from duetime.warm_throughput import DEFAULT_WARM_WRITE_UNITS, NEW_TABLE_WRITE_UNITS, parse_units

    try:
        warm = {**DEFAULT_WARM_WRITE_UNITS, **parse_units(args.warm_write_units, NEW_TABLE_WRITE_UNITS)}
    except ValueError as exc:
        raise SystemExit(f"duetime plan: --warm-write-units: {exc}") from None
    stack = StackDefaults(
        poller_groups=args.poller_groups,
        poller_memory_mb=args.poller_memory_mb,
        peak_workers=args.peak_workers,
        poller_hot_standby=args.poller_hot_standby,
        worker_min_pollers=args.worker_min_pollers,
        warm_write_units=warm,
    )
    inputs = PlanInputs(
        jobs=parse_count(args.jobs),
        runs_per_day=parse_count(args.runs_per_day),
        spike_jobs=parse_count(args.spike_jobs),
        spike_window_s=args.spike_window,
        spike_exact_fraction=args.spike_exact_fraction,
        table_warm_write_units=args.table_warm_write_units,
        partitions=args.partitions,
        worker_rate=args.worker_rate,
        poller_groups=args.poller_groups,  # the same groups share the spike's preload and cost the fixed part
    )
    plan = capacity_plan(inputs, stack)
    if args.url:
        start = datetime.now(UTC).replace(second=0, microsecond=0)
        load = client_from(args).request(
            "GET",
            "/v1/load",
            query={"from": start.isoformat(), "to": (start + timedelta(hours=24)).isoformat()},
        )
        minutes = {m["minute"]: m["runs"] for m in load["minutes"]}
        busiest = max(minutes.items(), key=lambda kv: kv[1], default=("-", 0))
        plan["measured_busiest_minute"] = {"minute": busiest[0], "runs": busiest[1]}
        plan["minutes_needing_prescale"] = [
            {"minute": m, "runs": n, "workers": w}
            for m, n, w in minutes_needing_prescale(minutes, args.baseline_workers, plan["worker_rate"])
        ]
    if args.json:
        print(json.dumps(plan))
        return
    for key, value in plan.items():
        if key in (
            "inputs",
            "warnings",
            "minutes_needing_prescale",
            "fixed_cost_quantities",
            "flags_for_the_spike",  # in the spike's warning
        ):
            continue
        if key == "fixed_cost_levers":
            print("levers on the fixed cost (estimated; each after the ones above it):")
            for lever in value:
                name = lever["lever"].replace("_", " ")
                print(f"  lever: {name:32} saves {lever['saves_usd']:>7} -> {lever['leaves_usd']}")
            continue
        if key == "spike_on_the_aws_model":
            print("the spike on the AWS model (bench midnight --simulate's, by arithmetic):")
            for name, figure in value.items():
                if name == "spike_cost_usd":  # one midnight's own bill, part by part
                    parts = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in figure.items() if k != "total")
                    figure = f"{figure['total']} ({parts})"
                print(f"  {name.replace('_', ' '):38} {figure}")
            continue
        if key == "monthly_fixed_parts":
            for part, usd in value.items():
                print(f"  {part.replace('_', ' '):38} {usd}")
            continue
        print(f"{key.replace('_', ' '):40} {value}")
    for minute in plan.get("minutes_needing_prescale", []):
        print(
            f"pre-scale: {minute['minute']} UTC has {minute['runs']} due runs -> {minute['workers']} workers"
        )
    for warning in plan["warnings"]:
        print(f"warning: {warning}")


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="duetime", description="A distributed job scheduler.")
    commands = root.add_subparsers(dest="command", required=True)

    def api_flags(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--url", help="API base URL (or DUETIME_URL; default http://127.0.0.1:8080)")
        p.add_argument("--token", help="API token (or DUETIME_TOKEN)")
        p.add_argument("--json", action="store_true", help="print JSON for scripts")
        return p

    local = commands.add_parser("local", help="the whole system on this machine (emulators, API, workers)")
    local.add_argument("--port", type=int, default=8080)
    local.add_argument("--workers", type=int, default=4, help="worker loops (SQS event source batches)")

    jobs = commands.add_parser("jobs", help="create and manage jobs").add_subparsers(
        dest="action", required=True
    )
    create = api_flags(jobs.add_parser("create", help="register a job"))
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
    listing = api_flags(jobs.add_parser("list", help="list your jobs"))
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--cursor")
    listing.add_argument("--label", help="only jobs with this label, KEY:VALUE")
    listing.add_argument("--search", help="only jobs with a name word starting with each of these words")
    history = api_flags(jobs.add_parser("history", help="a job's changes (90 days), newest first"))
    history.add_argument("id")
    history.add_argument("--limit", type=int, default=50)
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

    team = commands.add_parser("team", help="your team: limits, usage, AWS role").add_subparsers(
        dest="action", required=True
    )
    api_flags(team.add_parser("show", help="your team's limits and usage, AWS role and external id"))
    api_flags(
        team.add_parser(
            "set-aws-role", help="the IAM role (duetime-target-...) your AWS targets are called under"
        )
    ).add_argument("role_arn")
    api_flags(
        team.add_parser("remove-aws-role", help="remove it: AWS targets without a role of their own fail")
    )
    tokens = commands.add_parser("tokens", help="your team's API tokens and their scopes").add_subparsers(
        dest="action", required=True
    )
    api_flags(tokens.add_parser("list", help="your team's tokens: id, name, scope (admin)"))
    api_flags(tokens.add_parser("current", help="the token you are using: id, name, scope"))
    issue = api_flags(tokens.add_parser("create", help="issue a named token with a scope; prints it once"))
    issue.add_argument("name", help="unique in your team, e.g. ci-deploy")
    issue.add_argument(
        "--scope",
        required=True,
        choices=[str(scope) for scope in TokenScope],
        help="read: GETs; operate: also trigger, backfill, pause, resume, retry, cancel; admin: everything",
    )
    revoke = api_flags(tokens.add_parser("revoke", help="revoke one token by id (tok_...): refused at once"))
    revoke.add_argument("token_id")
    runs = commands.add_parser("runs", help="a job's runs").add_subparsers(dest="action", required=True)
    run_list = api_flags(runs.add_parser("list", help="runs of a job, newest first"))
    run_list.add_argument("id", help="job id")
    run_list.add_argument("--limit", type=int, default=20)
    run_list.add_argument("--cursor")
    api_flags(runs.add_parser("get", help="one run")).add_argument("id", help="run id")
    api_flags(runs.add_parser("retry", help="send a failed or dead run back to the queue")).add_argument("id")
    api_flags(runs.add_parser("cancel", help="cancel a queued, waiting or running run")).add_argument("id")

    add_team_commands(commands)

    deployed = commands.add_parser(
        "deployed-local", help="the stack deployed into LocalStack (make deploy-local)"
    ).add_subparsers(dest="action", required=True)
    ready = deployed.add_parser(
        "ready", help="create the first team, wait until a job can be created, print the ready line"
    )
    ready.add_argument("--outputs", required=True, help="the outputs file cdklocal deploy wrote")
    ready.add_argument("--endpoint", required=True, help="LocalStack's URL, e.g. http://127.0.0.1:4610")
    ready.add_argument("--team", default="local")
    ready.add_argument("--json", action="store_true")

    bench = commands.add_parser("bench", help="benchmarks on the local stack (figures, not tests)")
    benches = bench.add_subparsers(dest="action", required=True)
    spike = benches.add_parser("spike", help="N jobs due in the same minute")
    spike.add_argument("--jobs", type=int, required=True)
    spike.add_argument("--exact-fraction", type=float, default=0.0)
    spike.add_argument("--jitter", type=int, default=0, help="jitter window in seconds (0: all at :00)")
    spike.add_argument("--workers", type=int, default=16, help="worker loops")
    spike.add_argument("--chart", help="write a PNG of starts/s and lateness here")
    spike.add_argument(
        "--shared-cores",
        action="store_true",
        help="leave DynamoDB Local on every core, shared with the poller, workers and LocalStack "
        "(by default it gets cores of its own, as DynamoDB does on AWS)",
    )
    deployed_local_arguments(
        spike,
        "exact jobs at one second on the stack make deploy-local deploys, the pollers' fan-out on and then "
        "off (--exact-fraction, --jitter, --workers and --chart do not apply)",
    )
    spike.add_argument(
        "--holder-rows",
        type=int,
        default=300,
        help="with --deployed-local: the rows of a minute a group's holder claims alone in the fan_out mode",
    )
    spike.add_argument(
        "--modes",
        type=spike_modes,
        default=["fan_out", "alone"],
        help="with --deployed-local: fan_out, alone or both, comma-separated, run in that order",
    )
    spike.add_argument("--json", action="store_true")
    versus = benches.add_parser(
        "versus",
        help="duetime's spike, then APScheduler 4 + PostgreSQL's (../shared/peers), same N, and the ratio",
    )
    versus.add_argument("--jobs", type=int, required=True)
    versus.add_argument(
        "--processes",
        type=int,
        default=2,
        help="the peer's scheduler processes and duetime's worker processes",
    )
    versus.add_argument("--workers", type=int, default=16, help="duetime's worker loops, over all processes")
    versus.add_argument("--peer-dir", help="the peers' directory (default: <repo>/../shared/peers)")
    versus.add_argument("--json", action="store_true")
    idle = benches.add_parser(
        "idle", help="what an installation with nothing due spends: pollers' requests, units, invocations"
    )
    idle.add_argument("--minutes", type=float, default=5.0, help="minutes measured, after a warm-up")
    idle.add_argument("--groups", type=int, default=4, help="poller groups over the 64 partitions")
    idle.add_argument("--run-seconds", type=float, default=135.0, help="each poller invocation's run")
    idle.add_argument(
        "--hot-standby",
        action="store_true",
        help="keep the next invocation waiting to the end of each run (the stack's poller_hot_standby)",
    )
    idle.add_argument(
        "--awake",
        action="store_true",
        help="holders serve their whole minute even when quiet (the stack's poller_rest_when_quiet off)",
    )
    idle.add_argument("--json", action="store_true")
    runcpu = benches.add_parser(
        "runcpu", help="client CPU of a run's path alone: the poller's claims and the worker's batches"
    )
    runcpu.add_argument("--jobs", type=int, default=2000)
    runcpu.add_argument(
        "--target",
        choices=["http", "sqs"],
        default="http",
        help="what runs call: HTTP, or an SQS queue (AWS)",
    )
    runcpu.add_argument(
        "--runs", type=int, default=1, help="measure N times (fresh tables each) and print medians"
    )
    runcpu.add_argument(
        "--save-calibration",
        action="store_true",
        help="save the medians as the CPU the midnight model and plan charge (bench/calibration.json)",
    )
    runcpu.add_argument("--json", action="store_true")
    precision = benches.add_parser("precision", help="exact jobs spread over ordinary minutes")
    precision.add_argument("--jobs", type=int, required=True)
    precision.add_argument("--minutes", type=int, default=2)
    precision.add_argument("--workers", type=int, default=8)
    deployed_local_arguments(
        precision, "on the stack make deploy-local deploys, pollers invoked by its EventBridge rules"
    )
    precision.add_argument("--json", action="store_true")

    preload = benches.add_parser(
        "preload", help="memory and load time of the minute preload for N rows due in one minute"
    )
    preload.add_argument("--jobs", type=int, required=True)
    preload.add_argument("--json", action="store_true")

    from duetime.bench.midnight import add_midnight_flags

    add_midnight_flags(
        benches.add_parser(
            "midnight",
            help="the midnight spike at full scale: the real poller and worker on the in-memory twin, "
            "AWS modelled (virtual time)",
        )
    )

    chaos = commands.add_parser("chaos", help="run jobs under injected faults and check every promise")
    chaos.add_argument("--seed", type=int, default=1)
    chaos.add_argument("--minutes", type=float, default=3.0)
    chaos.add_argument("--json", action="store_true")

    plan = commands.add_parser("plan", help="capacity and cost arithmetic for a workload")
    plan.add_argument("--jobs", default="10M")
    plan.add_argument("--runs-per-day", default="20M")
    plan.add_argument("--spike-jobs", default="500k")
    plan.add_argument("--spike-window", type=int, default=60, help="seconds the spike's runs may start in")
    plan.add_argument("--partitions", type=int, default=64)
    plan.add_argument(
        "--spike-exact-fraction",
        type=float,
        default=0.05,
        help="with --spike-window past 60 s: the share of the spike due at its first second (no jitter)",
    )
    plan.add_argument(
        "--table-warm-write-units",
        type=float,
        default=4000.0,
        help="write units a second every table and index takes at least: a new on-demand table's 4,000, or "
        "what all have grown to",
    )
    plan.add_argument(
        "--warm-write-units",
        default="",
        help="the stack's warm_write_units, as -c takes it (e.g. runs:26000,jobs/due:17000): names given "
        "replace the stack's defaults (duetime.warm_throughput), 0 for none",
    )
    plan.add_argument(
        "--worker-rate",
        type=float,
        default=None,
        help="runs one worker starts per second (default: the AWS model's estimate, as bench midnight's)",
    )
    plan.add_argument(
        "--baseline-workers", type=int, default=10, help="with --url: workers without pre-scaling"
    )
    plan.add_argument(
        "--poller-groups", type=int, default=4, help="the stack's poller groups (partition_groups)"
    )
    plan.add_argument("--poller-memory-mb", type=int, default=512, help="each poller function's memory")
    plan.add_argument(
        "--poller-hot-standby",
        action="store_true",
        help="the stack's poller_hot_standby: the next poller invocation waits out each run (twice the time)",
    )
    plan.add_argument(
        "--peak-workers", type=int, default=90, help="the stack's provisioned workers before midnight"
    )
    plan.add_argument(
        "--worker-min-pollers",
        type=int,
        default=0,
        help="the stack's worker_min_pollers: its event source in provisioned mode (0: standard mode)",
    )
    plan.add_argument("--url", help="read the real due histogram of a running duetime (/v1/load)")
    plan.add_argument("--token")
    plan.add_argument("--json", action="store_true")

    preview = commands.add_parser("preview", help="next run times of a schedule (offline)")
    add_schedule_flags(preview)
    preview.add_argument("--after", help="ISO-8601 instant (default now)")
    preview.add_argument("--count", type=int, default=5)
    preview.add_argument("--json", action="store_true")
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "local":
            from duetime.local import run_local

            return run_local(args.port, args.workers)
        if args.command == "chaos":
            return run_chaos(args)
        {
            "jobs": run_jobs,
            "runs": run_runs,
            "team": run_team,
            "tokens": run_tokens,
            "preview": run_preview,
            "teams": run_teams,
            "deployed-local": run_deployed_local,
            "bench": run_bench,
            "plan": run_plan,
        }[args.command](args)
        return 0
    except UsageError as exc:
        print(f"duetime: {exc}", file=sys.stderr)
        return 2
    except ApiFailure as exc:
        print(f"duetime: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # one line for people; the API's own errors are above
        print(f"duetime: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
