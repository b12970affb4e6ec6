"""``duetime system ...``: the installation across releases (docs/guide/upgrading.md). Run by the operator
against the tables directly, as ``duetime teams`` is: the deployed stack's (``--stack Duetime``, found by its
CloudFormation outputs), the ones ``DUETIME_*_TABLE`` name, or ``duetime local``'s (``--local``).

- ``installation``: the finalized format, every release that has run against the tables (first and last
  seen), and whether this release may finalize now.
- ``finalize``: this release's format becomes the one written; refused (exit 1, the reason on stderr) while
  an older release may still run, unless ``--force``.
- ``quarantine``: the job rows pollers could not read (RELIABILITY.md, one bad row is one bad job).
- ``alarms``: each alarm's state (OK or ALARM), its latest value and since when: CloudWatch's for
  ``--stack``; with ``--local``, the reconciler's alarms evaluated over its reports in the tables.
- ``pollers|workers|reconciler stop|start|status``: stop a part of the engine as AWS stops a function (its
  reserved concurrency 0: every invocation throttled), start it again (the template's reserved concurrency
  back), or say whether it is stopped; ``--local`` reaches ``duetime local``'s functions through its gateway
  (``--url``, default ``DUETIME_URL`` or http://127.0.0.1:8080).
- ``deploy-check --release R``: exit 0 when release R may be deployed over the installation, else 1 with
  why (a skipped finalize, a rollback past one). ``make deploy`` and the local deploy run it first.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from duetime import build_info
from duetime.domain.alarms import AlarmReading
from duetime.domain.timeutil import iso_z
from duetime.ports import QuarantineRecord


def add_commands(commands: Any) -> None:
    group = commands.add_parser("system", help="the installation across releases: upgrade, finalize")
    group.set_defaults(run=run_system)
    actions = group.add_subparsers(dest="action", required=True)

    def action(name: str, help: str) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = actions.add_parser(name, help=help)
        where = sub.add_mutually_exclusive_group()
        where.add_argument("--stack", help="the deployed stack's name (its outputs name the tables)")
        where.add_argument("--local", action="store_true", help="the tables of `duetime local`")
        sub.add_argument("--json", action="store_true")
        return sub

    action("installation", "the finalized format and the releases that have run against the tables")
    finalize = action("finalize", "write this release's stored format from now on (after an upgrade)")
    finalize.add_argument(
        "--force", action="store_true", help="even while an older release may still run (not for rollback)"
    )
    action("quarantine", "the job rows pollers could not read (kept 30 days): job, due key, error, since")
    action("alarms", "each alarm's state (OK/ALARM), latest value and since when")
    for part, what in (
        ("pollers", "the pollers (nothing is claimed: due times wait, then follow each job's misfire)"),
        ("workers", "the workers (claimed runs wait in the queue)"),
        ("reconciler", "the reconciler (nothing watches the schedule: the heartbeat alarm fires)"),
    ):
        switch = action(part, f"stop, start or show {what}")
        switch.add_argument("switch", choices=("stop", "start", "status"))
        switch.add_argument("--url", help="duetime local's URL, with --local (DUETIME_URL; :8080)")
    check = action("deploy-check", "may a release be deployed over the installation? (exit 0 or 1)")
    check.add_argument("--release", default=build_info.version, help="the release to deploy (default: this)")
    check.add_argument(
        "--assembly", help="the cloud assembly about to be deployed (cdk.out): its stack's name, for --stack"
    )


def run_system(args: argparse.Namespace) -> int:
    from duetime import wiring
    from duetime.domain.clock import SystemClock
    from duetime.local.system import local_environment
    from duetime.upgrades import operations

    if args.local:
        local_environment()
    if getattr(args, "assembly", None):
        args.stack = assembly_stack(Path(args.assembly))
    if args.action == "alarms":
        return _alarms(args, wiring.alarm_readings(wiring.settings(), args.stack))
    if args.action in ("pollers", "workers", "reconciler"):
        url = args.url or os.environ.get("DUETIME_URL") or "http://127.0.0.1:8080"
        return _switch(args, wiring.engine_functions(args.action, args.stack, None if args.stack else url))
    record = wiring.installation_record(wiring.settings(), args.stack)
    now = SystemClock().now()
    if record is None:  # no stack of that name: a first deploy
        return _answer(args, {"stack": args.stack, "exists": False, "deploy": "allowed"}, None)
    if args.action == "quarantine":
        return _quarantine(args, wiring.quarantine_record(wiring.settings(), args.stack))
    if args.action == "installation":
        return _answer(args, operations.describe(record.read_installation(), build_info.version, now), None)
    if args.action == "deploy-check":
        refusal = operations.deploy_check(record, args.release)
        return _answer(
            args, {"release": args.release, "deploy": "refused" if refusal else "allowed"}, refusal
        )
    done = operations.finalize(record, build_info.version, now, force=args.force)
    answer = {"release": build_info.version, "finalized": done.done, "writes_format": done.stored_format}
    return _answer(args, answer, done.refusal)


def _switch(args: argparse.Namespace, functions: Any) -> int:
    """Stop, start or show a part of the engine (``EngineFunctions``); one line per function (or JSON)."""
    try:
        states = {"stop": functions.stop, "start": functions.start, "status": functions.states}[args.switch]()
    except (RuntimeError, LookupError) as exc:
        print(f"duetime system {args.action} {args.switch}: {exc}", file=sys.stderr)
        return 1
    rows = [{"function": s.name, "stopped": s.stopped, "reserved_concurrency": s.reserved} for s in states]
    if args.json:
        print(json.dumps(rows))
    for row in [] if args.json else rows:
        reserved = row["reserved_concurrency"]
        limit = "no reserved concurrency" if reserved is None else f"reserved concurrency {reserved}"
        print(f"{'stopped' if row['stopped'] else 'running':<8} {row['function']}  ({limit})")
    return 0


def _quarantine(args: argparse.Namespace, record: QuarantineRecord | None) -> int:
    kept = record.quarantined_rows() if record is not None else []
    rows = [
        {
            "job_id": q.row.job_id,
            "partition": q.row.partition,
            "bucket": q.row.bucket,
            "due_key": q.row.due_key,
            "error": q.row.error,
            "first_seen": iso_z(q.first_seen),
        }
        for q in kept
    ]
    if args.json:
        print(json.dumps(rows))
    elif not rows:
        print("no unreadable job rows")
    for row in [] if args.json else rows:
        print(f"{row['first_seen']}  job {row['job_id']}  due {row['due_key']}  {row['error']}")
    return 0


def _alarms(args: argparse.Namespace, readings: list[AlarmReading]) -> int:
    rows = [
        {
            "alarm": r.name,
            "state": r.state.value,
            "value": r.value,
            "since": iso_z(r.since) if r.since else None,
            "description": r.description,
            **({"cloudwatch_name": r.cloudwatch_name} if r.cloudwatch_name else {}),
        }
        for r in readings
    ]
    if args.json:
        print(json.dumps(rows))
        return 0
    for row in rows:
        since = f"since {row['since']}" if row["since"] else "since before the reports kept"
        value = "-" if row["value"] is None else f"{row['value']:g}"
        print(f"{row['state']:<17} {row['alarm']:<24} value {value:<8} {since}  ({row['description']})")
    return 0


def assembly_stack(assembly: Path) -> str:
    """The name of the one CloudFormation stack a cloud assembly holds (its ``manifest.json``)."""
    artifacts = json.loads((assembly / "manifest.json").read_text())["artifacts"]
    stacks = [
        artifact.get("properties", {}).get("stackName", name)
        for name, artifact in artifacts.items()
        if artifact.get("type") == "aws:cloudformation:stack"
    ]
    if len(stacks) != 1:
        raise SystemExit(f"duetime system deploy-check: {assembly} holds {len(stacks)} stacks, not one")
    return str(stacks[0])


def _answer(args: argparse.Namespace, data: dict[str, Any], refusal: str | None) -> int:
    if args.json:
        print(json.dumps({**data, **({"refusal": refusal} if refusal else {})}))
    else:
        for key, value in data.items():
            print(f"{key}: {json.dumps(value) if isinstance(value, dict | list) else value}")
    if refusal:
        print(f"duetime system {args.action}: {refusal}", file=sys.stderr)
        return 1
    return 0
