"""The ``duetime`` command. Today: ``duetime local``, the scheduler on one machine against the emulators."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from datetime import timedelta

import boto3

from duetime.adapters.alerts import StoredAlerts
from duetime.adapters.http_target import HttpTargetCaller
from duetime.adapters.sqs import SqsConsumer, SqsRunQueue
from duetime.demo_target import DemoTargetServer
from duetime.jobs import create_job
from duetime.local import EventSourceMapping, ensure_resources, start_threads
from duetime.models import Team
from duetime.poller import Poller
from duetime.settings import Settings
from duetime.timeutil import iso_z
from duetime.wiring import make_store, make_store_clock, poller_config, worker_config
from duetime.worker import Worker, WorkReport

DEV_TEAM = Team(team_id="dev", max_concurrency=50, signing_secret="dev-signing-secret")


def _local(args: argparse.Namespace) -> int:
    os.environ.setdefault("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:8000")
    os.environ.setdefault("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:4566")
    for name, value in (
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ):
        os.environ.setdefault(name, value)
    session = boto3.session.Session()
    dynamodb, sqs = session.client("dynamodb"), session.client("sqs")
    settings = ensure_resources(Settings.from_env(dict(os.environ)), dynamodb, sqs)
    store = make_store(settings, dynamodb)
    clock = make_store_clock(store)
    queue = SqsRunQueue(sqs, settings.run_queue_url)
    alerts = StoredAlerts(store)
    store.put_team(DEV_TEAM)

    target = DemoTargetServer(port=args.target_port).start()
    if not args.no_demo_job:
        job = create_job(
            store,
            DEV_TEAM.team_id,
            {
                "name": "demo: every minute",
                "schedule": {"cron": "* * * * *", "timezone": args.timezone},
                "target": {"url": target.url, "body": '{"hello": "duetime"}'},
                "jitter_seconds": 10,
            },
            clock.now(),
        )
        first = iso_z(job.state.next_fire_at) if job.state.next_fire_at else "never"
        print(f"demo job {job.id}: cron '* * * * *' in {args.timezone}, first run at {first}")

    def show(report: WorkReport) -> None:
        late = (
            f" late {report.start_lateness_seconds:.1f}s" if report.start_lateness_seconds is not None else ""
        )
        print(
            f"run {report.run_id} attempt {report.attempt}: {report.outcome.value}"
            f" (HTTP {report.status_code}){late}",
            flush=True,
        )

    poller = Poller(store, store, queue, alerts, clock, poller_config(settings))
    consumer = SqsConsumer(sqs, settings.run_queue_url)
    mappings = [
        EventSourceMapping(
            consumer,
            Worker(
                store,
                store,
                queue,
                alerts,
                HttpTargetCaller(allow_private=True),
                clock,
                worker_config(settings),
            ),
            on_report=show,
        )
        for _ in range(args.workers)
    ]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threads = start_threads(poller, mappings, stop, interval=settings.poll_interval_seconds)
    print(
        f"duetime local ready: demo target={target.url} calls=http://127.0.0.1:{target.server_address[1]}"
        f"/demo/calls workers={args.workers}",
        flush=True,
    )
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        stop.set()
    print("stopping...", flush=True)
    for thread in threads:
        thread.join(timeout=max(5.0, timedelta(seconds=settings.lease_seconds).total_seconds()))
    target.shutdown()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="duetime", description="A distributed job scheduler.")
    commands = parser.add_subparsers(dest="command", required=True)
    local = commands.add_parser(
        "local", help="run the poller and workers against DynamoDB Local + LocalStack"
    )
    local.add_argument("--workers", type=int, default=4, help="worker loops (as SQS event source batches)")
    local.add_argument("--target-port", type=int, default=8081, help="port of the demo target")
    local.add_argument("--timezone", default="UTC", help="time zone of the demo job")
    local.add_argument("--no-demo-job", action="store_true", help="do not create the every-minute demo job")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.command == "local":
        return _local(args)
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
