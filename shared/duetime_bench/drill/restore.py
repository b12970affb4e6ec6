"""``duetime drill restore``: a restore of the tables from a backup on the local stack, while jobs are due,
and what became of every due time (docs/guide/operations.md, "Restore"; RELIABILITY.md).

1. **before**: the engine runs in this process as ``duetime local`` runs it, on DynamoDB Local and
   LocalStack's SQS: its own three tables and run queue, the real poller (one, every partition) and the real
   workers (a process of their own), and a target that records every call with its run id (the idempotency
   key). Jobs
   are written as the API writes them: cron every minute (exact, and jittered), a 1-minute rate, a 2-minute
   jittered rate, and one-time jobs due before the snapshot, between it and the restore, and after the
   restore; every one with ``misfire: run_all`` and an hour's catch-up, so a time with no run is lost, never
   skipped.
2. **snapshot**: the items of the three tables are read at one moment (a consistent Scan of each, a few
   milliseconds apart). DynamoDB Local has no point-in-time recovery: this copy is its stand-in, and the
   drill cannot show how long AWS takes to restore (the docs' figures are the guide's).
3. **between**: the jobs run on for ``between`` s (their times after the snapshot run on the old tables),
   then the engine stops.
4. **restore**: the snapshot's items are written into NEW tables (the restore point), except the tables in
   ``keep``, whose items are copied as they are now (by default the control table: the case the issue
   describes, marks that moved on since the restore point). ``duetime restore`` then rebuilds the marks of
   the new tables (unless ``rebuild`` is off: the failure it fixes).
5. **after**: the engine starts again on the new tables (the same run queue, as a deploy that adopts tables
   keeps the stack's queue) for ``after`` s, then ``settle`` s for calls in flight, and the drill accounts:

* ``lost``: a due time up to the cut-off with no call ever carrying its run id (``make_run_id``);
* ``behind_mark``: due rows of the new tables older than their partition's mark, after ``duetime restore``
  (``behind_mark_before``: before it);
* ``repeated``: runs the target saw again after a success (the times between the snapshot and the restore,
  run again under their own run ids);
* ``recovered_after_s``: from the engine's start on the new tables until every job had caught up: each
  time due before the restart claimed on the new tables (its run created, or found there already when the
  runs table was kept current), the job's next time after the restart;
* ``ran_again_after_s``: until every job due again (a time between the restore point and the restart) had a
  call on the new tables; None with the runs table kept current, where those times do not run again.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from duetime.adapters.aws.alerts import StoredAlerts
from duetime.adapters.aws.clients import new_client
from duetime.adapters.aws.sqs import ConcurrentRunQueue, SqsRunQueue, ensure_queue
from duetime.adapters.aws.store_clock import StoreClock
from duetime.adapters.dynamodb.codec import job_to_item
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.dynamodb.tables import TableNames, create_tables
from duetime.adapters.retrying import UNPROCESSED, resend
from duetime.domain.claim_plan import initial_state
from duetime.domain.ids import make_run_id, new_job_id, partition_of
from duetime.domain.models import Job, JobSpec, Team
from duetime.domain.schedule import fire_time, next_nominal_after, rate_anchor
from duetime.domain.timeutil import ceil_seconds, minute_bucket
from duetime.local.demo_target import DemoTargetServer
from duetime.local.system import ensure_emulators, local_environment
from duetime.scheduling.poller import Poller, PollerConfig
from duetime.scheduling.restore import check_marks
from duetime_bench.drill.accounting import ExpectedFire, PhaseWindow, TargetCall, account, target_calls
from duetime_bench.fleet import FleetSpec, WorkerFleet

TEAM = Team(team_id="drill", max_concurrency=100, exact_quota=100, signing_secret="drill")
ROLES = ("jobs", "runs", "control")
Progress = Callable[[str], None]


def _progress(text: str) -> None:
    print(f"drill restore: {text}", file=sys.stderr, flush=True)


@dataclass
class Engine:
    """The poller (a thread of this process) and the workers (a process) on one set of tables."""

    poller: Poller
    fleet: WorkerFleet
    stop: threading.Event
    thread: threading.Thread

    @classmethod
    def start(cls, store: DynamoStore, clock: StoreClock, sqs: Any, queue_url: str) -> Engine:
        queue = ConcurrentRunQueue(SqsRunQueue(sqs, queue_url))
        config = PollerConfig(partitions=list(range(64)))
        poller = Poller(store, store, queue, StoredAlerts(store), clock, config)
        fleet = WorkerFleet(FleetSpec(store.names, queue_url, threads=4), processes=1)
        fleet.start()
        stop = threading.Event()
        thread = threading.Thread(
            target=poller.run_until, args=(stop.is_set, time.sleep), name="drill-poller", daemon=True
        )
        thread.start()
        return cls(poller, fleet, stop, thread)

    def halt(self) -> None:
        self.stop.set()
        self.thread.join(timeout=30)
        self.fleet.stop(grace_seconds=30)


def _body(url: str, schedule: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {
        "name": "drill",
        "schedule": schedule,
        "target": {"url": url},
        "misfire": "run_all",  # every missed time runs: a time with no run is lost, not skipped
        "catchup_window_seconds": 3600,
        **more,
    }


def _job(body: dict[str, Any], now: datetime) -> Job:
    """A job as the API creates it (``JobService.create_job``): validated, stamped, its first time set."""
    spec = JobSpec.model_validate(body)
    stamp = ceil_seconds(now)
    job = Job(**spec.model_dump(), id=new_job_id(), team=TEAM.team_id, created_at=stamp, updated_at=stamp)
    return job.model_copy(update={"state": initial_state(job, stamp)})


def scan_items(dynamodb: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for page in dynamodb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
        items.extend(page.get("Items", []))
    return items


def write_items(dynamodb: Any, table: str, items: list[dict[str, Any]]) -> None:
    def send(request: dict[str, Any]) -> dict[str, Any]:
        return dynamodb.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}

    for start in range(0, len(items), 25):
        chunk = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
        resend(send, {table: chunk}, UNPROCESSED)


def _expected(jobs: dict[str, tuple[str, Job]], until: datetime) -> list[ExpectedFire]:
    """Every due time up to ``until`` by duetime's own schedule rules, from each job as created."""
    fires = []
    for name, job in jobs.values():
        spec = JobSpec.model_validate(job.model_dump(include=set(JobSpec.model_fields)))
        anchor = rate_anchor(spec, job.created_at)
        nominal = job.state.next_nominal_at
        while nominal is not None and nominal <= until:
            following = next_nominal_after(spec, anchor, nominal)
            due = fire_time(job.id, spec, nominal, following)
            fires.append(ExpectedFire(make_run_id(job.id, nominal), name, due.timestamp()))
            nominal = following
    return fires


