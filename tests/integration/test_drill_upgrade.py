"""A short upgrade drill (``duetime drill upgrade``): v0.1.0 deployed into a deployed-stack LocalStack of its
own, updated in place to this checkout, rolled back and forward, finalized, with jobs due throughout. About
5 minutes (277 s measured on a loaded 2-core machine: four deploys of 18-29 s, 10 s phases, a minute to
settle), plus the build of v0.1.0's asset and template the first time (about 30 s; kept under .cache/drill).

What it holds: every deploy updates the stack in place (no failed resource), the tables and their jobs stay,
each phase is answered by the release it deployed, and every fire due has its run (one with no call yet is
queued: LocalStack stops a poller between its claim and its send when it replaces the function, and the
run's queue deadline, 10 minutes on, sends it again; the drill command waits for that, this test does not).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal

import pytest

import duetime
from duetime.upgrades.releases import resolve_ref
from duetime_bench.drill.release import ROOT, git
from duetime_bench.drill.upgrade import run_upgrade_drill

from .processes import distinct_free_ports

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("drill-upgrade")]

FROM = "v0.1.0"


@pytest.mark.timeout(1500)
def test_a_short_drill_from_v0_1_0_loses_no_fire_and_updates_in_place() -> None:
    old_commit = resolve_ref(FROM, ROOT)  # releases.json: found in a clone made without tags too
    assert git("rev-parse", "--verify", f"{old_commit}^{{commit}}") == old_commit, (
        "a shallow clone lacks 0.1.0"
    )
    (port,) = distinct_free_ports(1)
    try:
        # settle: longer than the latest start measured (69 s: a fire due just after a deploy killed the
        # pollers waits for the next minute's invocation), so a fire due at the cut-off has its run.
        result = run_upgrade_drill(FROM, port, dwell=10, old_seconds=15, settle=150, redelivery=0)
    finally:
        # the drill stops the LocalStack it started; its runtimes too, even if it was interrupted
        cache = os.environ.get("DUETIME_CACHE") or str(ROOT / ".cache")
        pidfile = f"{cache}/run/localstack-deployed-{port}.pid"
        with contextlib.suppress(OSError, ValueError), open(pidfile) as pid:
            os.killpg(int(pid.read()), signal.SIGKILL)
    phases = {p["phase"]: p for p in result["phases"]}
    assert list(phases) == ["old", "upgrade", "rollback", "forward", "finalize"]
    assert result["in_place"], [p["deploy"] for p in result["phases"]]
    assert result["tables_kept"]
    for name in ("upgrade", "rollback", "forward"):  # every job created before the deploy is still there
        assert phases[name]["jobs_listed"] == phases[name]["jobs_created"], phases[name]
    for name in ("old", "rollback"):  # 0.1.0's /healthz says no commit
        answering = phases[name]["release_answering"]
        assert answering.get("commit", old_commit[:7]).startswith(old_commit[:7]), phases[name]
    for name in ("upgrade", "forward"):
        assert not phases[name]["release_answering"]["commit"].startswith(old_commit[:7]), phases[name]
    # Without waiting for queue deadlines (10 min), a fire whose poller LocalStack stopped between its claim
    # and its send has no call yet; it must have its run (queued: sent again at its deadline), never none:
    # neither a schedule moved past it, nor a job still waiting for it after the settle and the claim wait.
    no_run = [run for run, detail in result["lost_detail"].items() if detail.startswith("no run")]
    # said in full (pytest shortens a dict): what the stack's tables and logs hold for each such fire
    said = {"lost_detail": result["lost_detail"], **result["lost_forensics"]}
    assert not no_run, json.dumps(said, indent=1)
    assert result["fires_due"] >= 20
    # The finalize: refused while 0.1.0's functions may still run, then forced; a rollback past it refused.
    finalized = phases["finalize"]["finalize"]
    assert finalized["refused_unforced"] and "may run until" in finalized["refused_unforced"], finalized
    assert (finalized["ok"], finalized["writes_format"]) == (True, 2), finalized
    assert finalized["rollback_to_older"]["refusal"].startswith("rollback refused"), finalized
    assert finalized["this_release_again"] is None, finalized
    assert duetime.__version__ in finalized["releases_seen"], finalized  # the functions said they ran
    print({k: result[k] for k in ("repeated_runs", "late_max_s", "deploy_seconds", "unreadable_rows")})
