"""The reconciler's ports (``WaitingRuns``, ``ReconcilerRecord``) on the twin and on DynamoDB Local alike,
and the reconciler itself over both: what was due and not claimed, and what was claimed and not started,
are seen from the stores."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from duetime.domain.alarms import MISSED_FIRES, OLDEST_QUEUED, OLDEST_UNCLAIMED_DUE, RECONCILIATIONS
from duetime.domain.claim_plan import make_claim, plan_claim
from duetime.domain.clock import ManualClock
from duetime.domain.ids import partition_of
from duetime.ports import ReconcilerReport
from duetime.scheduling.reconcile import Reconciler, ReconcilerConfig

from ..twin_support import a_job, at
from .conftest import against
from .test_store_contract import DEADLINE, Subject, ids_in_partition, subjects

PARTITION = 7


@pytest.fixture(params=against("dynamodb"))
def subject(request: pytest.FixtureRequest) -> Iterator[Subject]:
    yield from subjects(request)


def claimed_together(subject: Subject, fire_seconds: list[float], claimed_at: float) -> list[str]:
    """Jobs of ``PARTITION`` due at T0 + each of ``fire_seconds``, claimed in one call (3 or more: the
    DynamoDB store covers their runs with one reap ticket); their run ids."""
    ids = ids_in_partition(PARTITION, len(fire_seconds))
    jobs = [a_job(at(s), job_id) for s, job_id in zip(fire_seconds, ids, strict=True)]
    for job in jobs:
        subject.put_job(job, at(-30))
    now = at(claimed_at)
    outcome = subject.store.claim([make_claim(plan_claim(job, now), now, DEADLINE) for job in jobs], now)
    return [run.run_id for run in sorted(outcome.runs, key=lambda r: r.fire_at)]


@pytest.mark.parametrize("together", [1, 3])
def test_the_oldest_queued_fire_is_the_earliest_run_no_worker_started(
    subject: Subject, together: int
) -> None:
    fires = [0.0, 5.0, 9.0][:together] if together == 3 else [0.0]
    run_ids = claimed_together(subject, fires, claimed_at=10)
    if together == 1:
        run_ids += claimed_together(subject, [5.0], claimed_at=10)
    assert subject.store.oldest_queued_fire(PARTITION, 25) == at(0)

    assert subject.store.acquire_lease(run_ids[0], 1, "worker-a", at(11), at(71)) is not None
    assert subject.store.oldest_queued_fire(PARTITION, 25) == at(5)  # the started one no longer counts
    assert subject.store.oldest_queued_fire(PARTITION + 1, 25) is None  # another partition waits for none


def test_no_queued_run_when_every_run_started(subject: Subject) -> None:
    (run_id,) = claimed_together(subject, [0.0], claimed_at=1)
    assert subject.store.acquire_lease(run_id, 1, "worker-a", at(2), at(62)) is not None
    assert subject.store.oldest_queued_fire(PARTITION, 25) is None


def test_reports_are_kept_and_read_newest_first(subject: Subject) -> None:
    for minute in range(4):
        subject.store.record_reconciliation(ReconcilerReport(at(60 * minute), {"MissedFires": float(minute)}))
    recent = subject.store.recent_reconciliations(2)
    assert [(r.at, dict(r.values)) for r in recent] == [
        (at(180), {"MissedFires": 3.0}),
        (at(120), {"MissedFires": 2.0}),
    ]


def test_the_reconciler_sees_a_due_job_nobody_claimed_and_a_run_nobody_started(subject: Subject) -> None:
    (late_job,) = ids_in_partition(PARTITION, 1)
    subject.put_job(a_job(at(0), late_job), at(-30))  # due at T0, never claimed
    (queued_job,) = ids_in_partition(PARTITION + 1, 1)
    job = a_job(at(20), queued_job)
    subject.put_job(job, at(-30))
    subject.store.claim([make_claim(plan_claim(job, at(21)), at(21), DEADLINE)], at(21))  # never started
    assert partition_of(queued_job) == PARTITION + 1

    config = ReconcilerConfig(grace=timedelta(seconds=30), misfire_grace=timedelta(seconds=60))
    early = Reconciler(subject.store, ManualClock(at(20)), config).tick()
    assert (early.missed_fires, early.oldest_unclaimed_due_seconds) == (0, 0.0)  # within the grace

    later = Reconciler(subject.store, ManualClock(at(100)), config).tick()
    assert later.missed_fires == 1  # 100 s late, past the 60 s catch-up window
    assert later.oldest_unclaimed_due_seconds == 100.0
    assert later.oldest_queued_seconds == 80.0
    (kept,) = subject.store.recent_reconciliations(1)
    assert kept.at == at(100)
    assert dict(kept.values) == {
        MISSED_FIRES: 1.0,
        OLDEST_UNCLAIMED_DUE: 100.0,
        OLDEST_QUEUED: 80.0,
        RECONCILIATIONS: 1.0,
    }
