"""The restore drill on the stack deployed in LocalStack (``duetime drill restore --deployed``): the
operations guide's procedure carried out on a real stack while jobs are due. This checkout deployed; jobs
created through its API; the tables' items taken (a consistent scan: LocalStack's DynamoDB has no
point-in-time recovery); the jobs run on for 110 s; the items written into new tables beside the control
table as it is by then (its marks moved on); ``duetime restore``; the stack updated in place to adopt the
new tables; the jobs run again. About 7 minutes, plus the build of the two templates (the stack's and the
adopting one).

What it holds: the adopting deploy updated the stack in place and its functions read the new tables; the
restore left rows behind the marks (the job due just after the snapshot is one) and ``duetime restore`` left
none; no due time up to the cut-off went without a call; every job due again ran on the new tables."""

from __future__ import annotations

import contextlib
import os
import signal

import pytest

from duetime_bench.drill.release import ROOT
from duetime_bench.drill.restore_deployed import run_deployed_restore_drill

from .processes import distinct_free_ports

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("drill-restore-deployed")]


@pytest.mark.timeout(1500)
def test_a_restore_on_the_deployed_stack_adopts_the_restored_tables_in_place_and_loses_no_due_time() -> None:
    (port,) = distinct_free_ports(1)
    try:
        result = run_deployed_restore_drill(port, before=30, between=110, after=120, settle=60)
    finally:  # the drill stops the LocalStack it started; its runtimes too, even if it was interrupted
        cache = os.environ.get("DUETIME_CACHE") or str(ROOT / ".cache")
        with (
            contextlib.suppress(OSError, ValueError),
            open(f"{cache}/run/localstack-deployed-{port}.pid") as pid,
        ):
            os.killpg(int(pid.read()), signal.SIGKILL)
    assert all(deploy["ok"] for deploy in result["deploys"].values()), result["deploys"]
    assert result["adopted"], result["tables"]  # the functions were pointed at the restored tables
    assert result["behind_mark_before"] >= 1, result  # without the rebuild these rows were never read
    assert result["behind_mark"] == 0 and result["behind_mark_at_end"] == 0, result
    assert result["lost"] == 0, result["lost_detail"]
    assert result["recovered_after_s"] is not None, result  # every job caught up on the new tables
    assert result["jobs_not_run_again"] == [] and result["ran_again_after_s"] is not None, result
    assert result["restore"]["lowered"], result["restore"]
    print({k: result[k] for k in ("recovered_after_s", "ran_again_after_s", "repeated", "deploys")})
