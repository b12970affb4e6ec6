"""Claims paced to what the tables take (``duetime.scheduling.claim_pace``): the bucket, and a paced poller's
seconds."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from duetime.adapters.memory import MemoryStore
from duetime.domain.clock import ManualClock
from duetime.domain.ids import make_run_id
from duetime.domain.models import Team
from duetime.scheduling.claim_pace import BURST_SECONDS, ClaimPace
from duetime.scheduling.poller import Poller, PollerConfig

from .test_fan_out import MINUTE_START, PARTITIONS, jobs_in
from .test_poller_lease_loop import NoAlerts, Queue


def test_the_bucket_holds_a_tenth_of_a_seconds_claims_and_refills_at_its_rate() -> None:
    pace = ClaimPace(1000, MINUTE_START)
    assert pace.allowance(MINUTE_START) == 1000 * BURST_SECONDS == 100
    pace.spend(100, MINUTE_START)
    assert pace.allowance(MINUTE_START) == 0
    assert pace.next_claim_at(MINUTE_START) == MINUTE_START + timedelta(milliseconds=1)
    assert pace.allowance(MINUTE_START + timedelta(milliseconds=50)) == 50
    assert pace.allowance(MINUTE_START + timedelta(seconds=5)) == 100  # never more than its burst
    assert ClaimPace(2, MINUTE_START).allowance(MINUTE_START) == 1  # at least one claim
    with pytest.raises(ValueError, match="claims_per_second"):
        ClaimPace(0, MINUTE_START)


def test_a_paced_poller_claims_no_more_in_any_second_than_its_rate_allows_and_claims_every_row() -> None:
    """300 rows due at one second, a poller paced to 50 claims a second: its preloaded fire and its sweeps
    together claim at most 55 a second (the burst's tenth on top), and every row once."""
    store = MemoryStore()
    store.put_team(Team(team_id="team-a", max_concurrency=1000))
    jobs = [job for partition in PARTITIONS for job in jobs_in(store, partition, 75)]
    clock = ManualClock(MINUTE_START - timedelta(seconds=15))
    config = PollerConfig(partitions=PARTITIONS, preload_lead=timedelta(seconds=10), claims_per_second=50)
    poller = Poller(store, store, Queue(), NoAlerts(), clock, config)
    poller.run_until(stop=lambda: clock.now() >= MINUTE_START + timedelta(seconds=10), sleep=clock.advance)
    runs = [store.get_run(make_run_id(job.id, MINUTE_START)) for job in jobs]
    assert all(run is not None for run in runs), "a row was never claimed"
    per_second = Counter(int((run.created_at - MINUTE_START).total_seconds()) for run in runs if run)
    assert max(per_second.values()) <= 55 and len(per_second) >= 6
