"""One contract for every store: the tests below run against the in-memory twin (``MemoryStore``) and
DynamoDB Local (``DynamoStore``) alike, as APScheduler 4 runs one suite against every data store. They read
as the contract of ``duetime.ports`` (``JobStore``, ``RunStore``, ``TeamStore``, ``PollerLeaseStore``).

What the twin is for: logic tests of the poller, the worker, the reaper and the poller lease that run in
milliseconds on a ``ManualClock`` (``tests/unit/test_worker_on_memory.py``), with the same conditional
semantics as DynamoDB because this suite holds both to them. What it cannot show: anything about
DynamoDB's throughput, throttling, latency, request counts, size limits (items, transactions, batches) or
eventual consistency (the twin's indexes are always current); those stay the business of the tests on
DynamoDB Local and of the benchmarks on AWS.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest

from duetime.adapters.dynamodb.codec import job_to_item
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.dynamodb.tables import TableNames
from duetime.adapters.memory import MemoryStore
from duetime.domain.claim_plan import make_claim, plan_claim
from duetime.domain.due_index import due_key
from duetime.domain.ids import make_run_id, new_job_id, partition_of
from duetime.domain.models import Job, Run, RunResult, RunStatus, Team
from duetime.domain.timeutil import minute_bucket
from duetime.ports import ClaimOutcome, Notice, ResultWrite, RunMessage, UnreadableRow
from duetime.ports.queue import decode, encode

from ..twin_support import T0, a_job, at
from .conftest import TWIN, against

LEASE = timedelta(seconds=60)
DEADLINE = timedelta(minutes=10)
OK = RunResult(status_code=200, duration_ms=12)


@dataclass
class Subject:
    """A store under contract, and how a job gets into it (the API catalog's part, not a port)."""

    store: Any  # MemoryStore | DynamoStore
    put_job: Callable[[Job, datetime], None]
    # Write ``job``'s row with a payload that cannot be read, corrupted as ``CORRUPTIONS[how]`` says.
    put_unreadable: Callable[[Job, datetime, str], None]


# Payloads no release reads (an extra field is not one: stored items tolerate unknown fields).
CORRUPTIONS: dict[str, Callable[[dict[str, Any]], None]] = {
    "invalid JSON": lambda item: item.update(spec={"S": '{"name": "half a spec'}),
    "a required field missing": lambda item: item.pop("created_at"),
    "a wrong type": lambda item: item.update(spec={"S": json.dumps({**_spec(item), "retry": "twice"})}),
    "an unknown schedule kind": lambda item: item.update(
        spec={"S": json.dumps({**_spec(item), "schedule": {"lunar": "full moon"}})}
    ),
}


def _spec(item: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = json.loads(item["spec"]["S"])
    return spec


def _memory() -> Iterator[Subject]:
    store = MemoryStore()

    def put_unreadable(job: Job, now: datetime, how: str) -> None:
        store.ensure_low_water_mark(partition_of(job.id), minute_bucket(now))
        store.put_unreadable_job(job, now, f"twin: {how}")

    yield Subject(store, store.put_job, put_unreadable)


def _dynamodb(client: Any, names: TableNames) -> Subject:
    store = DynamoStore(client, names)

    def put_job(job: Job, now: datetime) -> None:
        store.ensure_low_water_mark(partition_of(job.id), minute_bucket(now))
        client.put_item(TableName=names.jobs, Item=job_to_item(job, now))

    def put_unreadable(job: Job, now: datetime, how: str) -> None:
        store.ensure_low_water_mark(partition_of(job.id), minute_bucket(now))
        item: dict[str, Any] = job_to_item(job, now)
        CORRUPTIONS[how](item)
        client.put_item(TableName=names.jobs, Item=item)

    return Subject(store, put_job, put_unreadable)


def subjects(request: pytest.FixtureRequest) -> Iterator[Subject]:
    """The store ``request.param`` names (``against``): the twin or DynamoDB Local."""
    if request.param == TWIN:
        yield from _memory()
        return
    yield _dynamodb(*request.getfixturevalue("dynamodb_tables"))


@pytest.fixture(params=against("dynamodb"))
def subject(request: pytest.FixtureRequest) -> Iterator[Subject]:
    yield from subjects(request)


def ids_in_partition(partition: int, count: int) -> list[str]:
    ids: list[str] = []
    while len(ids) < count:
        job_id = new_job_id()
        if partition_of(job_id) == partition:
            ids.append(job_id)
    return ids


def claim_run_id(job: Job) -> str:
    """The run id a claim of ``job``'s next nominal time creates."""
    assert job.state.next_nominal_at is not None
    return make_run_id(job.id, job.state.next_nominal_at)


def claim(subject: Subject, job: Job, now: datetime) -> ClaimOutcome:
    outcome: ClaimOutcome = subject.store.claim([make_claim(plan_claim(job, now), now, DEADLINE)], now)
    return outcome


def queued_runs(subject: Subject, count: int = 1) -> list[Run]:
    """``count`` runs of as many jobs, due at T0 and claimed at T0 + 1 s: queued for attempt 1."""
    runs = []
    for _ in range(count):
        job = a_job(T0)
        subject.put_job(job, at(-30))
        outcome = claim(subject, job, at(1))
        runs.extend(outcome.runs)
    assert len(runs) == count
    return runs


CLAIMED = at(1)  # the second ``queued_runs`` claims in


def lease(subject: Subject, run: Run, owner: str = "worker-a", now: datetime = CLAIMED) -> Run:
    """``owner`` takes the lease at ``now``: by default as the message arrives, the second of the claim."""
    leased: Run | None = subject.store.acquire_lease(run.run_id, run.attempt, owner, now, now + LEASE)
    assert leased is not None
    return leased


def fail_retryably(subject: Subject, leased: Run, now: datetime, retry_at: datetime) -> RunResult:
    """``worker-a`` fails ``leased`` retryably at ``now``: the next attempt waits for ``retry_at``."""
    failed = RunResult(status_code=503, duration_ms=5, retryable=True)
    assert subject.store.record_result(
        leased, "worker-a", RunStatus.RETRY_WAIT, failed, now, retry_at, retry_at + DEADLINE
    )
    return failed


def stored(subject: Subject, run_id: str) -> Run:
    run: Run | None = subject.store.get_run(run_id)
    assert run is not None
    return run


def attention(subject: Subject, run: Run, now: datetime) -> list[Any]:
    return [
        c for c in subject.store.runs_needing_attention(run.partition, now, 100) if c.run_id == run.run_id
    ]


# --- the due index --------------------------------------------------------------------------------------


def test_due_rows_come_in_fire_time_then_job_id_order(subject: Subject) -> None:
    first, second, third = sorted(ids_in_partition(7, 3))
    for job in (a_job(at(10), third), a_job(at(10), first), a_job(at(5), second)):
        subject.put_job(job, at(-30))

    jobs = subject.store.due_jobs(7, minute_bucket(T0), at(30), 10)
    rows = subject.store.due_rows(7, minute_bucket(T0), at(30), 10)

    assert [job.id for job in jobs] == [second, first, third]
    assert [(row.job_id, row.fire_at, row.version) for row in rows] == [
        (job.id, int(job.state.next_fire_at.timestamp()), 0) for job in jobs
    ]
    assert [row.job().model_dump() for row in rows] == [job.model_dump() for job in jobs]


def test_due_jobs_read_up_to_until_after_a_key_and_within_the_limit(subject: Subject) -> None:
    early, late = sorted(ids_in_partition(3, 2))
    subject.put_job(a_job(at(5), early), at(-30))
    subject.put_job(a_job(at(40), late), at(-30))
    bucket = minute_bucket(T0)

    assert [j.id for j in subject.store.due_jobs(3, bucket, at(5), 10)] == [early]  # until is inclusive
    assert [j.id for j in subject.store.due_jobs(3, bucket, at(4.9), 10)] == []  # ... to the second
    assert [j.id for j in subject.store.due_jobs(3, bucket, at(59), 1)] == [early]
    after = due_key(early, at(5))
    assert [j.id for j in subject.store.due_jobs(3, bucket, at(59), 10, after)] == [late]


@pytest.mark.parametrize("how", list(CORRUPTIONS))
def test_a_row_that_cannot_be_read_is_left_out_by_its_key_and_the_buckets_other_jobs_are_read(
    subject: Subject, how: str
) -> None:
    """One bad row is one bad job (issue 49, item 2): the read neither raises nor stops at it."""
    *good, bad = ids_in_partition(4, 6)
    for n, job_id in enumerate(good):
        subject.put_job(a_job(at(2 * n), job_id), at(-30))
    subject.put_unreadable(a_job(at(5), bad), at(-30), how)
    bucket = minute_bucket(T0)

    unreadable: list[UnreadableRow] = []
    jobs = subject.store.due_jobs(4, bucket, at(59), 10, unreadable=unreadable)

    assert [job.id for job in jobs] == good
    assert [(u.job_id, u.partition, u.bucket, u.due_key) for u in unreadable] == [
        (bad, 4, bucket, due_key(bad, at(5)))
    ]
    assert unreadable[0].error
    # Within the limit like any row: a page of 4 rows read holds the bad one and 3 good ones.
    assert len(subject.store.due_jobs(4, bucket, at(59), 4)) == 3
    # A reader that does not ask for them gets the readable jobs all the same.
    assert [job.id for job in subject.store.due_jobs(4, bucket, at(59), 10)] == good


def test_a_row_is_filed_under_the_minute_it_was_written_in_when_its_fire_time_is_older(
    subject: Subject,
) -> None:
    job = a_job(at(-300))
    subject.put_job(job, T0)
    partition = partition_of(job.id)

    assert subject.store.due_jobs(partition, minute_bucket(at(-300)), T0, 10) == []
    assert [j.id for j in subject.store.due_jobs(partition, minute_bucket(T0), T0, 10)] == [job.id]


def test_count_due_counts_a_bucket_whatever_the_fire_times_and_skips_paused_jobs(subject: Subject) -> None:
    bucket = minute_bucket(T0)
    for job_id, fire_at in zip(ids_in_partition(9, 4), (at(0), at(30), at(59), at(59)), strict=True):
        subject.put_job(a_job(fire_at, job_id), at(-30))
    (paused,) = ids_in_partition(9, 1)
    subject.put_job(a_job(at(10), paused, paused=True), at(-30))
    subject.put_job(a_job(at(60), ids_in_partition(9, 1)[0]), at(-30))  # the next minute

    assert subject.store.count_due(9, bucket) == 4
    assert subject.store.count_due(9, minute_bucket(at(60))) == 1
    assert subject.store.count_due(8, bucket) == 0


def test_a_paused_job_is_not_due_but_is_still_stored(subject: Subject) -> None:
    job = a_job(at(5), paused=True)
    subject.put_job(job, at(-30))

    assert subject.store.due_jobs(partition_of(job.id), minute_bucket(T0), at(59), 10) == []
    kept = subject.store.get_job(job.id)
    assert kept is not None and kept.model_dump() == job.model_dump()  # a store may cache more privately


# --- claims ---------------------------------------------------------------------------------------------


def test_a_claim_creates_a_queued_run_and_moves_the_schedule(subject: Subject) -> None:
    job = a_job(T0)
    subject.put_job(job, at(-30))
    now = at(1.7)

    outcome = claim(subject, job, now)

    assert (outcome.claimed_jobs, outcome.lost_races, outcome.existing_runs) == (1, 0, 0)
    (run,) = outcome.runs
    row = stored(subject, run.run_id)
    assert row.status is RunStatus.QUEUED and row.attempt == 1 and row.owner is None
    assert row.created_at == at(1) and row.queue_deadline == at(1) + DEADLINE  # to the whole second
    assert row == run.model_copy(update={"created_at": at(1), "updated_at": at(1), "queue_deadline": at(601)})
    moved = subject.store.get_job(job.id)
    assert moved is not None and moved.state.version == 1 and moved.state.next_fire_at == at(60)
    assert moved.updated_at == at(1)
    partition = partition_of(job.id)
    assert subject.store.due_jobs(partition, minute_bucket(T0), at(59), 10) == []
    assert [j.id for j in subject.store.due_jobs(partition, minute_bucket(at(60)), at(60), 10)] == [job.id]


def test_a_second_claim_of_the_same_nominal_time_is_a_lost_race(subject: Subject) -> None:
    job = a_job(T0)
    subject.put_job(job, at(-30))
    assert len(claim(subject, job, at(1)).runs) == 1

    again = claim(subject, job, at(1))  # another poller, from the same read

    assert (again.claimed_jobs, again.lost_races, again.runs) == (0, 1, [])
    moved = subject.store.get_job(job.id)
    assert moved is not None and moved.state.version == 1


def test_claims_of_several_jobs_commit_or_lose_each_on_its_own(subject: Subject) -> None:
    jobs = [a_job(T0) for _ in range(3)]
    for job in jobs:
        subject.put_job(job, at(-30))
    claim(subject, jobs[1], at(1))  # someone else claimed the middle one

    outcome = subject.store.claim([make_claim(plan_claim(job, at(1)), at(1)) for job in jobs], at(1))

    assert (outcome.claimed_jobs, outcome.lost_races) == (2, 1)
    assert sorted(run.job_id for run in outcome.runs) == sorted([jobs[0].id, jobs[2].id])


def test_a_run_row_in_the_way_is_left_alone_and_the_schedule_still_moves(subject: Subject) -> None:
    job = a_job(T0)
    subject.put_job(job, at(-30))
    (run,) = claim(subject, job, at(1)).runs
    lease(subject, run, now=at(2))
    subject.put_job(job.model_copy(update={"state": job.state.model_copy(update={"version": 5})}), at(3))
    restored = subject.store.get_job(job.id)  # a restored table: due at T0 again, its run already there

    outcome = claim(subject, restored, at(4))

    assert (outcome.claimed_jobs, outcome.existing_runs, outcome.lost_races, outcome.runs) == (1, 1, 0, [])
    assert [r.run_id for r in outcome.requeued] == [run.run_id]  # sent again; its worker drops the message
    assert stored(subject, run.run_id).status is RunStatus.RUNNING  # left as it was
    moved = subject.store.get_job(job.id)
    assert moved is not None and moved.state.version == 6 and moved.state.next_fire_at == at(60)


def test_a_claim_whose_job_was_edited_since_it_was_read_writes_nothing(subject: Subject) -> None:
    job = a_job(T0)
    subject.put_job(job, at(-30))
    edited = job.model_copy(update={"state": job.state.model_copy(update={"version": 1})})
    subject.put_job(edited, at(0))  # e.g. paused or moved, after the poller read the row (or preloaded it)

    outcome = claim(subject, job, at(1))

    assert (outcome.claimed_jobs, outcome.lost_races, outcome.runs, outcome.requeued) == (0, 1, [], [])
    assert subject.store.get_run(claim_run_id(job)) is None  # no run for the time the edit took away
    assert subject.store.get_job(job.id).state == edited.state


def test_a_claim_of_a_deleted_job_is_a_lost_race(subject: Subject) -> None:
    job = a_job(T0)

    outcome = claim(subject, job, at(1))  # never stored (or deleted since it was read)

    assert (outcome.claimed_jobs, outcome.lost_races, outcome.runs) == (0, 1, [])
    assert subject.store.get_run(claim_run_id(job)) is None and subject.store.get_job(job.id) is None


def test_a_misfired_claim_records_its_skipped_times_once_its_move_landed_and_never_queues_them(
    subject: Subject,
) -> None:
    job = a_job(T0, misfire="skip")  # a 1-minute job due at T0, claimed at T0 + 3 min 10 s: 3 times missed
    subject.put_job(job, at(-30))
    in_the_way = make_run_id(job.id, at(60))
    other = claim(subject, a_job(at(60), job_id=job.id), at(61))  # a row already there for T0 + 1 min
    assert [r.run_id for r in other.runs] == [in_the_way]
    subject.put_job(job.model_copy(update={"state": job.state.model_copy(update={"version": 1})}), at(62))
    restored = subject.store.get_job(job.id)

    outcome = claim(subject, restored, at(190))

    assert (outcome.claimed_jobs, [r.nominal_at for r in outcome.runs], outcome.requeued) == (
        1,
        [at(180)],
        [],
    )
    assert sorted(r.nominal_at for r in outcome.skipped) == [T0, at(120)]  # not the row in the way
    for record in outcome.skipped:
        row = stored(subject, record.run_id)
        assert (row.status, row.finished_at, row.queue_deadline) == (RunStatus.SKIPPED, at(190), None)
        assert row.result is not None and "misfire policy skip" in (row.result.error or "")
    assert stored(subject, in_the_way).status is RunStatus.QUEUED  # left as it was
    assert subject.store.acquire_lease(make_run_id(job.id, T0), 1, "w", at(191), at(251)) is None
    assert attention(subject, outcome.skipped[0], at(10_000)) == []  # nothing for the reaper
    again = claim(subject, restored, at(190))  # a poller that read the same version: lost, records nothing
    assert (again.claimed_jobs, again.skipped) == (0, [])


@pytest.mark.parametrize("overlap", ["skip", "buffer_one"])
def test_a_claim_under_an_overlap_policy_writes_its_run_and_the_jobs_active_run_together(
    subject: Subject, overlap: str
) -> None:
    job = a_job(T0, overlap=overlap)
    subject.put_job(job, at(-30))

    (run,) = claim(subject, job, at(1)).runs

    moved = subject.store.get_job(job.id)
    assert moved is not None and moved.state.active_run == run.run_id and moved.state.version == 1
    assert subject.store.active_runs([run.run_id, "gone@2026-12-01T00:00:00Z"]) == {
        run.run_id: stored(subject, run.run_id)
    }
    stale = claim(subject, job, at(1))  # another poller, from the same read: neither row nor pointer
    assert (stale.claimed_jobs, stale.lost_races, stale.runs) == (0, 1, [])
    assert subject.store.get_job(job.id).state.active_run == run.run_id


def test_an_overlap_claim_whose_job_changed_since_it_was_read_writes_no_run(subject: Subject) -> None:
    job = a_job(T0, overlap="skip")
    subject.put_job(job, at(-30))
    read = subject.store.get_job(job.id)
    plan = make_claim(plan_claim(read, at(1)), at(1), DEADLINE)
    subject.put_job(job.model_copy(update={"state": job.state.model_copy(update={"version": 3})}), at(0.5))

    outcome = subject.store.claim([plan], at(1))

    assert (outcome.claimed_jobs, outcome.lost_races, outcome.runs) == (0, 1, [])
    assert subject.store.get_run(claim_run_id(job)) is None
    assert subject.store.get_job(job.id).state.active_run is None


def test_an_overlap_claim_leaves_a_row_in_its_way_and_names_it_the_active_run(subject: Subject) -> None:
    job = a_job(T0, overlap="skip")
    subject.put_job(job, at(-30))
    (in_the_way,) = claim(subject, a_job(T0, job_id=job.id), at(1)).runs  # as an allow job wrote it
    subject.put_job(job.model_copy(update={"state": job.state.model_copy(update={"version": 1})}), at(2))

    outcome = claim(subject, subject.store.get_job(job.id), at(3))

    assert (outcome.claimed_jobs, outcome.runs, [r.run_id for r in outcome.requeued]) == (
        1,
        [],
        [in_the_way.run_id],
    )
    moved = subject.store.get_job(job.id)
    assert moved is not None and moved.state.active_run == in_the_way.run_id and moved.state.version == 2


def test_a_buffered_run_keeps_the_run_it_waits_for_as_stored(subject: Subject) -> None:
    job = a_job(T0, overlap="buffer_one")
    subject.put_job(job, at(-30))
    (first,) = claim(subject, job, at(1)).runs
    lease(subject, first, now=at(2))
    moved = subject.store.get_job(job.id)
    running = subject.store.active_runs([first.run_id])[first.run_id]

    outcome = subject.store.claim([make_claim(plan_claim(moved, at(61), active=running), at(61))], at(61))

    (second,) = outcome.runs
    assert second.waits_for == first.run_id == stored(subject, second.run_id).waits_for
    assert subject.store.get_runs([second.run_id])[second.run_id].waits_for == first.run_id
    assert subject.store.get_job(job.id).state.active_run == second.run_id


def test_a_low_water_mark_is_set_once_and_only_moves_forward(subject: Subject) -> None:
    assert subject.store.low_water_marks([61]) == {}
    subject.store.ensure_low_water_mark(61, "2026-12-01T10:00")
    subject.store.ensure_low_water_mark(61, "2026-12-01T09:00")
    subject.store.advance_low_water_marks({61: "2026-12-01T09:59"})
    assert subject.store.low_water_marks([61, 62]) == {61: "2026-12-01T10:00"}
    subject.store.ensure_low_water_mark(62, "2026-12-01T10:00")
    # many at once (more than one request's 25), one of them behind its own: that one stays
    many = {61: "2026-12-01T10:05", 62: "2026-12-01T09:30", **{p: "2026-12-01T10:07" for p in range(30)}}
    for partition in range(30):
        subject.store.ensure_low_water_mark(partition, "2026-12-01T10:00")
    subject.store.advance_low_water_marks({**many, 63: "2026-12-01T10:09"})  # 63 has no mark: gets none
    expected = {61: "2026-12-01T10:05", 62: "2026-12-01T10:00", **{p: "2026-12-01T10:07" for p in range(30)}}
    assert subject.store.low_water_marks([*range(30), 61, 62, 63]) == expected


# --- leases and results ----------------------------------------------------------------------------------


def test_a_lease_is_taken_only_for_the_attempt_the_run_waits_for(subject: Subject) -> None:
    (run,) = queued_runs(subject)
    store = subject.store

    assert store.acquire_lease(run.run_id, 2, "worker-a", T0, T0 + LEASE) is None  # a stale message
    assert store.acquire_lease("not-a-run-id", 1, "worker-a", T0, T0 + LEASE) is None
    assert store.acquire_lease(f"{run.job_id}@2030-01-01T00:00:00Z", 1, "worker-a", T0, T0 + LEASE) is None
    leased = lease(subject, run, now=at(2.5))
    assert store.acquire_lease(run.run_id, 1, "worker-b", at(3), at(3) + LEASE) is None  # a duplicate

    assert leased == stored(subject, run.run_id)
    assert (leased.status, leased.owner, leased.attempt) == (RunStatus.RUNNING, "worker-a", 1)
    assert leased.lease_expires_at == at(62) and leased.started_at == at(2)  # instants to the second
    assert leased.queue_deadline is None and leased.retry_at is None


def test_a_heartbeat_extends_only_a_live_lease_of_its_owner(subject: Subject) -> None:
    (run,) = queued_runs(subject)
    lease(subject, run)  # until T0 + 61 s
    store = subject.store

    assert not store.extend_lease(run.run_id, 1, "worker-b", at(20), at(80))
    assert not store.extend_lease(run.run_id, 2, "worker-a", at(20), at(80))
    assert store.extend_lease(run.run_id, 1, "worker-a", at(20), at(80))
    assert stored(subject, run.run_id).lease_expires_at == at(80)
    assert not store.extend_lease(run.run_id, 1, "worker-a", at(81), at(141))  # expired: not revived


def test_comparisons_with_now_are_made_to_the_second(subject: Subject) -> None:
    (run,) = queued_runs(subject)
    lease(subject, run)  # until T0 + 61 s
    store = subject.store

    assert store.extend_lease(run.run_id, 1, "worker-a", at(60.9), at(61))  # 60 < 61
    assert not store.extend_lease(run.run_id, 1, "worker-a", at(61.4), at(62))  # 61 is not after 61
    assert attention(subject, run, at(61.4)) == []  # ... nor before it: in its last second a lease is
    (candidate,) = attention(subject, run, at(62))  # neither held nor expired
    assert store.requeue_expired_lease(candidate, at(61.9), at(61.9) + DEADLINE) is None
    assert store.requeue_expired_lease(candidate, at(62), at(62) + DEADLINE) is not None


def test_a_stale_worker_cannot_record_a_result(subject: Subject) -> None:
    (run,) = queued_runs(subject)
    first = lease(subject, run, "worker-a")
    (candidate,) = attention(subject, run, at(62))
    requeued = subject.store.requeue_expired_lease(candidate, at(62), at(62) + DEADLINE)
    assert requeued is not None and (requeued.status, requeued.attempt) == (RunStatus.QUEUED, 2)

    assert not subject.store.record_result(first, "worker-a", RunStatus.SUCCEEDED, OK, at(63))
    second = lease(subject, requeued, "worker-b", at(64))
    assert not subject.store.record_result(second, "worker-a", RunStatus.SUCCEEDED, OK, at(65))
    assert subject.store.record_result(second, "worker-b", RunStatus.SUCCEEDED, OK, at(65.5))

    done = stored(subject, run.run_id)
    assert (done.status, done.attempt, done.owner, done.result) == (RunStatus.SUCCEEDED, 2, "worker-b", OK)
    assert done.finished_at == at(65) and done.lease_expires_at is None
    assert attention(subject, run, at(10_000)) == []  # a finished run leaves the reap index


@pytest.mark.parametrize("state", ["queued", "running", "retry_wait"])
def test_an_unfinished_run_is_cancelled_once_and_then_never_leased_kept_alive_or_recorded(
    subject: Subject, state: str
) -> None:
    (run,) = queued_runs(subject)
    leased = lease(subject, run) if state != "queued" else run
    if state == "retry_wait":
        fail_retryably(subject, leased, at(10), retry_at=at(15))

    cancelled = subject.store.cancel_run(run.run_id, at(20))

    assert cancelled is not None and cancelled == stored(subject, run.run_id)
    assert (cancelled.status, cancelled.finished_at, cancelled.lease_expires_at) == (
        RunStatus.CANCELLED,
        at(20),
        None,
    )
    assert subject.store.cancel_run(run.run_id, at(21)) is None  # once
    waiting = stored(subject, run.run_id).attempt
    assert subject.store.acquire_lease(run.run_id, waiting, "worker-b", at(22), at(82)) is None
    assert not subject.store.extend_lease(run.run_id, leased.attempt, "worker-a", at(22), at(82))
    assert not subject.store.record_result(leased, "worker-a", RunStatus.SUCCEEDED, OK, at(23))
    assert stored(subject, run.run_id).status is RunStatus.CANCELLED
    assert attention(subject, run, at(10_000)) == []  # out of the reap index: nothing for the reaper
    assert not subject.store.has_reap_work_before(run.partition, at(10_000))


def test_a_finished_run_cannot_be_cancelled(subject: Subject) -> None:
    (run,) = queued_runs(subject)
    assert subject.store.record_result(lease(subject, run), "worker-a", RunStatus.SUCCEEDED, OK, at(5))

    assert subject.store.cancel_run(run.run_id, at(6)) is None
    assert stored(subject, run.run_id).status is RunStatus.SUCCEEDED
    assert subject.store.cancel_run("no-such-job@2026-12-01T10:00:00Z", at(6)) is None


def test_a_retryable_failure_waits_for_the_next_attempt(subject: Subject) -> None:
    (run,) = queued_runs(subject)
    failed = fail_retryably(subject, lease(subject, run), at(10), retry_at=at(15))

    waiting = stored(subject, run.run_id)
    assert (waiting.status, waiting.attempt, waiting.owner) == (RunStatus.RETRY_WAIT, 2, None)
    assert (waiting.retry_at, waiting.queue_deadline, waiting.result) == (at(15), at(615), failed)
    assert subject.store.acquire_lease(run.run_id, 1, "worker-a", at(16), at(76)) is None
    assert lease(subject, waiting, "worker-b", at(16)).attempt == 2


def test_a_deferred_run_goes_back_to_the_queue_without_using_its_attempt(subject: Subject) -> None:
    (run,) = queued_runs(subject)
    lease(subject, run)

    assert not subject.store.return_to_queue(run.run_id, 1, "worker-b", at(1), at(601))
    assert subject.store.return_to_queue(run.run_id, 1, "worker-a", at(1), at(601))

    back = stored(subject, run.run_id)
    assert (back.status, back.attempt, back.owner, back.queue_deadline) == (
        RunStatus.QUEUED,
        1,
        None,
        at(601),
    )
    assert lease(subject, back, "worker-b", at(6)).attempt == 1


def test_an_expired_lease_can_be_taken_back_by_the_reaper_only(subject: Subject) -> None:
    (run,) = queued_runs(subject)
    lease(subject, run)  # until T0 + 61 s
    assert attention(subject, run, at(30)) == []
    (candidate,) = attention(subject, run, at(62))
    assert (candidate.status, candidate.attempt, candidate.reap_at) == (RunStatus.RUNNING, 1, at(61))

    assert subject.store.requeue_expired_lease(candidate, at(30), at(630)) is None  # not expired yet
    assert subject.store.acquire_lease(run.run_id, 1, "worker-b", at(62), at(122)) is None  # nor a worker
    requeued = subject.store.requeue_expired_lease(candidate, at(62), at(662))
    assert requeued is not None and requeued == stored(subject, run.run_id)
    assert (requeued.status, requeued.attempt, requeued.owner, requeued.queue_deadline) == (
        RunStatus.QUEUED,
        2,
        None,
        at(662),
    )
    assert subject.store.requeue_expired_lease(candidate, at(63), at(663)) is None  # once


def test_the_last_attempts_expired_lease_is_buried(subject: Subject) -> None:
    (run,) = queued_runs(subject)
    lease(subject, run)
    (candidate,) = attention(subject, run, at(62))
    requeued = subject.store.requeue_expired_lease(candidate, at(62), at(662))
    assert requeued is not None
    lease(subject, requeued, "worker-b", at(63))  # attempt 2 of 2, until T0 + 123 s
    (last,) = attention(subject, run, at(124))
    lost = RunResult(duration_ms=0, error="lease expired")

    assert subject.store.bury_expired_lease(last, at(100), lost) is None
    dead = subject.store.bury_expired_lease(last, at(124), lost)

    assert dead is not None and dead == stored(subject, run.run_id)
    assert (dead.status, dead.attempt, dead.result, dead.finished_at) == (RunStatus.DEAD, 2, lost, at(124))
    assert attention(subject, run, at(10_000)) == []


def test_a_lost_message_gets_one_new_deadline_per_deadline(subject: Subject) -> None:
    (run,) = queued_runs(subject)  # queued until T0 + 1 s + 10 min
    assert attention(subject, run, at(600)) == []
    (candidate,) = attention(subject, run, at(602))
    assert (candidate.status, candidate.reap_at) == (RunStatus.QUEUED, at(601))

    renewed = subject.store.renew_queue_deadline(candidate, at(602), at(1202))

    assert renewed is not None and renewed.queue_deadline == at(1202) and renewed.status is RunStatus.QUEUED
    assert subject.store.renew_queue_deadline(candidate, at(603), at(1203)) is None  # once per deadline
    assert attention(subject, run, at(603)) == []


def test_a_run_leased_late_is_taken_back_when_its_lease_expires_and_not_before(subject: Subject) -> None:
    (run,) = queued_runs(subject)
    lease(subject, run, now=at(40))  # the message waited 39 s; the lease runs until T0 + 100 s

    for now in (62, 80, 99, 100.9):  # the DynamoDB store's first check (T0 + 61 s) has come: still alive
        assert attention(subject, run, at(now)) == []
    (candidate,) = attention(subject, run, at(101))
    assert (candidate.status, candidate.attempt, candidate.reap_at) == (RunStatus.RUNNING, 1, at(100))


def test_a_long_call_kept_alive_by_heartbeats_is_never_taken_back(subject: Subject) -> None:
    (run,) = queued_runs(subject)
    lease(subject, run)
    for beat in range(20, 300, 20):  # a call of five minutes, a heartbeat every 20 s
        assert subject.store.extend_lease(run.run_id, 1, "worker-a", at(beat), at(beat) + LEASE)
        assert attention(subject, run, at(beat + 1)) == []
    (candidate,) = attention(subject, run, at(341))  # the worker died after its last heartbeat, at 280 s
    assert candidate.reap_at == at(340)


def test_a_run_still_waiting_after_its_first_check_is_resent_only_at_its_queue_deadline(
    subject: Subject,
) -> None:
    (run,) = queued_runs(subject)  # queued until T0 + 601 s: a backlog, not a lost message
    for now in (62, 130, 300, 600):
        assert attention(subject, run, at(now)) == []
    (candidate,) = attention(subject, run, at(602))
    assert (candidate.status, candidate.reap_at) == (RunStatus.QUEUED, at(601))


def test_a_worker_dying_on_a_retried_attempt_is_found_when_its_lease_expires(subject: Subject) -> None:
    (run,) = queued_runs(subject)
    fail_retryably(subject, lease(subject, run), at(10), retry_at=at(300))
    assert attention(subject, run, at(299)) == []  # waiting out a long backoff is not a lost message
    lease(subject, stored(subject, run.run_id), "worker-b", at(300))  # attempt 2, until T0 + 360 s

    assert attention(subject, run, at(360)) == []
    (candidate,) = attention(subject, run, at(361))
    assert (candidate.status, candidate.attempt, candidate.reap_at) == (RunStatus.RUNNING, 2, at(360))


# --- the batch forms -------------------------------------------------------------------------------------


def test_batched_leases_agree_with_single_ones(subject: Subject) -> None:
    one, two, three = queued_runs(subject, 3)
    store = subject.store

    single = store.acquire_lease(one.run_id, 1, "worker-a", at(2.5), at(62.5))
    batch = store.acquire_leases(
        [(two.run_id, 1), (three.run_id, 2), ("not-a-run-id", 1)], "worker-a", at(2.5), at(62.5)
    )

    assert set(batch) == {two.run_id}  # the stale attempt and the stray id took nothing
    assert single == stored(subject, one.run_id) and batch[two.run_id] == stored(subject, two.run_id)
    fields = {"status", "attempt", "owner", "lease_expires_at", "started_at", "updated_at", "queue_deadline"}
    assert single is not None and single.model_dump(include=fields) == batch[two.run_id].model_dump(
        include=fields
    )
    assert stored(subject, three.run_id).status is RunStatus.QUEUED
    attempts = [(one.run_id, 1), (two.run_id, 1)]
    assert store.extend_leases(attempts, "worker-b", at(20), at(80)) == set()
    assert store.extend_leases([*attempts, (three.run_id, 1)], "worker-a", at(20), at(80)) == {
        one.run_id,
        two.run_id,
    }
    assert (
        stored(subject, one.run_id).lease_expires_at == stored(subject, two.run_id).lease_expires_at == at(80)
    )


def carried(run: Run, **changes: Any) -> Run:
    """``run`` as its message carries it to the worker (through the queue's encoding), with ``changes``."""
    message = decode(encode(RunMessage.carrying(run.model_copy(update=changes))))
    assert message.run is not None
    return message.run


def test_leases_of_runs_carried_by_their_messages_are_the_leases_of_the_stored_runs(subject: Subject) -> None:
    one, two, three = queued_runs(subject, 3)
    attempts = [(run.run_id, 1) for run in (one, two, three)]
    as_sent = {run.run_id: carried(run) for run in (one, two, three)}
    stray = {"not-a-run-id": carried(one, run_id="not-a-run-id")}  # a stray message: no such run

    leased = subject.store.acquire_leases(
        [*attempts, ("not-a-run-id", 1)], "worker-a", at(2), at(62), carried={**as_sent, **stray}
    )

    assert leased == {run.run_id: stored(subject, run.run_id) for run in (one, two, three)}
    assert all(run.status is RunStatus.RUNNING and run.started_at == at(2) for run in leased.values())
    again = subject.store.acquire_leases(attempts, "worker-b", at(3), at(63), carried=as_sent)
    assert again == {}  # duplicates: the runs run already


def test_a_carried_run_that_is_not_the_stored_one_leases_the_stored_run(subject: Subject) -> None:
    """A forged, garbled or outdated message: the worker gets the run as stored, never as carried."""
    one, two, three = queued_runs(subject, 3)
    first_start = lease(subject, two, now=at(2)).started_at
    assert subject.store.return_to_queue(two.run_id, 1, "worker-a", at(3), at(603))  # started once
    forged = one.target.model_copy(update={"url": "https://attacker.example/steal"})
    as_sent = {
        one.run_id: carried(one, target=forged),
        two.run_id: carried(two),  # as the claim made it: not started yet
        three.run_id: carried(three, team="team-other", max_attempts=99, job_id="01JD00000000000000000000ZZ"),
    }
    attempts = [(run.run_id, 1) for run in (one, two, three)]

    leased = subject.store.acquire_leases(attempts, "worker-a", at(4), at(64), carried=as_sent)

    assert leased == {run.run_id: stored(subject, run.run_id) for run in (one, two, three)}
    assert leased[one.run_id].target == one.target
    assert leased[two.run_id].started_at == first_start == at(2)
    assert (leased[three.run_id].team, leased[three.run_id].max_attempts) == (three.team, three.max_attempts)
    assert leased[three.run_id].job_id == three.job_id


def test_batched_results_keep_each_runs_condition(subject: Subject) -> None:
    one, two, three = queued_runs(subject, 3)
    leased = subject.store.acquire_leases(
        [(run.run_id, 1) for run in (one, two, three)], "worker-a", at(2), at(62)
    )
    assert subject.store.return_to_queue(three.run_id, 1, "worker-a", at(3), at(603))  # no longer ours
    retry = RunResult(status_code=500, duration_ms=3, retryable=True)

    recorded = subject.store.record_results(
        [
            ResultWrite(leased[one.run_id], RunStatus.SUCCEEDED, OK),
            ResultWrite(leased[two.run_id], RunStatus.RETRY_WAIT, retry, at(20), at(620)),
            ResultWrite(leased[three.run_id], RunStatus.SUCCEEDED, OK),
        ],
        "worker-a",
        at(10),
    )

    assert recorded == {one.run_id, two.run_id}
    assert stored(subject, one.run_id).status is RunStatus.SUCCEEDED
    waiting = stored(subject, two.run_id)
    assert (waiting.status, waiting.attempt, waiting.retry_at) == (RunStatus.RETRY_WAIT, 2, at(20))
    assert stored(subject, three.run_id).status is RunStatus.QUEUED


def test_a_wave_records_its_results_and_frees_its_slots_together_whatever_each_result(
    subject: Subject,
) -> None:
    """The end of a worker's wave (``record_results_and_free_slots``): each result under its own condition,
    and every slot freed, the stale run's too; a slot that changed hands stays its new holder's."""
    store = subject.store
    one, two, three = queued_runs(subject, 3)
    leased = store.acquire_leases([(run.run_id, 1) for run in (one, two, three)], "worker-a", at(2), at(62))
    assert store.return_to_queue(three.run_id, 1, "worker-a", at(3), at(603))  # no longer ours
    team = Team(team_id="team-s", max_concurrency=4)
    slots = store.acquire_slots(team, [one.run_id, two.run_id, three.run_id, "lapsed"], at(2), at(4))
    ours = {run_id: slot for run_id, slot in slots.items() if run_id != "lapsed"}
    assert store.extend_slots("team-s", ours, at(62)) == set(ours)
    assert store.acquire_slot(team, "other", at(5), at(65)) == slots["lapsed"]  # its lease passed
    results = [ResultWrite(leased[run.run_id], RunStatus.SUCCEEDED, OK) for run in (one, two, three)]

    recorded = store.record_results_and_free_slots(results, "worker-a", at(10), {"team-s": slots})

    assert recorded == {one.run_id, two.run_id}
    assert [stored(subject, run.run_id).status for run in (one, two, three)] == [
        RunStatus.SUCCEEDED,
        RunStatus.SUCCEEDED,
        RunStatus.QUEUED,
    ]
    again = store.acquire_slots(team, [f"next-{i}" for i in range(4)], at(11), at(71))
    assert sorted(again.values()) == sorted(ours.values())  # "other" keeps the slot it took


def test_a_batch_naming_one_item_twice_is_refused(subject: Subject) -> None:
    one, two = queued_runs(subject, 2)
    lease(subject, one)
    lease(subject, two)
    attempts = [(one.run_id, 1), (two.run_id, 1), (one.run_id, 1)]

    with pytest.raises(Exception, match=r"duplicates|twice"):
        subject.store.extend_leases(attempts, "worker-a", at(2), at(99))
    with pytest.raises(Exception, match=r"duplicates|twice"):
        subject.store.extend_slots("team-s", {"run-1": 0, "run-2": 0}, at(60))
    # Not asserted: what a refused batch left written. The twin writes nothing; DynamoDB Local makes the
    # statements before the repeated key, then refuses the request.


# --- teams and slots --------------------------------------------------------------------------------------


def test_a_team_reads_back_as_written(subject: Subject) -> None:
    team = Team(team_id="team-t", max_concurrency=7, signing_secret="s")
    assert subject.store.get_team("team-t") is None
    subject.store.put_team(team)
    subject.store.put_team(team.model_copy(update={"max_concurrency": 8}))
    assert subject.store.get_team("team-t") == team.model_copy(update={"max_concurrency": 8})


def test_slots_never_exceed_the_cap(subject: Subject) -> None:
    team = Team(team_id="team-s", max_concurrency=3)
    runs = [f"run-{i}" for i in range(5)]

    taken = subject.store.acquire_slots(team, runs, T0, at(60))

    assert len(taken) == 3 and len(set(taken.values())) == 3 and set(taken.values()) <= {0, 1, 2}
    assert subject.store.acquire_slot(team, "run-9", at(1), at(61)) is None
    holder, slot = next(iter(taken.items()))
    subject.store.release_slot("team-s", slot, holder)
    assert subject.store.acquire_slot(team, "run-9", at(2), at(62)) == slot
    assert subject.store.acquire_slots(team, ["run-10", "run-11"], at(3), at(63)) == {}


def test_an_expired_slot_comes_back_by_itself(subject: Subject) -> None:
    team = Team(team_id="team-s", max_concurrency=1)
    assert subject.store.acquire_slot(team, "run-1", T0, at(10)) == 0

    assert subject.store.acquire_slot(team, "run-2", at(10.5), at(70)) is None  # to the second: not yet
    assert subject.store.acquire_slot(team, "run-2", at(11), at(71)) == 0
    assert not subject.store.extend_slot("team-s", 0, "run-1", at(80))  # the dead worker's run lost it


def test_only_the_holder_extends_or_frees_a_slot(subject: Subject) -> None:
    team = Team(team_id="team-s", max_concurrency=2)
    taken = subject.store.acquire_slots(team, ["run-1", "run-2"], T0, at(10))
    store = subject.store

    assert not store.extend_slot("team-s", taken["run-1"], "run-2", at(60))
    store.release_slot("team-s", taken["run-1"], "run-2")  # not its slot: nothing happens
    assert store.acquire_slot(team, "run-3", at(1), at(61)) is None
    extended = store.extend_slots("team-s", {"run-1": taken["run-1"], "run-3": taken["run-2"]}, at(60))
    assert extended == {"run-1"}
    assert store.acquire_slot(team, "run-3", at(30), at(90)) == taken["run-2"]  # only run-1's was extended
    store.release_slots("team-s", taken)  # frees run-1's slot; run-2 holds none any more
    assert store.acquire_slots(team, ["run-4", "run-5"], at(31), at(91)) == {"run-4": taken["run-1"]}


def test_a_slot_that_changed_hands_keeps_no_other_slot_of_its_batch_from_being_extended_or_freed(
    subject: Subject,
) -> None:
    """A batch's slots may share an item (the DynamoDB store writes an item's slots at once): when one of
    them passed to another run after its lease, the batch's others are still extended and freed."""
    team = Team(team_id="team-s", max_concurrency=5)
    store = subject.store
    taken = store.acquire_slots(team, [f"run-{i}" for i in range(5)], T0, at(10))
    assert sorted(taken.values()) == [0, 1, 2, 3, 4]
    lapsed = "run-2"
    kept = {run_id: slot for run_id, slot in taken.items() if run_id != lapsed}
    assert store.extend_slots("team-s", kept, at(100)) == set(kept)
    assert store.acquire_slot(team, "other", at(11), at(100)) == taken[lapsed]  # run-2's lease passed

    assert store.extend_slots("team-s", taken, at(120)) == set(kept)  # all but the lapsed one
    store.release_slots("team-s", taken)  # frees the four still held; the other run keeps its slot

    assert store.extend_slot("team-s", taken[lapsed], "other", at(130))
    again = store.acquire_slots(team, [f"next-{i}" for i in range(5)], at(12), at(60))
    assert sorted(again.values()) == sorted(kept.values())


def test_reap_work_is_seen_before_a_lease_expiry_and_gone_once_the_run_finished(subject: Subject) -> None:
    """What a quiet group's poller asks before it rests (``duetime.scheduling.quiet``): may a run of the
    partition need the reaper before an instant? Both stores answer the same here: a leased run's lease
    expiry."""
    (run,) = queued_runs(subject)
    store, partition = subject.store, run.partition
    other = (partition + 1) % 64
    leased = lease(subject, run)  # expires at CLAIMED + 60 s
    assert not store.has_reap_work_before(partition, CLAIMED + LEASE - timedelta(seconds=1))
    assert store.has_reap_work_before(partition, CLAIMED + LEASE + timedelta(seconds=1))
    assert not store.has_reap_work_before(other, at(3600))
    assert store.record_result(leased, "worker-a", RunStatus.SUCCEEDED, OK, at(5))
    assert not store.has_reap_work_before(partition, at(3600))


def test_a_run_waiting_to_retry_is_reap_work_by_its_queue_deadline_not_at_its_retry(subject: Subject) -> None:
    """Its message comes back by itself at the retry (a delayed send); the reaper is needed only if that
    message is lost, by its queue deadline. (An index of checks may say so earlier: a lease after the
    retry.)"""
    (run,) = queued_runs(subject)
    fail_retryably(subject, lease(subject, run), at(5), retry_at=at(30))
    assert not subject.store.has_reap_work_before(run.partition, at(30))
    assert subject.store.has_reap_work_before(run.partition, at(30) + DEADLINE + timedelta(seconds=1))


# --- poller leases ----------------------------------------------------------------------------------------


def test_a_poller_lease_is_taken_once_and_renewed_only_by_its_holder(subject: Subject) -> None:
    store = subject.store
    assert (
        store.read_poller_lease("0-15") == store.read_poller_lease("0-15")
        and not store.read_poller_lease("0-15").holder
    )

    taken = store.acquire_poller_lease("0-15", "inv-a", at(0.1234), at(10))

    assert taken is not None and (taken.holder, taken.term, taken.since) == ("inv-a", 1, at(0.123))
    assert store.read_poller_lease("0-15") == taken  # instants to the millisecond
    assert store.acquire_poller_lease("0-15", "inv-b", at(5), at(15)) is None
    assert store.renew_poller_lease("0-15", "inv-b", at(5), at(15)) is None
    renewed = store.renew_poller_lease("0-15", "inv-a", at(5), at(15))
    assert renewed is not None and renewed.expires_at == at(15) and renewed.term == 1
    assert store.renew_poller_lease("0-15", "inv-a", at(15.001), at(25)) is None  # expired: not revived


def test_poller_leases_read_together_are_each_as_read_alone(subject: Subject) -> None:
    store = subject.store
    store.acquire_poller_lease("0-15~0-1", "helper-a", at(0.5), at(10))
    store.acquire_poller_lease("0-15~2-3", "helper-b", at(1), at(11))
    store.release_poller_lease("0-15~2-3", "helper-b")
    names = ["0-15~0-1", "0-15~2-3", "0-15~4-5"]  # held, given back, never taken

    together = store.read_poller_leases(names)

    assert together == {name: store.read_poller_lease(name) for name in names}
    assert together["0-15~0-1"].holder == "helper-a" and not together["0-15~0-1"].free_at(at(5))
    assert together["0-15~2-3"].free_at(at(5)) and together["0-15~4-5"].term == 0
    assert store.read_poller_leases([]) == {}


def test_an_expired_poller_lease_is_taken_over_and_the_term_goes_up(subject: Subject) -> None:
    store = subject.store
    store.acquire_poller_lease("0-15", "inv-a", T0, at(10))

    assert store.acquire_poller_lease("0-15", "inv-b", at(10), at(20)) is None  # at its expiry: still held
    taken = store.acquire_poller_lease("0-15", "inv-b", at(10.001), at(20))

    assert taken is not None and (taken.holder, taken.term, taken.since) == ("inv-b", 2, at(10.001))
    assert not store.release_poller_lease("0-15", "inv-a")
    assert store.release_poller_lease("0-15", "inv-b")
    assert store.read_poller_lease("0-15").free_at(at(11))
    again = store.acquire_poller_lease("0-15", "inv-c", at(11), at(21))  # free at once
    assert again is not None and again.term == 3


def test_a_handover_goes_to_the_registered_successor_from_the_offered_second(subject: Subject) -> None:
    store = subject.store
    store.acquire_poller_lease("0-15", "inv-a", T0, at(10))
    assert store.register_poller_successor("0-15", "inv-a") is None  # the holder is no successor
    registered = store.register_poller_successor("0-15", "inv-b")
    assert registered is not None and registered.successor == "inv-b"
    assert store.register_poller_successor("0-15", "inv-c") is None  # one standby at a time
    assert store.offer_poller_lease("0-15", "inv-a", "inv-c", at(5), at(3), at(12)) is None

    offered = store.offer_poller_lease("0-15", "inv-a", "inv-b", at(5), at(3), at(12))
    assert offered is not None and (offered.handover_at, offered.expires_at) == (at(5), at(12))
    assert store.offer_poller_lease("0-15", "inv-a", "inv-b", at(6), at(3), at(12)) is None  # one offer
    assert store.accept_poller_lease("0-15", "inv-b", "inv-a", at(6), at(20)) is None  # not that second
    accepted = store.accept_poller_lease("0-15", "inv-b", "inv-a", at(5), at(20))

    assert accepted is not None
    assert (accepted.holder, accepted.since, accepted.term, accepted.successor, accepted.handover_at) == (
        "inv-b",
        at(5),
        2,
        None,
        None,
    )
    assert store.withdraw_poller_offer("0-15", "inv-a", at(5)) is None  # too late to take it back


def test_an_unanswered_offer_is_withdrawn_and_then_cannot_be_accepted(subject: Subject) -> None:
    store = subject.store
    store.acquire_poller_lease("0-15", "inv-a", T0, at(10))
    store.register_poller_successor("0-15", "inv-b")
    store.offer_poller_lease("0-15", "inv-a", "inv-b", at(5), at(3), at(12))

    withdrawn = store.withdraw_poller_offer("0-15", "inv-a", at(5))

    assert withdrawn is not None
    assert (withdrawn.holder, withdrawn.successor, withdrawn.handover_at) == ("inv-a", None, None)
    assert store.accept_poller_lease("0-15", "inv-b", "inv-a", at(5), at(20)) is None
    assert store.register_poller_successor("0-15", "inv-c") is not None
    assert not store.withdraw_poller_successor("0-15", "inv-b")
    assert store.withdraw_poller_successor("0-15", "inv-c")
    assert store.read_poller_lease("0-15").successor is None


def test_a_quiet_holder_gives_the_lease_back_only_if_nobody_woke_the_group_since_it_looked(
    subject: Subject,
) -> None:
    store = subject.store
    assert store.read_poller_lease("0-15").wakes == 0
    woken = store.wake_poller_group("0-15")  # a wake with nobody holding: the waker starts an invocation
    assert woken.wakes == 1 and woken.free_at(T0)
    taken = store.acquire_poller_lease("0-15", "inv-a", T0, at(10))
    assert taken is not None and taken.wakes == 1  # the count survives the lease changing hands
    seen = store.read_poller_lease("0-15").wakes
    again = store.wake_poller_group("0-15")  # a job written due soon while the holder looked
    assert again.wakes == seen + 1 and again.holder == "inv-a" and not again.free_at(at(1))
    assert not store.release_quiet_poller_lease("0-15", "inv-a", seen)  # woken: it stays
    assert not store.release_quiet_poller_lease("0-15", "inv-b", seen + 1)  # not the holder
    assert store.read_poller_lease("0-15").holder == "inv-a"
    assert store.release_quiet_poller_lease("0-15", "inv-a", seen + 1)
    after = store.read_poller_lease("0-15")
    assert after.free_at(at(2)) and after.wakes == seen + 1 and after.term == 1


# --- success deadlines (DeadlineStore) ---------------------------------------------------------------------


def test_a_claim_writes_the_watch_of_each_watched_run_due_only_once_its_deadline_passed(
    subject: Subject,
) -> None:
    watched = a_job(T0, success_deadline_seconds=300)
    plain = a_job(T0, job_id=ids_in_partition(partition_of(watched.id), 1)[0])
    for job in (watched, plain):
        subject.put_job(job, at(-30))
    claims = [make_claim(plan_claim(job, at(1)), at(1)) for job in (watched, plain)]
    outcome = subject.store.claim(claims, at(1))
    assert len(outcome.runs) == 2
    partition = partition_of(watched.id)

    assert subject.store.due_watches(partition, at(300), 10) == []  # deadline T0 + 300 s: not yet passed
    (watch,) = subject.store.due_watches(partition, at(301), 10)
    assert (watch.run_id, watch.job_id, watch.partition) == (claim_run_id(watched), watched.id, partition)
    assert (watch.nominal_at, watch.deadline_at) == (T0, at(300))
    assert stored(subject, watch.run_id).success_by == at(300)
    assert stored(subject, claim_run_id(plain)).success_by is None


def test_a_watch_of_a_guarded_claim_is_written_too(subject: Subject) -> None:
    job = a_job(T0, success_deadline_seconds=60, overlap="skip")
    subject.put_job(job, at(-30))
    (run,) = claim(subject, job, at(1)).runs
    assert [w.run_id for w in subject.store.due_watches(run.partition, at(61), 10)] == [run.run_id]


def test_a_claim_made_again_leaves_the_watch_there_as_it_is(subject: Subject) -> None:
    job = a_job(T0, success_deadline_seconds=60)
    subject.put_job(job, at(-30))
    claim(subject, job, at(1))
    subject.put_job(job.model_copy(update={"state": job.state.model_copy(update={"version": 5})}), at(3))
    restored = subject.store.get_job(job.id)  # due at T0 again: its run and watch already there
    assert restored is not None
    outcome = claim(subject, restored, at(4))
    assert outcome.existing_runs == 1
    assert len(subject.store.due_watches(partition_of(job.id), at(61), 10)) == 1


def test_a_watch_is_dropped_once_and_then_never_due_again(subject: Subject) -> None:
    job = a_job(T0, success_deadline_seconds=60)
    subject.put_job(job, at(-30))
    claim(subject, job, at(1))
    (watch,) = subject.store.due_watches(partition_of(job.id), at(61), 10)

    assert subject.store.drop_watch(watch) is True
    assert subject.store.drop_watch(watch) is False
    assert subject.store.due_watches(partition_of(job.id), at(3600), 10) == []


def test_due_watches_come_oldest_deadline_first_within_the_limit(subject: Subject) -> None:
    ids = ids_in_partition(7, 3)
    for job_id, deadline in zip(ids, (300, 120, 200), strict=True):
        job = a_job(T0, job_id=job_id, success_deadline_seconds=deadline)
        subject.put_job(job, at(-30))
        claim(subject, job, at(1))

    due = subject.store.due_watches(7, at(400), 2)

    assert [w.job_id for w in due] == [ids[1], ids[2]]
    assert subject.store.due_watches(8, at(400), 10) == []


def test_a_job_is_flagged_missing_once_and_cleared_only_as_read(subject: Subject) -> None:
    job_id = new_job_id()
    assert subject.store.missing_since(job_id) is None

    assert subject.store.flag_missing(job_id, T0) is True
    assert subject.store.flag_missing(job_id, at(60)) is False  # the first miss's time stays
    assert subject.store.missing_since(job_id) == T0
    assert subject.store.clear_missing(job_id, at(60)) is False  # not the flag it read
    assert subject.store.clear_missing(job_id, T0) is True
    assert subject.store.clear_missing(job_id, T0) is False  # one clear, one recovered
    assert subject.store.missing_since(job_id) is None


# --- the notification outbox (NotificationOutbox) ----------------------------------------------------------

CHANNEL = '{"type":"webhook","url":"https://example.com/n"}'


def notice(job_id: str, at_second: float, run: str = "r1", event: str = "dead") -> Notice:
    return Notice("team-a", job_id, event, CHANNEL, f"{job_id}@{run}", 2, f"HTTP 503 ({run})", at(at_second))


def test_notices_of_one_job_event_and_channel_are_one_group_due_at_the_first(subject: Subject) -> None:
    job_id = new_job_id()
    subject.store.enqueue(notice(job_id, 0, "r1"))
    subject.store.enqueue(notice(job_id, 5, "r2"))
    subject.store.enqueue(notice(job_id, 6, "r3", event="failed"))

    assert subject.store.due_notifications(T0, 10) == []  # due at T0: not before it
    dead, failed = sorted(subject.store.due_notifications(at(10), 10), key=lambda g: g.event)
    assert (dead.event, dead.pending, dead.first_at, dead.last_at, dead.due_at) == ("dead", 2, T0, at(5), T0)
    assert (dead.run_id, dead.attempt, dead.detail, dead.team) == (
        f"{job_id}@r2",
        2,
        "HTTP 503 (r2)",
        "team-a",
    )
    assert (failed.event, failed.pending, failed.due_at) == ("failed", 1, at(6))


def test_a_group_is_taken_by_one_deliverer_and_settled_only_by_it(subject: Subject) -> None:
    job_id = new_job_id()
    subject.store.enqueue(notice(job_id, 0))
    (due,) = subject.store.due_notifications(at(1), 10)

    taken = subject.store.take(due, at(61))
    assert taken is not None and (taken.due_at, taken.pending, taken.sending) == (at(61), 1, 1)
    assert subject.store.take(due, at(62)) is None  # another deliverer, from the same read
    assert subject.store.due_notifications(at(60), 10) == []  # leased

    subject.store.enqueue(notice(job_id, 3, "r2"))  # a notice during the delivery
    assert subject.store.delivered(taken, at(300)) is True
    assert subject.store.delivered(taken, at(300)) is False  # settled once
    (left,) = subject.store.due_notifications(at(301), 10)
    assert (left.pending, left.sending, left.sequence, left.attempts, left.due_at) == (1, 0, 1, 0, at(300))


def test_a_group_taken_again_keeps_the_count_of_the_notification_being_sent(subject: Subject) -> None:
    job_id = new_job_id()
    subject.store.enqueue(notice(job_id, 0))
    first = subject.store.take(subject.store.due_notifications(at(1), 10)[0], at(61))  # its deliverer dies
    assert first is not None and first.sending == 1
    subject.store.enqueue(notice(job_id, 5, "r2"))

    (due,) = subject.store.due_notifications(at(62), 10)
    again = subject.store.take(due, at(122))

    assert again is not None and (again.pending, again.sending, again.sequence) == (2, 1, 0)
    assert subject.store.retry_later(again, at(130)) is True
    (retried,) = subject.store.due_notifications(at(131), 10)
    assert (retried.sending, retried.attempts) == (1, 1)


def test_a_failed_delivery_counts_an_attempt_and_comes_back_at_its_retry(subject: Subject) -> None:
    job_id = new_job_id()
    subject.store.enqueue(notice(job_id, 0))
    taken = subject.store.take(subject.store.due_notifications(at(1), 10)[0], at(61))
    assert taken is not None

    assert subject.store.retry_later(taken, at(20)) is True
    (again,) = subject.store.due_notifications(at(21), 10)
    assert (again.attempts, again.pending, again.due_at) == (1, 1, at(20))


def test_a_group_given_up_or_rested_leaves_the_due_index_and_its_next_notice_is_due_at_once(
    subject: Subject,
) -> None:
    job_id = new_job_id()
    subject.store.enqueue(notice(job_id, 0))
    taken = subject.store.take(subject.store.due_notifications(at(1), 10)[0], at(61))
    assert taken is not None and subject.store.give_up(taken) is True
    assert subject.store.due_notifications(at(3600), 10) == []

    subject.store.enqueue(notice(job_id, 100, "r2"))
    (due,) = subject.store.due_notifications(at(101), 10)
    assert (due.pending, due.due_at) == (1, at(100))
    taken = subject.store.take(due, at(161))
    assert taken is not None and subject.store.delivered(taken, at(400)) is True
    (quiet,) = subject.store.due_notifications(at(401), 10)  # the quiet window ended with nothing pending
    resting = subject.store.take(quiet, at(461))
    assert resting is not None and resting.pending == 0
    assert subject.store.rest(resting) is True
    assert subject.store.due_notifications(at(3600), 10) == []
