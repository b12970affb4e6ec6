"""The CPU the midnight model charges, measured: what ``duetime bench runcpu`` found the code spends a run,
saved with the commit and the date it was measured at, so ``bench midnight --simulate`` and ``duetime plan``
charge the code's own cost, never a constant typed in by hand.

``duetime bench runcpu --runs 5 --save-calibration`` measures (with the emulators up) and writes
``calibration.json`` beside this module: the median of the runs, each run's figures kept, and the commit
measured. A model flag (``--poller-claim-cpu-us-per-run`` ...) overrides a figure for a what-if; the
result's ``calibration`` then says so.
"""

from __future__ import annotations

import functools
import json
import platform
import statistics
import subprocess
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SAVED = Path(__file__).with_name("calibration.json")


class NoCalibration(RuntimeError):
    """No saved calibration: the model has no CPU figures to charge."""


@dataclass(frozen=True)
class Calibration:
    """Per run, from ``bench runcpu`` (median of ``runs``): the poller's CPU reading a due row (the Query's
    page parsed into a job: ``due_jobs``), the poller's CPU for the rest of a claim (planning it, its
    writes, its SQS send: ``Poller.claim`` less the reads), and the worker function's CPU
    (``work_batch``). Measured on this machine's cores; ``AwsModel`` scales them to a function's vCPU."""

    poller_read_cpu_us_per_row: float
    poller_claim_cpu_us_per_run: float
    worker_cpu_ms_per_run: float
    commit: str
    measured_at: str
    machine: str
    runs: list[dict[str, Any]] = field(default_factory=list)
    source: str = "saved"
    # The median of the runs' ``machine_reference_cpu_ms`` (``bench.machine_speed``): how fast the host was.
    # None in a calibration saved before the yardstick existed.
    machine_reference_cpu_ms: float | None = None

    def summary(self) -> dict[str, Any]:
        """What a result prints of it: the figures, where they came from, when and at which commit."""
        return {k: v for k, v in asdict(self).items() if k != "runs"} | {"runs_measured": len(self.runs)}


def from_runs(runs: list[dict[str, Any]], source: str, commit: str) -> Calibration:
    """The median of ``runs`` (``run_cpu`` results, each with its poller split) as a calibration of the code
    at ``commit`` (taken before the runs began: the checkout may change while they run)."""
    if not runs:
        raise ValueError("a calibration needs at least one runcpu run")
    return Calibration(
        poller_read_cpu_us_per_row=round(statistics.median(r["poller_read_cpu_us_per_row"] for r in runs), 1),
        poller_claim_cpu_us_per_run=round(
            statistics.median(r["poller_claim_cpu_us_per_run"] for r in runs), 1
        ),
        worker_cpu_ms_per_run=round(statistics.median(r["worker_cpu_ms_per_run"] for r in runs), 3),
        commit=commit,
        measured_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        machine=f"{platform.machine()} {platform.processor() or platform.node()}".strip(),
        runs=runs,
        source=source,
        machine_reference_cpu_ms=_median_of(runs, "machine_reference_cpu_ms"),
    )


def _median_of(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return round(statistics.median(values), 2) if values else None


def current_commit() -> str:
    """The checkout's commit (with ``+dirty`` when it has changes), or ``unknown`` outside a git checkout."""
    here = Path(__file__).parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=here, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{commit}+dirty" if dirty else commit


def save(calibration: Calibration, path: Path = SAVED) -> None:
    data = asdict(calibration) | {"source": "saved"}
    path.write_text(json.dumps(data, indent=2) + "\n")
    _read_saved.cache_clear()


def load(path: Path) -> Calibration:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise NoCalibration(
            f"no calibration at {path}: measure one with `duetime bench runcpu --runs 5 --save-calibration` "
            "(needs the emulators: make emulators-start)"
        ) from None
    return Calibration(**(data | {"source": f"saved: {path.name}"}))


def saved() -> Calibration:
    """The calibration saved beside this module (read once a process)."""
    return _read_saved()


@functools.cache
def _read_saved() -> Calibration:
    return load(SAVED)
