"""``duetime drill upgrade``: an upgrade, rollback and roll forward of the stack deployed in LocalStack, in
place, while jobs are due (RELIABILITY.md, "An upgrade drill"); ``duetime drill restore``: a restore of the
tables from a snapshot on the local stack (docs/guide/operations.md, "Restore"). A drill's code is imported
only when it runs (duetime_bench.drill)."""

from __future__ import annotations

import argparse
import json
from typing import Any


def add_commands(commands: Any) -> None:
    drill = commands.add_parser(
        "drill", help="drills on the stack deployed in LocalStack (figures, not tests)"
    )
    drills = drill.add_subparsers(dest="action", required=True)
    upgrade = drills.add_parser(
        "upgrade",
        help="deploy an older release, then update in place to this checkout, back, forward, and finalize, "
        "while jobs are due; report what was lost, repeated and late",
    )
    upgrade.set_defaults(run=run_upgrade)
    upgrade.add_argument(
        "--from", dest="from_ref", required=True, help="the older release: a git ref (v0.1.0)"
    )
    upgrade.add_argument(
        "--port", type=int, help="the deployed-stack LocalStack: DUETIME_DEPLOYED_PORT or 4610"
    )
    upgrade.add_argument("--dwell", type=float, default=75.0, help="seconds each phase runs after its deploy")
    upgrade.add_argument(
        "--old-seconds", type=float, default=100.0, help="seconds the older release runs first"
    )
    upgrade.add_argument(
        "--settle",
        type=float,
        default=100.0,
        help="seconds after the cut-off for calls in flight and retries",
    )
    upgrade.add_argument(
        "--redelivery",
        type=float,
        default=720.0,
        help="at most this long after the settle, wait for the queue deadline of fires claimed but never "
        "sent (re-sent 10 minutes after their claim); 0: do not wait",
    )
    upgrade.add_argument("--json", action="store_true")
    restore = drills.add_parser(
        "restore",
        help="on the local stack (DynamoDB Local, the engine in this process): snapshot the tables, run on, "
        "restore the snapshot into new tables, `duetime restore` them, run again; report what was lost, "
        "left behind the read marks and repeated",
    )
    restore.set_defaults(run=run_restore)
    restore.add_argument(
        "--before", type=float, default=60.0, help="seconds the jobs run before the snapshot"
    )
    restore.add_argument(
        "--between", type=float, default=120.0, help="seconds from the snapshot to the restore"
    )
    restore.add_argument("--after", type=float, default=120.0, help="seconds the jobs run on the new tables")
    restore.add_argument("--settle", type=float, default=30.0, help="seconds after the cut-off for calls")
    restore.add_argument(
        "--keep",
        default="control",
        help="tables copied as they are at the restore instead of from the snapshot: comma-separated of "
        "runs, control; 'none' for a restore of all three (default: control)",
    )
    restore.add_argument(
        "--no-rebuild", action="store_true", help="skip `duetime restore`: show the failure it fixes"
    )
    restore.add_argument(
        "--deployed",
        action="store_true",
        help="on the stack deployed in LocalStack: the restored tables adopted by an in-place deploy",
    )
    restore.add_argument(
        "--port", type=int, help="with --deployed, the LocalStack: DUETIME_DEPLOYED_PORT or 4610"
    )
    restore.add_argument("--json", action="store_true")


def run_upgrade(args: argparse.Namespace) -> int:
    from duetime_bench.drill.upgrade import report, run_upgrade_drill

    result = run_upgrade_drill(
        args.from_ref,
        args.port,
        dwell=args.dwell,
        old_seconds=args.old_seconds,
        settle=args.settle,
        redelivery=args.redelivery,
    )
    print(json.dumps(result) if args.json else report(result))
    return 1 if result["lost"] else 0


def run_restore(args: argparse.Namespace) -> int:
    from duetime_bench.drill.restore import report, run_restore_drill

    keep = () if args.keep == "none" else tuple(t for t in args.keep.split(",") if t)
    if set(keep) - {"runs", "control"}:
        raise SystemExit("duetime drill restore: --keep takes runs, control or none")
    if args.deployed:
        if args.no_rebuild:
            raise SystemExit("duetime drill restore: --no-rebuild is for the local stack only")
        from duetime_bench.drill.restore_deployed import run_deployed_restore_drill

        result = run_deployed_restore_drill(
            args.port, args.before, args.between, args.after, args.settle, keep=keep
        )
    else:
        result = run_restore_drill(
            args.before, args.between, args.after, args.settle, keep=keep, rebuild=not args.no_rebuild
        )
    print(json.dumps(result) if args.json else report(result))
    return 1 if result["lost"] or result["behind_mark"] else 0
