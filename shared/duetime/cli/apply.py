"""``duetime apply -f`` and ``duetime export``: a team's jobs as code (``duetime.domain.job_files``).

Exit codes fit CI: 0 applied or nothing to do; 2 a plan with changes under ``--dry-run --exit-code``; 1 an
error (a file that cannot be applied, drift without ``--force``, a write the API refused: what was applied
before it is listed, and nothing of the refused job is written).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from duetime.cli.common import UsageError, api_flags, client_from
from duetime.client import ApiFailure, DuetimeClient
from duetime.domain.job_files import (
    MANAGED_FIELDS,
    SECRET_PREFIX,
    VARIABLE_NAME,
    Action,
    DesiredJob,
    FileProblem,
    JobFile,
    Plan,
    PlanItem,
    desired_jobs,
    make_plan,
    read_job_file,
)
from duetime.domain.url_secrets import REDACTED

FILE_SUFFIXES = (".yaml", ".yml", ".json")
_MARKS = {
    Action.CREATE: "+",
    Action.UPDATE: "~",
    Action.UNCHANGED: "=",
    Action.DRIFT: "!",
    Action.DELETE: "-",
    Action.KEEP: ".",
}


def add_commands(commands: Any) -> None:
    apply = api_flags(commands.add_parser("apply", help="make the team's jobs what jobs files say"))
    apply.add_argument("-f", "--file", required=True, help="a jobs file (YAML or JSON) or a folder of them")
    apply.add_argument(
        "--prune", action="store_true", help="delete jobs of the files' managed_by they no longer name"
    )
    apply.add_argument(
        "--force", action="store_true", help="overwrite jobs edited elsewhere since the last apply"
    )
    apply.add_argument(
        "--secret-env",
        action="append",
        default=[],
        metavar="NAME",
        help=f"fill ${{NAME}} in header values from the environment too (repeatable; {SECRET_PREFIX}* "
        "variables are always filled, any other is an error)",
    )
    apply.add_argument("--yes", action="store_true", help="apply without asking")
    apply.add_argument("--dry-run", action="store_true", help="print the plan only")
    apply.add_argument(
        "--exit-code",
        action="store_true",
        help="with --dry-run: exit 2 when the plan has changes, 0 when not",
    )
    apply.set_defaults(run=run_apply)

    export = api_flags(commands.add_parser("export", help="write the team's jobs as a jobs file"))
    export.add_argument(
        "--managed-by", help="only the jobs of this managed_by (and the file's); default: all"
    )
    export.add_argument("-o", "--output", help="write here (default: stdout)")
    export.set_defaults(run=run_export)


# --- apply -----------------------------------------------------------------------------------------------


def job_files(path: str) -> list[tuple[JobFile, str]]:
    """The jobs files at ``path``: the file, or a folder's ``*.yaml``, ``*.yml`` and ``*.json`` by name."""
    root = Path(path)
    if root.is_dir():
        paths = sorted(p for p in root.iterdir() if p.suffix in FILE_SUFFIXES and p.is_file())
        if not paths:
            raise UsageError(f"{path}: no .yaml, .yml or .json file in it")
    elif root.is_file():
        paths = [root]
    else:
        raise UsageError(f"{path}: no such file or folder")
    return [(read_job_file(p.read_text(), str(p)), str(p)) for p in paths]


def run_apply(args: argparse.Namespace) -> int:
    if args.exit_code and not args.dry_run:
        raise UsageError("--exit-code goes with --dry-run")
    for name in args.secret_env:
        if not VARIABLE_NAME.fullmatch(name):
            raise UsageError(f"--secret-env {name!r}: not a variable name (letters, digits and _)")
    try:
        files = job_files(args.file)
        desired = desired_jobs(files, os.environ, datetime.now(UTC), frozenset(args.secret_env))
    except FileProblem as exc:
        print(f"duetime: {exc}", file=sys.stderr)
        return 1
    client = client_from(args)
    existing = [job.model_dump(mode="json") for job in client.jobs()]
    plan = make_plan(desired, existing, {file.managed_by for file, _ in files}, args.prune)
    print(render_plan(plan) if not args.json else json.dumps(plan_json(plan), indent=2))
    drifted = plan.of(Action.DRIFT)
    if drifted and not args.force:
        keys = ", ".join(item.key for item in drifted)
        print(
            f"duetime: {keys}: changed outside these files; --force overwrites (nothing applied)",
            file=sys.stderr,
        )
        return 1
    if args.dry_run:
        return 2 if args.exit_code and plan.changes else 0
    if not plan.changes:
        return 0
    if not args.yes and not _confirmed():
        print("nothing applied", file=sys.stderr)
        return 1
    return apply_plan(client, plan)


def _confirmed() -> bool:
    if not sys.stdin.isatty():
        raise UsageError("not a terminal to ask on: pass --yes to apply, or --dry-run")
    return input("apply these changes? [y/N] ").strip().lower() in {"y", "yes"}


