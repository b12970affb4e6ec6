"""`duetime bench spike --teams N` deals the spike's jobs to N teams, so its batches hold runs of as many
teams as the seed's midnight (the team slots' writes a run)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

from duetime_bench.spike import bench_team_ids, spike_jobs

MINUTE = datetime(2026, 12, 7, 0, 0, tzinfo=UTC)


def test_the_jobs_are_dealt_round_robin_to_the_teams_the_first_being_the_benchs_own() -> None:
    jobs = spike_jobs(10, MINUTE, 0, 0.0, "http://127.0.0.1:9/", MINUTE, teams=4)
    assert bench_team_ids(4) == ["bench", "bench-1", "bench-2", "bench-3"]
    assert [job.team for job in jobs[:5]] == ["bench", "bench-1", "bench-2", "bench-3", "bench"]
    assert Counter(job.team for job in jobs) == {"bench": 3, "bench-1": 3, "bench-2": 2, "bench-3": 2}


def test_one_team_by_default() -> None:
    assert {job.team for job in spike_jobs(5, MINUTE, 0, 0.0, "http://127.0.0.1:9/", MINUTE)} == {"bench"}
