"""The minute preload holds compact rows, not models: a few hundred bytes a job, the model built only when its
row is fired. What it does with them is what it always did: fire each row at its second, in fire-time then
job-id order, and only before the end of the poller's window; tell the sweep which versions it holds or
has just fired; drop what is due before a takeover; claim a disabled team's jobs without runs; count lost
races; leave to the sweep whatever it did not claim.

Rows come from the store (the in-memory twin's ``due_rows``), except where a test says otherwise."""

from __future__ import annotations

import gc
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from duetime.adapters.dynamodb.codec import item_to_job, job_to_item
from duetime.adapters.dynamodb.due_rows import CompactDueRow
from duetime.adapters.memory import MemoryStore
from duetime.domain.claim_plan import Claim, initial_state, make_claim, plan_claim
from duetime.domain.clock import ManualClock
from duetime.domain.ids import make_run_id, new_job_id, partition_of
from duetime.domain.models import Job, JobSpec
from duetime.domain.timeutil import minute_bucket
from duetime.ports import ClaimOutcome, DueRow
from duetime.scheduling.poller import Poller, PollerConfig
from duetime.scheduling.preload import MinutePreload

from ..job_support import create_job
from .test_poller_lease_loop import NoAlerts, Queue
from .test_poller_lease_loop import store as store  # the twin's fixture those tests use

MINUTE = datetime(2026, 12, 1, 10, 1, tzinfo=UTC)  # the minute the jobs are due in
LOAD_AT = MINUTE - timedelta(seconds=5)
LEAD = timedelta(seconds=10)


# --- the compact row -------------------------------------------------------------------------------------


def stored_job(spec: dict[str, Any], team: str = "team-a", version: int = 7, ran: bool = True) -> Job:
    """A job as the store would hold it, due in ``MINUTE``."""
    created = MINUTE - timedelta(days=30)
    job = Job(
        **JobSpec.model_validate(spec).model_dump(),
        id=new_job_id(),
        team=team,
        created_at=created,
        updated_at=created + timedelta(days=1),
    )
    state = initial_state(job, MINUTE - timedelta(minutes=1), version)
    if ran:
        state = state.model_copy(update={"last_scheduled_at": state.next_nominal_at - timedelta(days=1)})
    return job.model_copy(update={"state": state})


DAILY = {"name": "nightly", "schedule": {"cron": "1 10 * * *"}, "target": {"url": "https://example.com/x"}}
SHAPES = {
    "a daily cron with jitter": DAILY,
    "a daily cron in a time zone": {**DAILY, "schedule": {"cron": "1 10 * * *", "timezone": "Europe/Berlin"}},
    "never ran before": DAILY,
    "exact, headers and a body": {
        **DAILY,
        "exact": True,
        "target": {
            "url": "https://example.com/hook?x=1",
            "method": "PUT",
            "headers": {"Authorization": "Bearer t0ken", "X-Trace": "a\x1fb"},
            "body": '{"unit": "\\u001f", "text": "Grüße, 東京 \x1f"}',
        },
    },
    "a rate with every policy set": {
        "name": "every 5",
        "schedule": {"rate": "5 minutes"},
        "target": {"url": "https://example.com/r"},
        "misfire": "run_all",
        "retry": {"max_attempts": 9, "backoff_seconds": [1, 2]},
        "timeout_seconds": 600,
        "jitter_seconds": 0,
        "end_at": "2027-01-01T00:00:00Z",
    },
    "a body of 64 KiB": {**DAILY, "target": {"url": "https://example.com/b", "body": "é" * 32 * 1024}},
}


@pytest.mark.parametrize("shape", SHAPES)
def test_a_due_row_builds_exactly_the_job_its_item_holds(shape: str) -> None:
    job = stored_job(SHAPES[shape], ran=shape != "never ran before")
    item = job_to_item(job, MINUTE - timedelta(hours=1))
    row = CompactDueRow(item)
    assert row.job() == item_to_job(item) == job
    assert (row.job_id, row.fire_at, row.version) == (
        job.id,
        int(fire_time(job).timestamp()),
        job.state.version,
    )
    assert row.job() is not row.job()  # a new model each time: nothing fired shares state with the row


