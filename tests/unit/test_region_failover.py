"""A region lost mid-minute and the warm standby promoted (docs/regions.md), on the simulation of
``duetime_bench.regions``: the real poller and worker on two copies of the in-memory twin, item writes
replicated after a lag, a manual clock. Each promotion step is shown necessary by the loss its absence
causes (or, for the re-send of waiting runs, the lateness)."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from duetime.adapters.memory import MemoryStore
from duetime.domain.ids import split_run_id
from duetime.domain.models import Team
from duetime.domain.timeutil import minute_bucket, parse_iso_z
from duetime_bench.regions import (
    T0,
    PromotionSteps,
    RegionsConfig,
    Replication,
    region_jobs,
    run_regions,
    stored_items,
)

# B runs two minutes past the window: enough when every step is taken (nothing is left to a queue deadline)
QUICK = {"settle_s": 120.0}


@pytest.mark.parametrize(
    ("lag_s", "lost_at_s"),
    [
        (1.0, 121.3),  # 1.3 s after the :00 burst, its claims still arriving and waiting for workers
        (1.0, 150.5),  # mid-minute
        (1.0, 181.0),  # a second after the :00 burst
        (5.0, 165.3),
        (40.0, 200.0),  # a lag far above AWS's typical second: more of A's last writes never arrive
    ],
)
def test_no_due_time_of_the_window_goes_without_a_call_when_the_region_is_lost(
    lag_s: float, lost_at_s: float
) -> None:
    result = run_regions(RegionsConfig(lag_s=lag_s, lost_at_s=lost_at_s, **QUICK))

    assert result["lost"] == 0, result["lost_examples"]
    assert result["due_in_window"] > 900  # 300 jobs, five minutes: the window is full
    assert result["calls_before_loss"] > 0  # A ran, and B went on after it
    assert result["writes_lost_with_region"] > 0  # the loss did drop writes not yet replicated
    # Times due during the outage ran late by about the failover, not later
    assert result["failover_s"] - 1 <= result["late_max_s"] <= result["failover_s"] + 20


def test_a_repeat_is_a_call_under_the_same_run_id_and_only_for_what_the_loss_cut() -> None:
    result = run_regions(RegionsConfig(lag_s=5.0, lost_at_s=150.5, **QUICK))

    assert result["lost"] == 0
    # runs called in A whose results (or rows) never reached B are called again: under the same run id
    assert 0 < result["runs_repeated"] <= result["writes_lost_with_region"]
    assert result["runs_repeated"] < result["due_in_window"] / 20


def test_without_reclaiming_the_lag_window_a_claim_whose_run_row_never_arrived_is_lost() -> None:
    """The claim's run row and its job's schedule move are separate items: the move can arrive and the row
    not (AWS replicates items independently, in no order across them). B's schedule has then passed a time
    that has no run: nothing in the engine ever makes it."""
    without = run_regions(
        RegionsConfig(lag_s=1.0, lost_at_s=181.0, steps=PromotionSteps(reclaim_window=False), **QUICK)
    )
    taken = run_regions(RegionsConfig(lag_s=1.0, lost_at_s=181.0, **QUICK))

    assert without["lost"] > 0
    # the lost times are the last seconds' claims: fired just before the loss (at most 45 s of jitter)
    for run_id in without["lost_examples"]:
        nominal = parse_iso_z(split_run_id(run_id)[1])
        assert T0 + timedelta(seconds=181 - 45 - 5) <= nominal <= T0 + timedelta(seconds=181)
    assert taken["lost"] == 0 and taken["promotion"]["runs_reclaimed"] > 0


def test_without_rewinding_the_marks_a_job_row_left_behind_a_replicated_mark_is_never_swept() -> None:
    """The jobs table's replication two minutes behind the control table's (a degraded partition: AWS
    replicates each in parallel): B holds marks past buckets its job rows still sit in."""
    without = run_regions(
        RegionsConfig(jobs_lag_s=120.0, lost_at_s=200.0, steps=PromotionSteps(rewind_marks=False), **QUICK)
    )
    taken = run_regions(RegionsConfig(jobs_lag_s=120.0, lost_at_s=200.0, **QUICK))

    assert without["lost"] > 50  # every later time of those jobs, not only the loss's minute
    assert taken["lost"] == 0 and taken["promotion"]["marks_rewound"] == 64


def test_without_a_catch_up_window_covering_the_outage_its_due_times_misfire() -> None:
    without = run_regions(
        RegionsConfig(failover_s=180.0, steps=PromotionSteps(catch_up_grace=False), **QUICK)
    )
    taken = run_regions(RegionsConfig(failover_s=180.0, **QUICK))

    assert without["lost"] > 100  # every time older than 60 s at B's first sweep: skipped by run_once
    assert taken["lost"] == 0 and taken["promotion"]["misfire_grace_s"] >= 180 + 300


def test_without_resending_the_waiting_runs_they_wait_for_their_queue_deadline() -> None:
    without = run_regions(RegionsConfig(lost_at_s=181.0, steps=PromotionSteps(resend_waiting=False)))
    taken = run_regions(RegionsConfig(lost_at_s=181.0))

    assert without["lost"] == 0  # the reaper sends them at last: late, not lost
    assert without["late_max_s"] > 500 > 100 > taken["late_max_s"]
    assert taken["promotion"]["messages_resent"] > 0


def test_replication_applies_each_item_after_its_own_lag_and_drops_what_had_not_arrived() -> None:
    source, replica = MemoryStore(), MemoryStore()
    replication = Replication(source, replica, lag_s=2.0, rng=random.Random(3))
    assert stored_items(replica) == stored_items(source)  # in step before the run

    jobs = region_jobs(40, T0, random.Random(1))
    source.put_team(Team(team_id="regions", max_concurrency=5))
    for job in jobs:
        source.put_job(job, T0)
    source.ensure_low_water_mark(0, minute_bucket(T0))
    replication.capture(T0)

    replication.deliver(T0 + timedelta(seconds=1.5))
    arrived = {key for key in stored_items(replica) if key[0] == "jobs"}
    assert 0 < len(arrived) < len(jobs)  # written together, arriving apart (lags of 1 to 3 s)
    replication.lose_source(T0 + timedelta(seconds=2.0))
    assert 0 < replication.dropped < replication.captured
    assert replication.applied + replication.dropped == replication.captured
    replication.deliver(T0 + timedelta(minutes=5))
    assert len(stored_items(replica)) < len(stored_items(source))  # what was dropped never arrives
