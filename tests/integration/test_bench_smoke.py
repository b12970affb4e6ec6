"""The benchmarks run end to end and print their figures (small sizes; speed lives in BENCHMARKS.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# On one xdist worker, in turn, with test_bench_isolation: the spike bench moves DynamoDB Local onto cores of
# its own, as that test does, and the two must not do it at once.
pytestmark = pytest.mark.xdist_group("bench")

SPIKE_KEYS = {
    "jobs",
    "runs_started",
    "lost",
    "claims_per_s",
    "starts_per_s",
    "peak_starts_per_s",
    "lateness_p50_s",
    "lateness_p99_s",
    "lateness_max_s",
    "raw_ceiling_claims_per_s",
    "ratio",
    "claim_path_alone_claims_per_s",
    "claim_path_alone_ratio",
    "ddb_write_units_per_run",
    "ddb_read_units_per_run",
    "ddb_requests_per_run",
    "sqs_requests_per_run",
    "client_cpu_ms_per_run",
    "usd_per_million_runs",
}


def bench_json(*args: str) -> dict[str, Any]:
    """``duetime bench <args> --json`` in a process of its own: the one JSON line it prints."""
    out = subprocess.run(
        [sys.executable, "-m", "duetime.cli", "bench", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1, out.stdout
    result: dict[str, Any] = json.loads(lines[0])
    return result


def test_bench_spike_loses_nothing_and_prints_one_json_line(tmp_path: Path) -> None:
    chart = tmp_path / "spike.png"
    result = bench_json(
        "spike", "--jobs", "60", "--workers", "4", "--exact-fraction", "0.5", "--chart", str(chart)
    )
    assert set(result) >= SPIKE_KEYS
    assert result["jobs"] == 60 and result["runs_started"] == 60 and result["lost"] == 0
    assert result["ddb_write_units_per_run"] > 0 and result["raw_ceiling_claims_per_s"] > 0
    alone, ceiling = result["claim_path_alone_claims_per_s"], result["raw_ceiling_claims_per_s"]
    # The ratio is of the unrounded rates (printed to 0.001); recomputed from the printed rates (each to 0.1,
    # so off by up to 0.05) it may differ by up to ratio * (0.05 / alone + 0.05 / ceiling), plus 0.0005.
    ratio = alone / ceiling
    slack = ratio * (0.05 / alone + 0.05 / ceiling) + 0.0005
    assert alone > 0 and result["claim_path_alone_ratio"] == pytest.approx(ratio, abs=slack)
    assert result["cores"].startswith("DynamoDB Local on cpu ")  # the emulator had cores of its own
    assert chart.stat().st_size > 10_000  # a real PNG


def test_bench_precision_starts_every_exact_job() -> None:
    result = bench_json("precision", "--jobs", "10", "--minutes", "0.5", "--workers", "2")
    assert result["runs_started"] == 10 and result["lost"] == 0 and result["lateness_p99_s"] is not None


def test_bench_preload_loads_every_row_and_prints_its_memory_per_job() -> None:
    result = bench_json("preload", "--jobs", "300")
    assert set(result) >= {"rows", "load_seconds", "bytes_per_job", "peak_rss_mb"}
    assert result["rows"] == 300 and result["bytes_per_job"] > 0  # the figure itself: BENCHMARKS.md


def test_bench_runcpu_claims_and_works_every_job_and_prints_the_cpu_of_each_stage() -> None:
    result = bench_json("runcpu", "--jobs", "60")
    assert result["runs_claimed"] == 60 and result["runs_worked"] == 60 and result["batches"] >= 6
    assert result["poller_cpu_ms_per_run"] > 0 and result["worker_cpu_ms_per_run"] > 0
    assert result["event_source_cpu_ms_per_run"] > 0  # receive and delete, measured apart from the function
    total = result["poller_cpu_ms_per_run"] + result["worker_cpu_ms_per_run"]
    assert abs(result["client_cpu_ms_per_run"] - total) <= 0.002  # the figure itself: BENCHMARKS.md
    with_event_source = total + result["event_source_cpu_ms_per_run"]
    assert abs(result["client_cpu_ms_per_run_with_event_source"] - with_event_source) <= 0.003
    # The poller's CPU in the two parts the midnight model charges: a due row read, the rest of a claim.
    assert result["poller_read_cpu_us_per_row"] > 0 and result["poller_claim_cpu_us_per_run"] > 0
    assert result["poller_claim_cpu_us_per_run"] < result["poller_cpu_ms_per_run"] * 1000
    assert (
        result["machine_reference_cpu_ms"] > 0
    )  # the host's speed, beside the figures (bench.machine_speed)


def test_bench_runcpu_saves_no_calibration_unless_asked_and_prints_each_runs_figures() -> None:
    result = bench_json("runcpu", "--jobs", "30", "--runs", "2")
    assert len(result["runs"]) == 2 and result["saved"] is False
    calibration = result["calibration"]
    assert calibration["runs_measured"] == 2 and calibration["commit"]
    assert calibration["poller_claim_cpu_us_per_run"] > 0 and calibration["worker_cpu_ms_per_run"] > 0
    assert calibration["machine_reference_cpu_ms"] > 0 and result["median_machine_reference_cpu_ms"] > 0


def test_bench_runcpu_with_an_sqs_target_sends_one_message_a_run() -> None:
    result = bench_json("runcpu", "--jobs", "40", "--target", "sqs")
    assert (result["target"], result["runs_worked"], result["target_messages"]) == ("sqs", 40, 40)
    assert result["worker_cpu_ms_per_run"] > 0  # the figure itself: BENCHMARKS.md