@pytest.mark.parametrize("team", ["t", "12", "7\x1f8", "équipe", ""])
def test_a_team_id_of_any_characters_comes_back_as_it_was(team: str) -> None:
    job = stored_job(SHAPES["exact, headers and a body"], team=team)
    assert CompactDueRow(job_to_item(job, MINUTE)).job() == job


def test_a_due_row_has_no_dict_keeps_no_model_and_is_a_fraction_of_one() -> None:
    job = stored_job(SHAPES["exact, headers and a body"])
    row = CompactDueRow(job_to_item(job, MINUTE))
    assert not hasattr(row, "__dict__")
    assert not any(isinstance(r, (Job, dict)) for r in gc.get_referents(row))
    packed = [r for r in gc.get_referents(row) if isinstance(r, bytes)]
    spec_json = len(job_to_item(job, MINUTE)["spec"]["S"].encode())
    assert len(packed) == 1 and len(packed[0]) < spec_json / 2  # deflated against a spec's defaults


def test_rows_due_in_the_same_second_share_their_fire_time() -> None:
    first, second = (CompactDueRow(job_to_item(stored_job(DAILY | {"exact": True}), MINUTE)) for _ in "ab")
    assert first.fire_at is second.fire_at


# --- the preload -----------------------------------------------------------------------------------------


class Recording:
    """The store, keeping every claim it is asked to make and counting its due-row reads; ``broken`` job ids'
    rows come back as rows whose job cannot be built; ``failing_reads`` reads fail."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.claims: list[Claim] = []
        self.reads = 0
        self.failing_reads: set[int] = set()
        self.broken: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def due_rows(self, *args: Any, **kwargs: Any) -> list[DueRow]:
        self.reads += 1
        if self.reads in self.failing_reads:
            raise ConnectionResetError("connection reset by peer")
        rows = self.store.due_rows(*args, **kwargs)
        return [Unbuildable(row) if row.job_id in self.broken else row for row in rows]

    def claim(self, claims: Sequence[Claim], now: datetime) -> ClaimOutcome:
        self.claims.extend(claims)
        return self.store.claim(claims, now)


@dataclass
class Unbuildable:
    row: DueRow

    @property
    def fire_at(self) -> int:
        return self.row.fire_at

    @property
    def job_id(self) -> str:
        return self.row.job_id

    @property
    def version(self) -> int:
        return self.row.version

    def job(self) -> Job:
        raise ValueError("a row whose item no longer reads")


def due_at(store: MemoryStore, *seconds: int) -> list[Job]:
    """An exact one-off job due at each of ``MINUTE``'s ``seconds``, created a minute before."""
    return [
        create_job(
            store,
            "team-a",
            {
                "name": f"at :{second:02d}",
                "schedule": {"at": (MINUTE + timedelta(seconds=second)).isoformat()},
                "target": {"url": "https://example.com/x"},
                "exact": True,
            },
            MINUTE - timedelta(minutes=1),
        )
        for second in seconds
    ]


def preload_of(store: Any, jobs: Sequence[Job], queue: Queue | None = None, **options: Any) -> MinutePreload:
    partitions = sorted({partition_of(job.id) for job in jobs})
    return MinutePreload(store, queue or Queue(), partitions, LEAD, **options)


def at(second: float) -> datetime:
    return MINUTE + timedelta(seconds=second)


def fire_time(job: Job) -> datetime:
    assert job.state.next_fire_at is not None
    return job.state.next_fire_at


def test_the_minute_is_loaded_as_compact_rows_and_fired_as_the_jobs_the_store_holds(
    store: MemoryStore,
) -> None:
    jobs = due_at(store, 0, 0, 0, 3, 3, 7)
    recording, queue = Recording(store), Queue()
    preload = preload_of(recording, jobs, queue, page_size=1)  # each read goes on after the last row
    assert preload.load_upcoming(LOAD_AT) == 6 and preload.load_upcoming(LOAD_AT) == 0  # loaded once
    assert preload.next_fire_at() == at(0)

    report = preload.fire(at(3.4))
    due = sorted(jobs[:5], key=lambda job: (job.state.next_fire_at, job.id))
    assert [claim.plan.job for claim in recording.claims] == due  # the stored models, by time then id
    assert (report.fired, report.runs_created, report.lost_races) == (5, 5, 0)
    assert report.max_lateness_seconds == pytest.approx(3.4)  # since the earliest fire time fired
    assert report.write_requests >= 2  # the run rows, then the schedule moves
    assert [m.run_id for m in queue.sent] == [make_run_id(job.id, fire_time(job)) for job in due]
    assert preload.next_fire_at() == at(7)


