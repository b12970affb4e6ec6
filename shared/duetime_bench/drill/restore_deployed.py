"""``duetime drill restore --deployed``: the restore procedure of the operations guide ("Restore") carried out
on the stack deployed in LocalStack, while jobs are due: the tables' items taken at one moment, the jobs run
on, the taken items written into new tables, ``duetime restore`` on them, and the stack updated in place to
adopt them (``-c jobs_table=... -c runs_table=... -c control_table=...``); then what became of every due time.

1. **before**: this checkout deployed as stack ``Duetime`` into the deployed-stack LocalStack (a stack found
   there is destroyed first), a team, and jobs through its API: cron every minute (exact, and jittered), a
   1-minute rate, one-time jobs due before the snapshot, between it and the restore, and after it; each with
   ``misfire: run_all`` and an hour's catch-up, so a time with no run is lost, never skipped. Their target
   is an HTTP server in this process that records every call with its run id (the idempotency key).
2. **snapshot**: the items of the stack's three tables read at one moment (a consistent Scan of each).
   LocalStack's DynamoDB has no point-in-time recovery: this copy is its stand-in (the local drill's too).
3. **between**: the jobs run on, on the stack's own tables.
4. **restore**: new tables with the stack's definitions, holding the snapshot's items, except the tables in
   ``keep`` (by default the control table), copied as they are now; ``duetime restore`` rebuilds the marks.
5. **adopt**: ``cdklocal deploy`` of this checkout synthesized with the new tables' names: every function is
   pointed at them, in place. The stack's own tables leave the template (LocalStack's stack deletes them; on
   AWS deletion protection keeps them).
6. **after**: the jobs run on the adopted tables; after the cut-off and the settle, the same accounting as the
   local drill (``lost``, ``behind_mark``, ``repeated``, ``recovered_after_s``, ``ran_again_after_s``).

Both templates (the stack's and the adopting one) are synthesized before anything is deployed, since the new
tables' names are chosen first: the restore itself waits for no synth.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from duetime.adapters.aws.clients import new_client
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.dynamodb.tables import TableNames, create_tables
from duetime.domain.timeutil import iso_z
from duetime.local.system import EMULATORS_SCRIPT
from duetime.scheduling.restore import check_marks
from duetime_bench.drill import release as releases
from duetime_bench.drill.accounting import PhaseWindow, account
from duetime_bench.drill.release import STACK
from duetime_bench.drill.restore import (
    ROLES,
    ran_again,
    restore_figures,
    scan_items,
    wait_caught_up,
    write_items,
)
from duetime_bench.drill.upgrade import Drill, Phase, Progress, answers, drill_place, iso

EMULATOR = (
    "LocalStack's DynamoDB has no point-in-time recovery: a consistent scan of each table stands in for it, "
    "and no restore time of AWS's is measured here; the adopting deploy is LocalStack's CloudFormation"
)


def _progress(text: str) -> None:
    print(f"drill restore (deployed): {text}", file=sys.stderr, flush=True)


def _operator_env(endpoint: str) -> dict[str, str]:
    """The environment an operator's ``duetime`` command runs in against the deployed LocalStack."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    return {**env, "AWS_ENDPOINT_URL": endpoint, "AWS_DEFAULT_REGION": "us-east-1"}


def _duetime_restore(names: TableNames, endpoint: str) -> dict[str, Any]:
    """``duetime restore`` on ``names`` in the deployed LocalStack, as the operator runs it: its answer."""
    command = [sys.executable, "-m", "duetime.cli", "restore", "--json"]
    command += ["--jobs-table", names.jobs, "--runs-table", names.runs, "--control-table", names.control]
    done = subprocess.run(command, capture_output=True, text=True, env=_operator_env(endpoint), timeout=120)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"duetime restore failed ({done.returncode}): {done.stderr.strip()}")
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def run_deployed_restore_drill(
    port: int | None = None,
    before: float = 60.0,
    between: float = 90.0,
    after: float = 120.0,
    settle: float = 60.0,
    keep: tuple[str, ...] = ("control",),
    progress: Progress = _progress,
) -> dict[str, Any]:
    """The drill (the module's docstring); its figures as JSON-ready data, also kept in its run folder."""
    port, endpoint, work, logs = drill_place(port, "restore-")
    prefix = f"duetime-restored-{uuid.uuid4().hex[:6]}"
    new = TableNames(f"{prefix}-jobs", f"{prefix}-runs", f"{prefix}-control")
    current = releases.current_release(work, progress)
    adopting = releases.current_release(
        work,
        progress,
        {"jobs_table": new.jobs, "runs_table": new.runs, "control_table": new.control},
        folder="current-adopting",
    )
    started_here = not answers(endpoint)
    env = {**os.environ, "DUETIME_DEPLOYED_PORT": str(port)}
    if started_here:
        progress(f"starting the deployed-stack LocalStack on {endpoint}")
        subprocess.run([str(EMULATORS_SCRIPT), "start-deployed"], env=env, check=True)
    drill = Drill(endpoint, current, current, logs, progress)
    try:
        result = _run(drill, adopting, new, before, between, after, settle, keep)
    finally:
        if drill.target is not None:
            drill.target.shutdown()
            drill.target.server_close()
        if started_here:
            subprocess.run([str(EMULATORS_SCRIPT), "stop-deployed"], env=env, check=False)
    (logs / "result.json").write_text(json.dumps(result, indent=1, default=str))
    return result