def _calls(target: DemoTargetServer) -> list[TargetCall]:
    with target.recorder.lock:
        return target_calls(list(target.recorder.calls))


def _duetime_restore(names: TableNames) -> dict[str, Any]:
    """``duetime restore`` on ``names``, as the operator runs it: its JSON answer."""
    command = [sys.executable, "-m", "duetime.cli", "restore", "--json"]
    command += ["--jobs-table", names.jobs, "--runs-table", names.runs, "--control-table", names.control]
    done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ), timeout=120)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"duetime restore failed ({done.returncode}): {done.stderr.strip()}")
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def run_restore_drill(
    before: float = 60.0,
    between: float = 120.0,
    after: float = 120.0,
    settle: float = 30.0,
    keep: tuple[str, ...] = ("control",),
    rebuild: bool = True,
    progress: Progress = _progress,
) -> dict[str, Any]:
    """The drill (the module's docstring); its figures as JSON-ready data."""
    local_environment()
    started_emulators = ensure_emulators()
    dynamodb, sqs = new_client("dynamodb"), new_client("sqs")
    prefix = f"restore{uuid.uuid4().hex[:8]}"
    old = TableNames(f"{prefix}-jobs", f"{prefix}-runs", f"{prefix}-control")
    new = TableNames(f"{prefix}-restored-jobs", f"{prefix}-restored-runs", f"{prefix}-restored-control")
    create_tables(dynamodb, old)
    queue_url = ensure_queue(sqs, prefix, visibility_timeout=120)
    store = DynamoStore(dynamodb, old)
    clock = StoreClock(dynamodb, sync=lambda: store.low_water_marks([0]))
    target = DemoTargetServer().start()
    try:
        store.put_team(TEAM)
        now = clock.now()
        jobs = _create_jobs(store, dynamodb, target.url, now, before, between)
        progress(f"{len(jobs)} jobs on {old.jobs}; the engine runs {before:.0f} s before the snapshot")
        engine = Engine.start(store, clock, sqs, queue_url)
        time.sleep(before)
        snapshot_at = time.time()
        snapshot = {role: scan_items(dynamodb, getattr(old, role)) for role in ROLES}
        progress(f"snapshot taken ({sum(map(len, snapshot.values()))} items); {between:.0f} s more on them")
        time.sleep(between)
        engine.halt()
        stopped_at = time.time()
        create_tables(dynamodb, new)
        for role in ROLES:
            items = scan_items(dynamodb, getattr(old, role)) if role in keep else snapshot[role]
            write_items(dynamodb, getattr(new, role), items)
        restored = DynamoStore(dynamodb, new)
        behind_before = check_marks(restored).rows_behind
        answer = _duetime_restore(new) if rebuild else None
        progress(
            f"restored into {new.jobs} (kept current: {', '.join(keep) or 'none'}); duetime restore: {answer}"
        )
        restarted_at = time.time()
        engine = Engine.start(restored, clock, sqs, queue_url)
        caught_up_at = wait_caught_up(restored, list(jobs), restarted_at, restarted_at + after)
        time.sleep(max(0.0, restarted_at + after - time.time()))
        cutoff = time.time()
        time.sleep(settle)
        behind_end = check_marks(restored).rows_behind
        engine.halt()
        calls = _calls(target)
        expected = _expected(jobs, datetime.fromtimestamp(cutoff, UTC))
        windows = [
            PhaseWindow("before", 0, snapshot_at),
            PhaseWindow("between", snapshot_at, stopped_at),
            PhaseWindow("restored", stopped_at, float("inf")),
        ]
        figures = account(expected, calls, windows, cutoff)
        overall = figures["overall"]
        return {
            **restore_figures(
                overall,
                answer,
                (behind_before, behind_end),
                ran_again(jobs, expected, calls, snapshot_at, restarted_at, cutoff),
                (snapshot_at, restarted_at, caught_up_at),
            ),
            "rebuilt": rebuild,
            "kept_current": list(keep),
            "seconds": {"before": before, "between": between, "after": after, "settle": settle},
            "overall": overall,
            "phases": figures["phases"],
            "emulator": "DynamoDB Local has no point-in-time recovery: a consistent scan of each table "
            "stands in for it, and no restore time of AWS's is measured here",
        }
    finally:
        target.shutdown()
        for names in (old, new):
            for table in (names.jobs, names.runs, names.control):
                with contextlib.suppress(dynamodb.exceptions.ResourceNotFoundException):
                    dynamodb.delete_table(TableName=table)
        sqs.delete_queue(QueueUrl=queue_url)
        sqs.delete_queue(QueueUrl=queue_url + "-dlq")
        if started_emulators:
            from duetime.local.system import EMULATORS_SCRIPT

            subprocess.run([str(EMULATORS_SCRIPT), "stop"], check=False)