def test_a_poller_is_ready_to_take_over_once_the_minutes_it_would_fire_are_read_whole(
    store: MemoryStore,
) -> None:
    jobs = due_at(store, 0, 0, 3)
    preload = preload_of(store, jobs, page_size=1)
    assert not preload.ready(LOAD_AT)  # nothing read yet: a successor must not register
    preload.load_upcoming(LOAD_AT, max_pages=2)
    assert preload.loading and not preload.ready(LOAD_AT)  # the coming minute half read
    preload.load_upcoming(LOAD_AT)
    assert preload.ready(LOAD_AT) and preload.held_rows == 3
    assert not preload.ready(at(55))  # the minute after next is within the lead and not read yet
    preload.fire(at(0))
    assert preload.held_rows == 1  # fired rows are no longer held


def test_a_poller_is_busy_when_its_minute_or_the_next_holds_its_busy_rows(store: MemoryStore) -> None:
    jobs = due_at(store, 5, 6, 7)
    partitions = sorted({partition_of(job.id) for job in jobs})
    clock = ManualClock(MINUTE - timedelta(seconds=40))  # the jobs' minute is the coming one, not loaded
    reads = Recording(store)

    def poller(busy_rows: int) -> Poller:
        config = PollerConfig(partitions=partitions, preload_lead=LEAD, busy_rows=busy_rows)
        return Poller(reads, store, Queue(), NoAlerts(), clock, config)

    assert poller(busy_rows=3).busy() and not poller(busy_rows=4).busy()  # counted in the index
    quiet, before = poller(busy_rows=4), reads.reads
    assert not quiet.busy() and reads.reads == before + len(partitions)
    assert not quiet.busy() and reads.reads == before + len(partitions)  # once a minute, not again
    reads.failing_reads = {reads.reads + 1}
    assert poller(busy_rows=4).busy()  # a count that failed keeps the standby

    clock.set(MINUTE + timedelta(seconds=1))
    held = poller(busy_rows=3)
    assert held.preload is not None and held.preload.load_upcoming(clock.now()) == 3
    before = reads.reads
    assert held.busy() and reads.reads == before  # the rows it holds answer, without a read


def test_the_sweep_is_told_which_versions_the_preload_fires_or_has_just_fired(store: MemoryStore) -> None:
    early, late = due_at(store, 0, 30)
    preload = preload_of(store, [early, late])
    preload.load_upcoming(LOAD_AT)
    moved = late.model_copy(
        update={"state": late.state.model_copy(update={"version": late.state.version + 1})}
    )
    assert preload.holds(early) and preload.holds(late) and not preload.holds(moved)

    preload.fire(at(0))
    assert preload.holds(early)  # fired: the due index may still show its row for a moment
    claimed = store.get_job(early.id)
    assert claimed is not None and not preload.holds(claimed)  # its next version is anyone's
    assert preload.holds(late)


def test_nothing_at_or_after_the_end_of_the_window_is_fired(store: MemoryStore) -> None:
    jobs = due_at(store, 1, 2, 3)
    preload = preload_of(store, jobs)
    preload.load_upcoming(LOAD_AT)
    assert preload.fire(at(0.9)).fired == 0  # not due yet
    assert preload.fire(at(10), before=at(2)).fired == 1  # :01 only; :02 is the next holder's
    assert preload.next_fire_at() == at(2)


def test_rows_due_before_a_takeover_are_dropped_and_left_to_the_sweep(store: MemoryStore) -> None:
    jobs = due_at(store, 0, 1, 1, 2)
    preload = preload_of(store, jobs)
    preload.load_upcoming(LOAD_AT)
    assert preload.forget_before(at(2)) == 3
    assert [preload.holds(job) for job in jobs] == [False, False, False, True]
    assert preload.next_fire_at() == at(2)
    assert preload.fire(at(5)).fired == 1


