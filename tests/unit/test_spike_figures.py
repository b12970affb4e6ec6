"""Figures the spike benchmark derives from what it recorded."""

from __future__ import annotations

import pytest

from duetime_bench.spike import peak_per_second, usd_per_million


def test_the_peak_is_the_busiest_wall_clock_second() -> None:
    assert peak_per_second([10.0, 10.99, 11.0, 11.2, 11.999, 12.5]) == 3
    assert peak_per_second([]) == 0


def test_cost_per_million_runs_adds_dynamodb_sqs_and_the_worker_lambda() -> None:
    nothing = {"ddb_write_units_per_run": 0, "ddb_read_units_per_run": 0, "sqs_requests_per_run": 0}
    lambda_only = usd_per_million({**nothing, "client_cpu_ms_per_run": 0})
    with_writes = usd_per_million({**nothing, "ddb_write_units_per_run": 14, "client_cpu_ms_per_run": 0})
    assert lambda_only == pytest.approx(0.02)  # $0.20 per million Lambda requests, one per 10 runs
    assert with_writes - lambda_only == pytest.approx(14 * 0.625)  # $0.625 per million write units