def _create_jobs(
    store: DynamoStore, dynamodb: Any, url: str, now: datetime, before: float, between: float
) -> dict[str, tuple[str, Job]]:
    """The drill's jobs, by id: (the drill's name for it, the job as created)."""

    def at(seconds: float) -> dict[str, Any]:
        return {"at": (now + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")}

    made = {
        "cron-exact": _job(_body(url, {"cron": "* * * * *"}, exact=True), now),
        "cron-jittered": _job(_body(url, {"cron": "* * * * *"}, jitter_seconds=20), now),
        "rate-exact": _job(_body(url, {"rate": "1 minute"}, exact=True), now),
        "rate-jittered": _job(_body(url, {"rate": "2 minutes"}, jitter_seconds=30), now),
        "once-before-snapshot": _job(_body(url, at(before / 2), exact=True), now),
        # due just after the snapshot: its restored row is behind the current control table's mark once the
        # mark has passed its minute and the 30 s settle (``PollerConfig.bucket_settle``), 100 s at most
        "once-between": _job(_body(url, at(before + 10), exact=True), now),
        "once-after-restore": _job(_body(url, at(before + between + 30), exact=True), now),
    }
    for job in made.values():
        store.ensure_low_water_mark(partition_of(job.id), minute_bucket(now))
    write_items(dynamodb, store.names.jobs, [job_to_item(job, now) for job in made.values()])
    return {job.id: (name, job) for name, job in made.items()}


def wait_caught_up(store: DynamoStore, job_ids: list[str], restarted_at: float, until: float) -> float | None:
    """When every job's next fire time was after ``restarted_at`` (or it had none left), polled twice a
    second until ``until``; None if some never was."""
    restart = datetime.fromtimestamp(restarted_at, UTC)
    while time.time() < until:
        states = [job.state for job in (store.get_job(job_id) for job_id in job_ids) if job is not None]
        if all(s.next_fire_at is None or s.next_fire_at > restart for s in states):
            return time.time()
        time.sleep(0.5)
    return None


def ran_again(
    jobs: dict[str, tuple[str, Job]],
    expected: list[ExpectedFire],
    calls: list[TargetCall],
    snapshot_at: float,
    restarted_at: float,
    cutoff: float,
) -> tuple[float | None, list[str]]:
    """Seconds from the restart until every job due again (a time at or after the restore point and before
    the restart, which the new tables' pollers find late) had a call on the new tables; and the jobs that
    had none by the cut-off."""
    runs_of: dict[str, str] = {fire.run_id: fire.job for fire in expected}
    due_again = {fire.job for fire in expected if snapshot_at <= fire.due_at < min(restarted_at, cutoff)}
    first: dict[str, float] = {}
    for call in calls:
        name = runs_of.get(call.run_id)
        if name is not None and call.received_at >= restarted_at:
            first[name] = min(first.get(name, call.received_at), call.received_at)
    missing = sorted(due_again - set(first))
    if missing or not due_again:
        return None, missing
    return round(max(first[name] for name in due_again) - restarted_at, 1), []


def restore_figures(
    overall: dict[str, Any],
    answer: dict[str, Any] | None,
    behind: tuple[int, int],
    again: tuple[float | None, list[str]],
    times: tuple[float, float, float | None],
) -> dict[str, Any]:
    """The figures every restore drill reports: from the accounting's ``overall``, ``duetime restore``'s
    ``answer`` (None: not run), the rows ``behind`` a mark (before the rebuild, at the end), ``ran_again``'s
    answer, and the ``times`` of the snapshot, the restart and the catch-up (None: never)."""
    behind_before, behind_end = behind
    snapshot_at, restarted_at, caught_up_at = times
    return {
        "lost": overall["lost"],
        "behind_mark": (answer or {}).get("rows_behind", behind_before),
        "behind_mark_before": behind_before,
        "behind_mark_at_end": behind_end,
        "repeated": overall["repeated"],
        "recovered_after_s": round(caught_up_at - restarted_at, 1) if caught_up_at else None,
        "ran_again_after_s": again[0],
        "jobs_not_run_again": again[1],
        "due": overall["due"],
        "calls": overall["calls"],
        "restore": answer,
        "restore_point_to_restart_s": round(restarted_at - snapshot_at, 1),
    }


def report(result: dict[str, Any]) -> str:
    lines = [
        f"lost {result['lost']} of {result['due']} due times; behind the mark after duetime restore "
        f"{result['behind_mark']} (before it {result['behind_mark_before']}); repeated {result['repeated']}",
        f"every job caught up within {result['recovered_after_s']} s of the restart, and every job due again "
        f"ran within {result['ran_again_after_s']} s (restore point to restart: "
        f"{result['restore_point_to_restart_s']} s)",
    ]
    if result["jobs_not_run_again"]:
        lines.append(f"jobs never run again: {', '.join(result['jobs_not_run_again'])}")
    lines.append(result["emulator"])
    return "\n".join(lines)