def test_a_disabled_teams_jobs_are_claimed_without_runs(store: MemoryStore) -> None:
    jobs = due_at(store, 0, 0)
    asked: list[str] = []

    def disabled(team: str) -> bool:
        asked.append(team)
        return False

    preload = preload_of(store, jobs, team_active=disabled)
    preload.load_upcoming(LOAD_AT)
    report = preload.fire(at(0))
    assert (report.fired, report.runs_created, report.lost_races) == (2, 0, 0) and asked == ["team-a"] * 2
    for job in jobs:
        moved = store.get_job(job.id)
        assert moved is not None and moved.state.version == job.state.version + 1  # its time passed


def test_a_row_whose_job_moved_after_the_load_is_a_lost_race(store: MemoryStore) -> None:
    mine, theirs = due_at(store, 0, 0)
    preload = preload_of(store, [mine, theirs])
    preload.load_upcoming(LOAD_AT)
    assert store.claim([make_claim(plan_claim(theirs, at(0)), at(0))], at(0)).claimed_jobs == 1  # a sweep
    report = preload.fire(at(0.5))
    assert (report.fired, report.runs_created, report.lost_races) == (2, 1, 1)


def test_a_chunk_not_ours_to_claim_any_more_is_left_to_the_sweep(store: MemoryStore) -> None:
    jobs = due_at(store, 0, 0, 0)
    preload = preload_of(store, jobs, chunk=1)
    preload.load_upcoming(LOAD_AT)
    answers = iter([True, False])
    report = preload.fire(at(0), keep_going=lambda: next(answers))
    assert (report.fired, report.runs_created) == (3, 2)
    claimed = [job for job in jobs if store.get_job(job.id) != job]
    left = [job for job in jobs if store.get_job(job.id) == job]
    assert len(claimed) == 2 and len(left) == 1
    assert not preload.holds(left[0])  # the sweep claims it
    assert all(preload.holds(job) for job in claimed)


def test_a_row_whose_job_cannot_be_built_is_quarantined_and_left_to_the_sweep_the_rest_fired(
    store: MemoryStore,
) -> None:
    """One bad row is one bad job (issue 49, item 2): it failed its chunk and every chunk after it."""
    jobs = sorted(due_at(store, 0, 0, 0), key=lambda job: job.id)
    recording = Recording(store)
    recording.broken = {jobs[1].id}
    preload = preload_of(recording, jobs, chunk=1)
    preload.load_upcoming(LOAD_AT)
    report = preload.fire(at(0))
    assert (report.runs_created, report.unreadable_rows) == (2, 1)
    assert [preload.holds(job) for job in jobs] == [True, False, True]  # the sweep reads it whole
    assert preload.next_fire_at() is None  # nothing is fired twice by the preload


def test_a_load_that_failed_half_way_is_done_again_without_holding_a_row_twice(store: MemoryStore) -> None:
    jobs = due_at(store, 0, 1, 2, 3, 4, 5)
    recording = Recording(store)
    preload = preload_of(recording, jobs, page_size=1)
    partitions = len(preload.partitions)
    recording.failing_reads = {partitions + 3}  # a read of the due minute's pages, after some rows
    with pytest.raises(ConnectionResetError):
        preload.load_upcoming(LOAD_AT)
    assert 0 < preload.load_upcoming(LOAD_AT) < 6
    assert preload.fire(at(59)).fired == 6
    assert sorted(claim.plan.job.id for claim in recording.claims) == sorted(job.id for job in jobs)


def test_due_rows_are_the_rows_due_jobs_reads_in_the_same_order(store: MemoryStore) -> None:
    jobs = due_at(store, 0, 0, 0, 1, 2, 2, 2)
    for partition in sorted({partition_of(job.id) for job in jobs}):
        args = (partition, minute_bucket(MINUTE), at(59), 10)
        rows, read = store.due_rows(*args), store.due_jobs(*args)
        assert [row.job() for row in rows] == read
        assert [(row.job_id, row.version) for row in rows] == [(job.id, job.state.version) for job in read]
        assert [row.fire_at for row in rows] == [int(fire_time(job).timestamp()) for job in read]


