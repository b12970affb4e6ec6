"""`duetime bench versus`: duetime's midnight spike and the APScheduler 4 + PostgreSQL peer's, back to back
on the same machine with the same N, and the ratio of their start rates.

Order: duetime's spike first (``duetime_bench.spike.run_spike``, the code ``duetime bench spike`` runs),
then the peer (``<peer dir>/apscheduler_run.sh --jobs N --processes P``, which sets PostgreSQL up, runs
its spike, stops PostgreSQL and prints one JSON line). Nothing runs at the same time as anything else.

The two benches define "starts per second" differently: duetime's spike divides the runs started by the time
from its first start to its last; the peer divides N by the time from the due instant to its last start.
The ratio is taken on the peer's definition for both (``N / (last start - due instant)``, which for
duetime is ``runs_started / lateness_max_s``); duetime's own figure is printed beside it.

If the peer cannot run (its script is missing, its set-up fails offline, PostgreSQL does not start, it
prints no result), ``PeerUnavailable`` says why, and no figure is compared or made up.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from duetime_bench.machine_speed import reference_cpu_ms

REPO_ROOT = Path(__file__).resolve().parents[2]
PEER_SCRIPT = "apscheduler_run.sh"
PEER_NAME = "APScheduler 4 + PostgreSQL"
ORDER = "duetime's spike first, then the peer's, back to back (never at the same time)"
KEY_FIGURES = ("starts_per_s", "lateness_p50_s", "lateness_p99_s", "lateness_max_s", "lost")
PEER_TIMEOUT_S = 1800.0


class PeerUnavailable(Exception):
    """The peer did not produce a result; the message says why (and what the peer printed last)."""


def default_peer_dir(repo_root: Path = REPO_ROOT) -> Path:
    """``<repo>/../shared/peers``: where the peers live beside the repository."""
    return repo_root.parent / "shared" / "peers"


def peer_script(peer_dir: Path) -> Path:
    """The peer's run script in ``peer_dir``; PeerUnavailable if it is not there."""
    script = peer_dir / PEER_SCRIPT
    if not script.is_file():
        raise PeerUnavailable(f"no peer script at {script} (give the peers' directory with --peer-dir)")
    return script


def run_peer(
    peer_dir: Path,
    jobs: int,
    processes: int,
    run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run,
    timeout: float = PEER_TIMEOUT_S,
) -> dict[str, Any]:
    """Run the peer's script once and return the JSON object it printed last. PeerUnavailable when the
    script is missing, exits non-zero, times out or prints no JSON object with ``starts_per_s``."""
    script = peer_script(peer_dir)
    command = ["bash", str(script), "--jobs", str(jobs), "--processes", str(processes)]
    try:
        done = run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise PeerUnavailable(f"the peer did not finish within {timeout:.0f} s") from exc
    last_words = _tail(done.stderr)
    if done.returncode != 0:
        raise PeerUnavailable(f"the peer exited with {done.returncode}{last_words}")
    result = _last_json_object(done.stdout)
    if result is None or "starts_per_s" not in result:
        raise PeerUnavailable(f"the peer printed no result line{last_words}")
    return result