def _run(
    drill: Drill,
    adopting: releases.Release,
    new: TableNames,
    before: float,
    between: float,
    after: float,
    settle: float,
    keep: tuple[str, ...],
) -> dict[str, Any]:
    progress = drill.progress
    first = drill.start_stack(drill.current, "before")
    every_minute = {"cron": "* * * * *"}
    drill.create("cron-exact", every_minute, exact=True)
    drill.create("cron-jittered", every_minute, exact=False, jitter_seconds=20)
    drill.create("rate-exact", {"rate": "1 minute"}, exact=True)
    for name, seconds in (
        ("once-before-snapshot", before / 2),
        ("once-between", before + 10),  # due just after the snapshot: its restored row is behind the mark
        ("once-after-restore", before + between + 90),  # due after the adopting deploy
    ):
        drill.create(name, {"at": iso_z(datetime.fromtimestamp(int(time.time() + seconds), UTC))}, exact=True)
    old = TableNames(first.tables["jobs"], first.tables["runs"], first.tables["control"])
    progress(f"{len(drill.jobs)} jobs on {old.jobs}; running {before:.0f} s before the snapshot")
    dynamodb = new_client("dynamodb", drill.endpoint)
    time.sleep(before)
    snapshot_at = time.time()
    snapshot = {role: scan_items(dynamodb, getattr(old, role)) for role in ROLES}
    progress(f"snapshot taken ({sum(map(len, snapshot.values()))} items); {between:.0f} s more on them")
    between_phase = Phase("between", snapshot_at)
    drill.phases.append(between_phase)
    time.sleep(between)
    create_tables(dynamodb, new)
    for role in ROLES:
        items = scan_items(dynamodb, getattr(old, role)) if role in keep else snapshot[role]
        write_items(dynamodb, getattr(new, role), items)
    restored = DynamoStore(dynamodb, new)
    behind_before = check_marks(restored).rows_behind
    answer = _duetime_restore(new, drill.endpoint)
    kept = ", ".join(keep) or "none"
    progress(f"restored into {new.jobs} (kept current: {kept}); duetime restore: {answer}")
    adopt = Phase("adopted", time.time())
    drill.phases.append(adopt)
    drill.deploy(adopting, adopt)
    # The functions read the new tables from their update, which comes during the deploy: the restart is
    # counted from the deploy's start (how long the deploy took is beside it in the report).
    restarted_at = adopt.started
    adopted = adopt.tables == {"jobs": new.jobs, "runs": new.runs, "control": new.control}
    job_ids = [job.id for job in drill.jobs]
    caught_up_at = wait_caught_up(restored, job_ids, restarted_at, restarted_at + after)
    time.sleep(max(0.0, restarted_at + after - time.time()))
    cutoff = time.time()
    progress(f"cut-off; waiting {settle:.0f} s for calls in flight")
    time.sleep(settle)
    behind_end = check_marks(restored).rows_behind
    calls = drill.calls()
    expected = drill.expected(cutoff)
    windows = [
        PhaseWindow("before", 0, snapshot_at),
        PhaseWindow("between", snapshot_at, adopt.started),
        PhaseWindow("restored", adopt.started, float("inf")),
    ]
    figures = account(expected, calls, windows, cutoff)
    overall = figures["overall"]
    return {
        "where": f"the {STACK} stack deployed in LocalStack ({drill.endpoint})",
        **restore_figures(
            overall,
            answer,
            (behind_before, behind_end),
            ran_again({}, expected, calls, snapshot_at, restarted_at, cutoff),
            (snapshot_at, restarted_at, caught_up_at),
        ),
        "lost_runs": overall["lost_runs"],
        "lost_detail": {run: drill.run_status(run) for run in overall["lost_runs"]},
        "kept_current": list(keep),
        "adopted": adopted,
        "tables": {"before": first.tables, "after": adopt.tables},
        "deploys": {p.name: p.deploy.as_dict() for p in drill.phases if p.deploy},
        "stage_repaired": {p.name: p.stage_repaired for p in drill.phases if p.stage_repaired},
        "seconds": {"before": before, "between": between, "after": after, "settle": settle},
        "restore_point": iso(snapshot_at),
        "overall": overall,
        "phases": figures["phases"],
        "emulator": EMULATOR,
        "logs": str(drill.logs),
    }