# --- reading the coming minute between fires ------------------------------------------------------------


class SlowReads:
    """The store, where each due-row read (one Query) takes ``seconds`` of the manual clock, and every claim
    is kept with its instant."""

    def __init__(self, store: MemoryStore, clock: ManualClock, seconds: float) -> None:
        self.store, self.clock, self.seconds = store, clock, seconds
        self.claimed_at: dict[str, datetime] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def due_rows(self, *args: Any, **kwargs: Any) -> list[DueRow]:
        self.clock.advance(self.seconds)
        return self.store.due_rows(*args, **kwargs)

    def claim(self, claims: Sequence[Claim], now: datetime) -> ClaimOutcome:
        for claim in claims:
            self.claimed_at.setdefault(claim.plan.job.id, self.clock.now())
        return self.store.claim(claims, now)


def test_a_row_due_while_the_coming_minute_is_read_fires_at_its_second(store: MemoryStore) -> None:
    """At :50 the holder starts reading the coming minute (the preload's lead). Read a page at a time between
    fires, a row due at :50 waits for one Query, not for the whole minute (here 40-odd reads of 0.2 s: the
    old way, load then fire, claimed it at :58); and the coming minute is still whole before it starts."""
    (last,) = due_at(store, -10)  # due at :50 of the minute before
    coming = due_at(store, *([0] * 12 + [1] * 8))  # 20 rows, a page of one each: 40-odd reads
    clock = ManualClock(MINUTE - timedelta(seconds=15))
    reads = SlowReads(store, clock, seconds=0.2)
    jobs = [last, *coming]
    config = PollerConfig(partitions=sorted({partition_of(j.id) for j in jobs}), preload_lead=LEAD)
    poller = Poller(reads, reads, Queue(), NoAlerts(), clock, config)
    assert poller.preload is not None
    poller.preload.page_size = 1

    poller.run_until(stop=lambda: clock.now() >= MINUTE + timedelta(seconds=3), sleep=clock.advance)

    assert at(-10) <= reads.claimed_at[last.id] <= at(-10) + timedelta(seconds=0.2)  # one read late at most
    assert all(at(0) <= reads.claimed_at[job.id] < at(0.5) for job in coming[:12])  # fired, not swept
    assert all(at(1) <= reads.claimed_at[job.id] < at(1.5) for job in coming[12:])


@dataclass(frozen=True)
class Row:
    fire_at: int
    job_id: str
    version: int = 0

    def job(self) -> Job:
        raise AssertionError("not fired here")


class Pages:
    """Due rows by partition, all in ``MINUTE``, read a page at a time; keeps the partition of every read of
    that minute, in order."""

    def __init__(self, rows_by_partition: dict[int, int]) -> None:
        second = int(MINUTE.timestamp())
        self.rows = {
            p: [Row(second, f"{p:02d}-{i:03d}") for i in range(n)] for p, n in rows_by_partition.items()
        }
        self.read: list[int] = []

    def due_rows(
        self, partition: int, bucket: str, until: datetime, limit: int, after: str | None = None
    ) -> list[Row]:
        if bucket != minute_bucket(MINUTE):
            return []  # the minute the poller started in: nothing due
        self.read.append(partition)
        rows = [r for r in self.rows[partition] if after is None or r.job_id > after.split("#")[1]]
        return rows[:limit]


def test_the_minute_is_read_a_page_of_each_partition_in_turn() -> None:
    """When the pages read are already due (a poller catching up on a midnight), each is fired as it is
    read: one partition's pages in a row would put a page of claims on its keys every second."""
    pages = Pages({3: 5, 7: 2, 9: 0})
    preload = MinutePreload(pages, Queue(), [3, 7, 9], LEAD, page_size=2)  # type: ignore[arg-type]

    assert preload.load_upcoming(LOAD_AT) == 7

    assert pages.read == [3, 7, 9, 3, 7, 3]  # 7's second page is short (empty): it is done; 3's third too
    assert preload.ready(LOAD_AT) and preload.held_rows == 7
