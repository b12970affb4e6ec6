"""`duetime bench versus`: both benches' figures side by side, and no figure when the peer cannot run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from duetime_bench.versus import (
    PeerUnavailable,
    compare,
    default_peer_dir,
    run_peer,
    run_versus,
    starts_per_s_from_due,
)

SPIKE = {
    "jobs": 100,
    "runs_started": 100,
    "lost": 0,
    "starts_per_s": 50.0,  # first start to last
    "lateness_p50_s": 1.0,
    "lateness_p99_s": 3.9,
    "lateness_max_s": 4.0,
}
PEER = {
    "jobs": 100,
    "started": 100,
    "lost": 0,
    "starts_per_s": 50.0,
    "lateness_p50_s": 0.5,
    "lateness_p99_s": 1.9,
    "lateness_max_s": 2.0,
    "duplicates": 0,
}


def peer_dir_with(tmp_path: Path, script: str) -> Path:
    (tmp_path / "apscheduler_run.sh").write_text(script)
    return tmp_path


def test_the_peers_live_beside_the_repository() -> None:
    assert default_peer_dir(Path("/work/main")) == Path("/work/shared/peers")


def test_starts_per_second_are_compared_on_one_definition() -> None:
    assert starts_per_s_from_due(100, 4.0) == 25.0
    assert starts_per_s_from_due(0, 4.0) is None and starts_per_s_from_due(100, None) is None
    result = compare(100, 2, SPIKE, PEER, {"before": 1.0})
    assert result["duetime"]["starts_per_s"] == 25.0  # 100 / 4.0 s from the due instant, not 50
    assert result["duetime"]["starts_per_s_first_to_last"] == 50.0
    assert result["peer"]["starts_per_s"] == 50.0
    assert result["ratio_starts_per_s"] == 0.5  # below 1 is reported as it is
    assert "duetime" in result["order"] and result["load_average_1m"] == {"before": 1.0}


def test_the_peer_result_is_its_last_json_line(tmp_path: Path) -> None:
    directory = peer_dir_with(tmp_path, f"echo setting up >&2\necho 'not json'\necho '{json.dumps(PEER)}'\n")
    assert run_peer(directory, 100, 2) == PEER


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ("echo 'peer set-up failed' >&2; exit 1\n", "peer set-up failed"),
        ("echo '' \n", "printed no result"),
        ("echo '{\"error\": 1}'\n", "printed no result"),
    ],
)
def test_a_peer_that_cannot_run_gives_no_figure(tmp_path: Path, script: str, reason: str) -> None:
    with pytest.raises(PeerUnavailable, match=reason):
        run_peer(peer_dir_with(tmp_path, script), 100, 2)


def test_a_missing_peer_is_found_out_before_the_spike_runs(tmp_path: Path) -> None:
    spikes: list[int] = []

    def spike(jobs: int, **_: Any) -> dict[str, Any]:
        spikes.append(jobs)
        return SPIKE

    with pytest.raises(PeerUnavailable, match="no peer script"):
        run_versus(100, peer_dir=tmp_path / "nowhere", spike=spike)
    assert spikes == []


def test_duetime_runs_first_then_the_peer_with_the_same_n(tmp_path: Path) -> None:
    calls: list[tuple[str, int, int]] = []
    loads = iter([(1.0, 0, 0), (2.0, 0, 0), (3.0, 0, 0)])

    def spike(jobs: int, workers: int, worker_processes: int) -> dict[str, Any]:
        calls.append(("duetime", jobs, worker_processes))
        return SPIKE

    def peer(directory: Path, jobs: int, processes: int) -> dict[str, Any]:
        calls.append(("peer", jobs, processes))
        return PEER

    directory = peer_dir_with(tmp_path, "exit 0\n")
    result = run_versus(100, 2, peer_dir=directory, spike=spike, peer=peer, load_average=lambda: next(loads))
    assert calls == [("duetime", 100, 2), ("peer", 100, 2)]
    assert result["load_average_1m"] == {"before": 1.0, "between": 2.0, "after": 3.0}
    assert result["ratio_starts_per_s"] == 0.5
    assert result["machine_reference_cpu_ms"] > 0  # the host's yardstick beside the ratio


def test_a_peer_failing_after_the_spike_names_what_did_run(tmp_path: Path) -> None:
    directory = peer_dir_with(tmp_path, "echo 'peer set-up failed' >&2; exit 1\n")
    with pytest.raises(PeerUnavailable, match=r"no ratio.*peer set-up failed.*25.0 starts/s"):
        run_versus(100, peer_dir=directory, spike=lambda jobs, **_: SPIKE, load_average=lambda: (0.0, 0, 0))


def test_the_command_exits_non_zero_and_says_why_when_the_peer_is_missing(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "duetime.cli",
            "bench",
            "versus",
            "--jobs",
            "10",
            "--peer-dir",
            str(tmp_path),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert out.stdout == ""
    assert "no peer script" in out.stderr and str(tmp_path) in out.stderr
