"""``duetime local``, ``deployed-local``, ``bench`` and ``chaos``: the system on this machine, and the
benchmarks and fault runs on it (figures, not tests; the benchmarks' code is imported only when one runs)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from duetime.cli.common import show


def add_commands(commands: Any) -> None:
    local = commands.add_parser("local", help="the whole system on this machine (emulators, API, workers)")
    local.set_defaults(run=run_local)
    local.add_argument("--port", type=int, default=8080)
    local.add_argument("--workers", type=int, default=4, help="worker loops (SQS event source batches)")
    group = commands.add_parser(
        "deployed-local", help="the stack deployed into LocalStack (make deploy-local)"
    )
    group.set_defaults(run=run_deployed_local)
    deployed = group.add_subparsers(dest="action", required=True)
    ready = deployed.add_parser(
        "ready", help="create the first team, wait until a job can be created, print the ready line"
    )
    ready.add_argument("--outputs", required=True, help="the outputs file cdklocal deploy wrote")
    ready.add_argument("--endpoint", required=True, help="LocalStack's URL, e.g. http://127.0.0.1:4610")
    ready.add_argument("--team", default="local")
    ready.add_argument("--json", action="store_true")
    benches = add_bench_commands(commands)
    add_more_benches(benches)
    chaos = commands.add_parser("chaos", help="run jobs under injected faults and check every promise")
    chaos.set_defaults(run=run_chaos)
    chaos.add_argument("--seed", type=int, default=1)
    chaos.add_argument("--minutes", type=float, default=3.0)
    chaos.add_argument("--json", action="store_true")


def run_local(args: argparse.Namespace) -> int:
    from duetime.local.system import run_local as run

    return run(args.port, args.workers)


def add_bench_commands(commands: Any) -> Any:
    """``bench spike`` and ``bench versus``; the group's subparsers, for the others."""
    bench = commands.add_parser("bench", help="benchmarks on the local stack (figures, not tests)")
    bench.set_defaults(run=run_bench)
    benches = bench.add_subparsers(dest="action", required=True)
    spike = benches.add_parser("spike", help="N jobs due in the same minute")
    spike.add_argument("--jobs", type=int, required=True)
    spike.add_argument("--exact-fraction", type=float, default=0.0)
    spike.add_argument("--jitter", type=int, default=0, help="jitter window in seconds (0: all at :00)")
    spike.add_argument("--workers", type=int, default=16, help="worker loops")
    spike.add_argument("--chart", help="write a PNG of starts/s and lateness here")
    spike.add_argument(
        "--teams", type=int, default=1, help="teams the jobs are dealt to, round-robin (their slots' writes)"
    )
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
    return benches


def add_more_benches(benches: Any) -> None:
    """``bench idle`` and ``runcpu``; then the rest."""
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
        help="save the medians as the CPU the midnight model and plan charge (capacity/calibration.json)",
    )
    runcpu.add_argument("--json", action="store_true")
    add_precision_preload_midnight(benches)


def add_precision_preload_midnight(benches: Any) -> None:
    """``bench precision``, ``preload`` and ``midnight``."""
    precision = benches.add_parser("precision", help="exact jobs spread over ordinary minutes")
    precision.add_argument("--jobs", type=int, required=True)
    precision.add_argument("--minutes", type=float, default=2.0)
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

    from duetime_bench.midnight import add_midnight_flags

    add_midnight_flags(
        benches.add_parser(
            "midnight",
            help="the midnight spike at full scale: the real poller and worker on the in-memory twin, "
            "AWS modelled (virtual time)",
        )
    )
    from duetime_bench.regions import add_regions_flags

    add_regions_flags(
        benches.add_parser(
            "regions",
            help="a region lost mid-minute and the warm standby promoted (docs/regions.md): two copies "
            "of the in-memory twin, replicated after a lag (virtual time)",
        )
    )


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
    from duetime_bench.deployed_spike import MODES

    modes = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise argparse.ArgumentTypeError(f"{', '.join(unknown) or 'none'}: the modes are {', '.join(MODES)}")
    return modes


def run_deployed_local(args: argparse.Namespace) -> None:
    from pathlib import Path

    from duetime.local.deployed import DeployedStack, team_token, wait_until_jobs_can_be_created

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
        from duetime_bench.idle import run_idle

        idle = run_idle(
            args.minutes, args.groups, args.run_seconds, hot_standby=args.hot_standby, rest=not args.awake
        )
        print(json.dumps(idle) if args.json else "\n".join(f"{k:36} {v}" for k, v in idle.items()))
        return
    if args.action == "spike" and args.deployed_local:
        from duetime_bench.deployed_spike import run_deployed_spike

        result = run_deployed_spike(args.jobs, args.port, args.redeploy, args.holder_rows, args.modes)
    elif args.action == "spike":
        from duetime_bench.spike import run_spike

        result = run_spike(
            args.jobs,
            args.exact_fraction,
            args.jitter,
            args.workers,
            chart=args.chart,
            own_cores=not args.shared_cores,
            teams=args.teams,
        )
    elif args.action == "midnight":
        from duetime_bench.midnight import run_midnight_args

        result = run_midnight_args(args)
    elif args.action == "regions":
        from duetime_bench.regions import run_regions_args

        result = run_regions_args(args)
    elif args.action == "preload":
        from duetime_bench.preload import run_preload

        result = run_preload(args.jobs)
    elif args.action == "runcpu":
        from duetime_bench.run_cpu import run_cpu, run_cpu_calibrated

        if args.runs > 1 or args.save_calibration:
            if args.target != "http":
                raise SystemExit("--runs and --save-calibration measure the HTTP path (the model's)")
            result = run_cpu_calibrated(args.jobs, args.runs, args.save_calibration)
        else:
            result = run_cpu(args.jobs, args.target)
    elif args.deployed_local:
        from duetime_bench.deployed import run_deployed_precision

        result = run_deployed_precision(args.jobs, args.minutes, args.port, args.redeploy)
    else:
        from duetime_bench.precision import run_precision

        result = run_precision(args.jobs, args.minutes, args.workers)
    if args.json:
        print(json.dumps(result))
    else:
        show(result, False)


def run_versus_bench(args: argparse.Namespace) -> None:
    """duetime's spike, then the APScheduler 4 + PostgreSQL peer's: both figures and their ratio (a peer that
    cannot run raises PeerUnavailable: one line on stderr, exit 1, no figure compared)."""
    from pathlib import Path

    from duetime_bench.versus import describe, run_versus

    peer_dir = Path(args.peer_dir) if args.peer_dir else None
    result = run_versus(args.jobs, args.processes, args.workers, peer_dir)
    print(json.dumps(result) if args.json else describe(result))


def run_chaos(args: argparse.Namespace) -> int:
    from duetime_bench.chaos import run_chaos as chaos

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
