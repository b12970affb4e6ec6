"""A short `duetime chaos` run in `make test` (75 s: every job fires at least once): faults injected, then
every promise checked (the long run and its figures are in RELIABILITY.md)."""

from __future__ import annotations

import json
import subprocess
import sys


def test_a_short_chaos_run_keeps_every_promise() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "duetime.cli", "chaos", "--seed", "3", "--minutes", "1.25", "--json"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert out.returncode == 0, (result["violations"], out.stderr[-2000:])
    assert result["faults_injected"] > 0 and result["runs"] >= result["expected_runs"] > 0
    assert result["lost"] == 0 and result["duplicates_succeeded"] == 0 and result["violations"] == []
    # The fire ledger, read over the window, agrees: every expected time listed, none missed (its check).
    assert result["ledger"]["missed"] == 0 and sum(result["ledger"].values()) >= result["expected_runs"]
    # The notified job's runs die at once and each tells its webhook (or waits in its quiet window).
    notices = result["notifications"]
    assert notices["dead_runs"] >= 1 and notices["notices_delivered"] >= 1, notices
