"""A short restore drill (``duetime drill restore``) on DynamoDB Local and LocalStack's SQS: jobs of every
kind run, the tables are snapshotted (a consistent scan: DynamoDB Local has no point-in-time recovery), the
jobs run on for 110 s, the snapshot is restored into new tables beside the control table as it is by then (its
marks moved on since the restore point), ``duetime restore`` rebuilds the marks, and the jobs run again.
About 3.5 minutes.

What it holds: the restore left rows behind the marks (the failure the issue describes: the job due just
after the snapshot is one), ``duetime restore`` left none, and no due time up to the cut-off went without a
run; every job that was due again ran on the new tables."""

from __future__ import annotations

import pytest

from duetime_bench.drill.restore import run_restore_drill

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("drill-restore")]


@pytest.mark.timeout(420)
def test_a_short_restore_drill_loses_no_due_time_and_leaves_no_row_behind_a_mark() -> None:
    result = run_restore_drill(before=20, between=110, after=45, settle=15, keep=("control",))

    assert result["behind_mark_before"] >= 1, result  # without the rebuild these rows were never read
    assert result["behind_mark"] == 0 and result["behind_mark_at_end"] == 0, result
    assert result["lost"] == 0, result["overall"]["lost_runs"]
    assert result["recovered_after_s"] is not None, result  # every job caught up on the new tables
    assert result["jobs_not_run_again"] == [] and result["ran_again_after_s"] is not None, result
    # the times between the snapshot and the restore ran on the old tables and again on the new ones, under
    # their own run ids: what an idempotent target drops
    assert result["repeated"] >= 1, result
    assert result["restore"]["lowered"], result["restore"]
