"""The CPU the midnight model charges comes from `bench runcpu`, saved with its commit and date."""

from __future__ import annotations

from pathlib import Path

import pytest

from duetime.capacity.calibration import NoCalibration, from_runs, load, save


def _run(read_us: float, claim_us: float, worker_ms: float) -> dict[str, float]:
    return {
        "poller_read_cpu_us_per_row": read_us,
        "poller_claim_cpu_us_per_run": claim_us,
        "worker_cpu_ms_per_run": worker_ms,
    }


def test_a_calibration_is_the_median_of_its_runs_and_names_its_commit() -> None:
    runs = [_run(100, 500, 1.5), _run(90, 700, 1.4), _run(400, 600, 9.0)]
    calibration = from_runs(runs, source="bench runcpu", commit="abc1234")

    assert calibration.poller_read_cpu_us_per_row == 100
    assert calibration.poller_claim_cpu_us_per_run == 600
    assert calibration.worker_cpu_ms_per_run == 1.5
    assert calibration.commit == "abc1234" and calibration.measured_at.endswith("Z")
    assert calibration.summary()["runs_measured"] == 3 and "runs" not in calibration.summary()


def test_a_saved_calibration_loads_back_with_every_run(tmp_path: Path) -> None:
    path = tmp_path / "calibration.json"
    calibration = from_runs([_run(100, 500, 1.5)], source="bench runcpu", commit="abc1234")
    save(calibration, path)

    loaded = load(path)
    assert loaded.poller_claim_cpu_us_per_run == 500 and loaded.runs == calibration.runs
    assert loaded.source == "saved: calibration.json"


def test_no_saved_calibration_says_how_to_measure_one(tmp_path: Path) -> None:
    with pytest.raises(NoCalibration, match="bench runcpu --runs 5 --save-calibration"):
        load(tmp_path / "missing.json")


def test_a_calibration_needs_a_run() -> None:
    with pytest.raises(ValueError, match="at least one"):
        from_runs([], source="bench runcpu", commit="abc1234")


def test_a_calibration_keeps_the_hosts_speed_beside_its_figures(tmp_path: Path) -> None:
    runs = [_run(100, 500, 1.5) | {"machine_reference_cpu_ms": ms} for ms in (40.0, 90.0, 44.0)]
    calibration = from_runs(runs, source="bench runcpu", commit="abc1234")
    assert calibration.machine_reference_cpu_ms == 44.0
    save(calibration, tmp_path / "calibration.json")
    assert load(tmp_path / "calibration.json").machine_reference_cpu_ms == 44.0


def test_a_calibration_saved_before_the_yardstick_loads_without_one(tmp_path: Path) -> None:
    path = tmp_path / "calibration.json"
    save(from_runs([_run(100, 500, 1.5)], source="bench runcpu", commit="abc1234"), path)
    assert load(path).machine_reference_cpu_ms is None