def apply_plan(client: DuetimeClient, plan: Plan) -> int:
    """Write the plan's changes one job at a time, each only if the job is still as the plan read it
    (If-Match its ETag); stop at the first refusal, saying which and what was applied before it."""
    applied: list[str] = []
    for item in plan.changes:
        try:
            _write(client, item)
        except ApiFailure as exc:
            why = "changed since the plan was made (412)" if exc.status == 412 else str(exc)
            print(f"duetime: {item.key}: refused: {why}", file=sys.stderr)
            print(f"applied before it: {', '.join(applied) or 'nothing'}", file=sys.stderr)
            return 1
        applied.append(f"{item.action.value} {item.key}")
    print(f"applied: {len(applied)} change{'s' if len(applied) != 1 else ''}")
    return 0


def _write(client: DuetimeClient, item: PlanItem) -> None:
    if item.action is Action.DELETE:
        client.delete_job_by_key(item.key, if_match=item.etag)
        return
    assert item.desired is not None
    body = item.desired.model_dump(mode="json", exclude_none=True)
    client.put_job(item.key, body, if_match=item.etag if item.action is not Action.CREATE else None)


def render_plan(plan: Plan) -> str:
    lines = [_line(item) for item in plan.items]
    counts = {action: len(plan.of(action)) for action in Action}
    lines.append(
        f"{counts[Action.CREATE]} to create, {counts[Action.UPDATE]} to update, {counts[Action.DELETE]} to "
        f"delete, {counts[Action.UNCHANGED]} unchanged"
        + (f", {counts[Action.DRIFT]} drifted" if counts[Action.DRIFT] else "")
        + (f", {counts[Action.KEEP]} kept (not in the files; --prune deletes)" if counts[Action.KEEP] else "")
    )
    return "\n".join(lines)


def _line(item: PlanItem) -> str:
    head = f"{_MARKS[item.action]} {item.action.value:<9} {item.key}"
    notes = [item.why] if item.why else []
    if item.action in (Action.UPDATE, Action.DRIFT):
        notes += [f"{c.path}: {json.dumps(c.before)} -> {json.dumps(c.after)}" for c in item.changes]
    return head + ("".join(f"\n      {note}" for note in notes))


def plan_json(plan: Plan) -> list[dict[str, Any]]:
    return [
        {
            "action": item.action.value,
            "key": item.key,
            "job_id": item.job_id,
            "why": item.why or None,
            "changes": [{"path": c.path, "before": c.before, "after": c.after} for c in item.changes],
        }
        for item in plan.items
    ]


# --- export ----------------------------------------------------------------------------------------------


def run_export(args: argparse.Namespace) -> int:
    import yaml

    client = client_from(args)
    jobs = [job.model_dump(mode="json") for job in client.jobs()]
    chosen = [job for job in jobs if args.managed_by is None or job.get("managed_by") == args.managed_by]
    keyless = [job["id"] for job in chosen if not job.get("key")]
    if keyless:
        print(
            f"duetime: left out {len(keyless)} job(s) without a key (give each one with PATCH /v1/jobs/ID "
            f'{{"key": ...}}): {", ".join(keyless)}',
            file=sys.stderr,
        )
    exported = [exported_job(job) for job in chosen if job.get("key")]
    variables = sorted({v for job in exported for v in _variables(job)})
    document = {"managed_by": args.managed_by or "exported", "jobs": exported}
    text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    if variables:
        print(f"duetime: the file reads its secrets from: {', '.join(variables)}", file=sys.stderr)
    return 0


def exported_job(job: dict[str, Any]) -> dict[str, Any]:
    """A job as a jobs file holds it: its spec (fields at their default left out), each redacted header value
    a ``${DUETIME_SECRET_...}`` named after the job's key and the header (a variable apply fills)."""
    from duetime.domain.job_files import shown_spec

    spec = shown_spec(job)
    body = spec.model_dump(mode="json", exclude_defaults=True, exclude=set(MANAGED_FIELDS))
    body["key"] = spec.key
    headers = body.get("target", {}).get("headers")
    if headers:
        body["target"]["headers"] = {
            name: f"${{{_variable(spec.key or '', name)}}}" if value == REDACTED else value
            for name, value in headers.items()
        }
    return body


def _variable(key: str, header: str) -> str:
    return SECRET_PREFIX + re.sub(r"[^A-Z0-9]+", "_", f"{key}_{header}".upper()).strip("_")


def _variables(job: dict[str, Any]) -> list[str]:
    headers = job.get("target", {}).get("headers") or {}
    return [value[2:-1] for value in headers.values() if isinstance(value, str) and value.startswith("${")]


__all__ = ["DesiredJob", "add_commands", "apply_plan", "job_files", "render_plan"]