def _last_json_object(text: str) -> dict[str, Any] | None:
    """The last line of ``text`` that parses as a JSON object, if any."""
    for line in reversed(text.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _tail(stderr: str, lines: int = 5) -> str:
    kept = [line for line in stderr.strip().splitlines() if line.strip()][-lines:]
    return (": " + " | ".join(kept)) if kept else ""


def starts_per_s_from_due(started: int, seconds_to_last_start: float | None) -> float | None:
    """Runs started / (last start - due instant): the peer's definition of starts per second. None when
    nothing started or the time is unknown."""
    if not started or not seconds_to_last_start or seconds_to_last_start <= 0:
        return None
    return round(started / seconds_to_last_start, 1)


def duetime_figures(spike: dict[str, Any]) -> dict[str, Any]:
    """The key figures of a ``run_spike`` result, with starts per second on the peer's definition."""
    return {
        "starts_per_s": starts_per_s_from_due(spike["runs_started"], spike.get("lateness_max_s")),
        "starts_per_s_first_to_last": spike["starts_per_s"],
        "lateness_p50_s": spike["lateness_p50_s"],
        "lateness_p99_s": spike["lateness_p99_s"],
        "lateness_max_s": spike["lateness_max_s"],
        "lost": spike["lost"],
        "runs_started": spike["runs_started"],
    }


def peer_figures(peer: dict[str, Any]) -> dict[str, Any]:
    """The key figures of the peer's result line, as it printed them."""
    return {
        "starts_per_s": peer.get("starts_per_s"),
        "lateness_p50_s": peer.get("lateness_p50_s"),
        "lateness_p99_s": peer.get("lateness_p99_s"),
        "lateness_max_s": peer.get("lateness_max_s"),
        "lost": peer.get("lost"),
        "runs_started": peer.get("started"),
        "duplicates": peer.get("duplicates"),
    }


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator to 3 decimals, None unless both are positive numbers."""
    if not numerator or not denominator or numerator <= 0 or denominator <= 0:
        return None
    return round(numerator / denominator, 3)


def compare(
    jobs: int, processes: int, spike: dict[str, Any], peer: dict[str, Any], load: dict[str, Any]
) -> dict[str, Any]:
    """One object: both benches' key figures, ``ratio_starts_per_s`` (duetime / peer, on the peer's
    definition), the order they ran in and the load averages around them."""
    ours, theirs = duetime_figures(spike), peer_figures(peer)
    return {
        "jobs": jobs,
        "processes": processes,
        "order": ORDER,
        "duetime": ours,
        "peer": {"name": PEER_NAME, **theirs},
        "ratio_starts_per_s": ratio(ours["starts_per_s"], theirs["starts_per_s"]),
        "starts_per_s_definition": "runs started / (last start - due instant), for both",
        "load_average_1m": load,
        "cpus": os.cpu_count(),
        "duetime_spike": spike,
        "peer_result": peer,
    }


def run_versus(
    jobs: int,
    processes: int = 2,
    workers: int = 16,
    peer_dir: Path | None = None,
    spike: Callable[..., dict[str, Any]] | None = None,
    peer: Callable[[Path, int, int], dict[str, Any]] = run_peer,
    load_average: Callable[[], tuple[float, float, float]] = os.getloadavg,
) -> dict[str, Any]:
    """Run duetime's spike (``processes`` worker processes, ``workers`` worker loops in all), then the
    peer with the same N and ``processes``, and ``compare`` them. The peer's script is looked for before
    anything runs; PeerUnavailable (naming duetime's figure, which did run) if the peer then fails."""
    directory = peer_dir or default_peer_dir()
    peer_script(directory)
    if spike is None:
        from duetime_bench.spike import run_spike

        spike = run_spike
    load = {"before": round(load_average()[0], 2)}
    ours = spike(jobs, workers=workers, worker_processes=processes)
    load["between"] = round(load_average()[0], 2)
    try:
        theirs = peer(directory, jobs, processes)
    except PeerUnavailable as exc:
        measured = duetime_figures(ours)["starts_per_s"]
        raise PeerUnavailable(
            f"the peer ({PEER_NAME}) could not run, so there is no ratio: {exc} "
            f"(duetime's spike did run: {measured} starts/s over {jobs} jobs)"
        ) from exc
    load["after"] = round(load_average()[0], 2)
    # the host's yardstick beside the ratio: ratios of slow and fast hosts compare only with it
    return compare(jobs, processes, ours, theirs, load) | {"machine_reference_cpu_ms": reference_cpu_ms()}


def describe(result: dict[str, Any]) -> str:
    """The human table: one row per key figure, duetime beside the peer, then the ratio."""
    ours, theirs = result["duetime"], result["peer"]
    rows = [f"{'figure':28} {'duetime':>12} {theirs['name']:>28}"]
    for key in KEY_FIGURES:
        rows.append(f"{key.replace('_', ' '):28} {_cell(ours[key]):>12} {_cell(theirs[key]):>28}")
    rows.append(f"{'ratio starts/s (duetime/peer)':28} {_cell(result['ratio_starts_per_s']):>12}")
    rows.append(f"starts/s: {result['starts_per_s_definition']}")
    rows.append(f"order: {result['order']}; load average (1 min): {result['load_average_1m']}")
    if result.get("machine_reference_cpu_ms") is not None:
        rows.append(f"the host's yardstick (bench.machine_speed): {result['machine_reference_cpu_ms']} ms")
    return "\n".join(rows)


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)
