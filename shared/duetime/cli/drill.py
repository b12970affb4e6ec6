"""``duetime drill upgrade``: an upgrade, rollback and roll forward of the stack deployed in LocalStack, in
place, while jobs are due (RELIABILITY.md, "An upgrade drill"); the drill's code is imported only when it
runs (duetime_bench.drill)."""

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
