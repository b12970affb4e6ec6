"""``duetime restore``: start an installation again on tables restored from a backup (point-in-time recovery
or an import), without stopping a job (docs/guide/operations.md, "Restore"). Run by the operator against the
tables directly, as ``duetime system`` is: the deployed stack's (``--stack``, after the deploy that adopts
the restored tables), the ones named here or by ``DUETIME_*_TABLE``, or ``duetime local``'s (``--local``).

It rebuilds the partitions' low-water marks from the restored jobs table (``duetime.scheduling.restore``)
and prints what it lowered and whether any due row is still behind its mark (exit 1 if one is). ``--check``
only reads and reports. Safe to run again, and while pollers run.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from duetime.scheduling.restore import MarkCheck, Rebuild


def add_commands(commands: Any) -> None:
    restore = commands.add_parser(
        "restore",
        help="start again on restored tables: rebuild the read marks so no due row is left unread",
    )
    restore.set_defaults(run=run_restore)
    where = restore.add_mutually_exclusive_group()
    where.add_argument("--stack", help="the deployed stack's name (its outputs name the tables)")
    where.add_argument("--local", action="store_true", help="the tables of `duetime local`")
    restore.add_argument("--jobs-table", help="the restored jobs table (default: DUETIME_JOBS_TABLE)")
    restore.add_argument("--runs-table", help="the runs table (default: DUETIME_RUNS_TABLE)")
    restore.add_argument("--control-table", help="the control table (default: DUETIME_CONTROL_TABLE)")
    restore.add_argument("--check", action="store_true", help="only report rows behind their marks")
    restore.add_argument("--json", action="store_true")


def run_restore(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from duetime import wiring
    from duetime.local.system import local_environment
    from duetime.scheduling.restore import check_marks, rebuild_marks

    if args.local:
        local_environment()
    names = wiring.operator_tables(wiring.settings(), args.stack)
    if names is None:
        raise SystemExit(f"duetime restore: no stack named {args.stack}")
    chosen = {"jobs": args.jobs_table, "runs": args.runs_table, "control": args.control_table}
    names = replace(names, **{table: name for table, name in chosen.items() if name})
    store, clock = wiring.restore_store(names)
    tables = {"jobs": names.jobs, "runs": names.runs, "control": names.control}
    if args.check:
        answer: dict[str, Any] = {"tables": tables, **_check(check_marks(store))}
        behind = answer["rows_behind"]
    else:
        rebuild = rebuild_marks(store, clock.now())
        answer = {"tables": tables, **_rebuilt(rebuild)}
        behind = rebuild.after.rows_behind
    if args.json:
        print(json.dumps(answer))
    else:
        for key, value in answer.items():
            print(f"{key}: {json.dumps(value) if isinstance(value, dict | list) else value}")
    return 1 if behind else 0


def _check(check: MarkCheck) -> dict[str, Any]:
    return {
        "due_rows": check.rows,
        "rows_behind": check.rows_behind,
        "behind": {f"{p:02d}": n for p, n in sorted(check.behind.items())},
    }


def _rebuilt(rebuild: Rebuild) -> dict[str, Any]:
    return {
        "due_rows": rebuild.after.rows,
        "rows_behind_before": rebuild.before.rows_behind,
        "lowered": {f"{p:02d}": mark for p, mark in sorted(rebuild.lowered.items())},
        "rows_behind": rebuild.after.rows_behind,
    }
