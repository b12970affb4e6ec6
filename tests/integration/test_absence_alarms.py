"""The absence alarms on DynamoDB Local (issue 50, item 2): the reconciler ticking every minute on a fake
clock over real tables, and the alarms evaluated over the reports it kept, as ``duetime system alarms
--local`` evaluates them. Claiming stops with jobs due: the unclaimed and missed-fire alarms go to ALARM;
claiming resumes: they clear. Reports stop: the heartbeat goes to ALARM; they resume: it clears.

What DynamoDB Local cannot show: CloudWatch's own evaluation of the deployed alarms (its delays, its
treatment of late data points); ``tests/infra`` checks that the deployed alarms are these definitions."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

from duetime.adapters.dynamodb.store import DynamoStore
from duetime.domain.alarms import RECONCILER_ALARMS, AlarmState, Sample, evaluate
from duetime.domain.claim_plan import make_claim, plan_claim
from duetime.domain.clock import ManualClock
from duetime.domain.ids import partition_of
from duetime.domain.models import Job
from duetime.domain.timeutil import minute_bucket
from duetime.scheduling.reconcile import Reconciler, ReconcilerConfig

from ..twin_support import T0, a_job, at
from .dynamo_tables import store_on_fresh_tables

pytestmark = pytest.mark.integration


@pytest.fixture
def store() -> Iterator[DynamoStore]:
    with store_on_fresh_tables(timedelta(seconds=30)) as made:
        yield made


def alarm_states(store: DynamoStore, now: datetime) -> dict[str, AlarmState]:
    samples = [Sample(r.at, dict(r.values)) for r in store.recent_reconciliations(30)]
    return {r.name: r.state for r in evaluate(RECONCILER_ALARMS, samples, now)}


def put(store: DynamoStore, job: Job, now: datetime) -> None:
    from duetime.adapters.dynamodb.codec import job_to_item

    store.ensure_low_water_mark(partition_of(job.id), minute_bucket(now))
    store.client.put_item(TableName=store.names.jobs, Item=job_to_item(job, now))


def claim_and_start(store: DynamoStore, job_id: str, now: datetime) -> None:
    """What a poller and a worker do once they are back: the due time claimed, its run started."""
    job = store.get_job(job_id)
    assert job is not None
    outcome = store.claim([make_claim(plan_claim(job, now), now, timedelta(minutes=10))], now)
    for run in outcome.runs:
        assert store.acquire_lease(run.run_id, run.attempt, "worker", now, now + timedelta(minutes=1))
    store.advance_low_water_marks({partition_of(job_id): minute_bucket(now)})


def test_unclaimed_due_jobs_fire_the_alarms_and_claiming_again_clears_them(store: DynamoStore) -> None:
    jobs = [a_job(at(5)) for _ in range(3)]
    for job in jobs:
        put(store, job, at(-60))
    clock = ManualClock(at(30))
    reconciler = Reconciler(
        store, clock, ReconcilerConfig(partitions=sorted({partition_of(j.id) for j in jobs}))
    )
    reconciler.tick()
    assert set(alarm_states(store, clock.now()).values()) == {AlarmState.OK}

    for _ in range(3):  # the pollers stopped: three minutes go by with the jobs due and unclaimed
        clock.advance(60)
        reconciler.tick()
    states = alarm_states(store, clock.now())
    assert states["OldestUnclaimedDue"] is AlarmState.ALARM
    assert states["MissedFires"] is AlarmState.ALARM
    assert states["EngineHeartbeat"] is AlarmState.OK  # the reconciler itself kept reporting

    for _ in range(2):  # the pollers are back: each minute's due times claimed, their runs started
        for job in jobs:
            claim_and_start(store, job.id, clock.now())
        clock.advance(60)
        reconciler.tick()
    assert set(alarm_states(store, clock.now()).values()) == {AlarmState.OK}


def test_runs_claimed_and_never_started_fire_the_queued_alarm(store: DynamoStore) -> None:
    job = a_job(at(5))
    put(store, job, at(-60))
    outcome = store.claim([make_claim(plan_claim(job, at(6)), at(6), timedelta(minutes=10))], at(6))
    store.advance_low_water_marks({partition_of(job.id): minute_bucket(at(6))})
    clock = ManualClock(at(30))
    reconciler = Reconciler(store, clock, ReconcilerConfig(partitions=[partition_of(job.id)]))
    for _ in range(5):  # no worker takes the run
        clock.advance(60)
        reconciler.tick()
    assert alarm_states(store, clock.now())["OldestQueued"] is AlarmState.ALARM

    (run,) = outcome.runs
    assert store.acquire_lease(run.run_id, 1, "worker", clock.now(), clock.now() + timedelta(minutes=1))
    for _ in range(2):
        clock.advance(60)
        reconciler.tick()
    assert alarm_states(store, clock.now())["OldestQueued"] is AlarmState.OK


def test_the_heartbeat_fires_when_reports_stop_and_clears_when_they_resume(store: DynamoStore) -> None:
    clock = ManualClock(T0)
    reconciler = Reconciler(store, clock, ReconcilerConfig(partitions=[0]))
    for _ in range(3):
        reconciler.tick()
        clock.advance(60)
    assert alarm_states(store, clock.now())["EngineHeartbeat"] is AlarmState.OK

    clock.advance(180)  # the reconciler stopped reporting
    assert alarm_states(store, clock.now())["EngineHeartbeat"] is AlarmState.ALARM

    for _ in range(3):  # it reports again
        reconciler.tick()
        clock.advance(60)
    assert alarm_states(store, clock.now() - timedelta(seconds=30))["EngineHeartbeat"] is AlarmState.OK
