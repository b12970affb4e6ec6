"""`duetime bench preload`: what the minute preload holds in memory, per job, for N rows due in one minute.

It creates N typical jobs (``typical_job``: a year-old daily cron at midnight UTC with a name, URL, header
and small JSON body of their own, default retries and 30 s of jitter) due in the coming midnight's minute,
in DynamoDB Local tables of its own (deleted afterwards), and loads that minute the way the poller does: a
``MinutePreload`` over all 64 partitions, ``load_upcoming`` at five seconds before the minute, through the
store's Query pages. Nothing is fired or claimed.

Two loads, one after the other, into a fresh preload each:

- untraced: ``load_seconds`` (wall time of ``load_upcoming``; ``load_cpu_seconds``, this process's CPU time
  in it, which on Lambda is what the function's memory size buys) and ``peak_rss_mb`` (the process's peak
  resident set, ``ru_maxrss``, right after it: the interpreter, boto3, the writer's buffers and the
  loaded preload; ``rss_before_load_mb`` is the same figure just before the load);
- under ``tracemalloc``: ``bytes_per_job`` is the Python heap the preload holds once loaded, divided by the
  rows it loaded. Held means: traced memory with the loaded preload alive (after a ``gc.collect()``) minus
  traced memory once the preload is dropped (after another ``gc.collect()``), so exactly what was reachable
  only from the preload: its structures (rows by fire second, by job id), every row and all a row keeps
  alive (strings, integers, the models or items). Caches the load filled elsewhere (botocore's, the
  interpreter's) and the pages' garbage are not counted; nor is tracemalloc's own bookkeeping.

``job_build_us``: the time ``DueRow.job()`` takes per row, over the rows of every eighth partition: what
firing a row costs on top of claiming it, since the model is built only then.
"""

from __future__ import annotations

import gc
import resource
import subprocess
import time
import tracemalloc
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from duetime.adapters.aws.clients import new_client
from duetime.adapters.dynamodb.codec import job_to_item
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.dynamodb.tables import TableNames, create_tables
from duetime.adapters.retrying import UNPROCESSED, resend
from duetime.domain.claim_plan import initial_state
from duetime.domain.ids import PARTITIONS, new_job_id
from duetime.domain.models import Job, JobSpec
from duetime.domain.timeutil import minute_bucket
from duetime.local.system import EMULATORS_SCRIPT, ensure_emulators, local_environment
from duetime.ports import RunMessage
from duetime.scheduling.preload import MinutePreload

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

DAY = timedelta(days=1)
LEAD = timedelta(seconds=10)  # the poller's default preload lead
WRITERS = 8  # BatchWriteItem calls in flight while the jobs are written


def typical_job(index: int, minute: datetime, now: datetime) -> Job:
    """A job as teams write them, a year into its life: a daily cron at ``minute`` (UTC) with a name, URL,
    bearer header and JSON body of its own, default retries and misfire policy, 30 s of jitter (its fire
    time is one of the minute's first 30 seconds); created a year before ``minute``, last run the midnight
    before, version 365 and up (integers CPython does not share)."""
    spec = JobSpec.model_validate(
        {
            "name": f"nightly-report-{index:06d}",
            "schedule": {"cron": f"{minute.minute} {minute.hour} * * *", "timezone": "UTC"},
            "target": {
                "url": f"https://hooks.example.com/duetime/nightly/{index:06d}",
                "headers": {"Authorization": f"Bearer {uuid.uuid4().hex}"},
                "body": f'{{"report":"nightly","customer":{index}}}',
            },
            "jitter_seconds": 30,
        }
    )
    created = minute - timedelta(days=365)
    job = Job(**spec.model_dump(), id=new_job_id(), team="bench", created_at=created, updated_at=created)
    state = initial_state(job, now, version=365 + index % 100)
    return job.model_copy(update={"state": state.model_copy(update={"last_scheduled_at": minute - DAY})})


def _items(count: int, minute: datetime, now: datetime) -> Iterator[list[dict[str, Any]]]:
    """The jobs' items, 25 at a time (never all N in memory at once)."""
    for start in range(0, count, 25):
        yield [job_to_item(typical_job(i, minute, now), now) for i in range(start, min(count, start + 25))]


def _write(client: DynamoDBClient, table: str, items: Sequence[dict[str, Any]]) -> None:
    """One BatchWriteItem; what it leaves unprocessed is sent again after a backoff until none is left."""

    def send(request: dict[str, Any]) -> dict[str, Any]:
        return client.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}

    resend(send, {table: [{"PutRequest": {"Item": item}} for item in items]}, UNPROCESSED)


class _NoQueue:
    def send(self, messages: Sequence[RunMessage], delay_seconds: int = 0) -> None:
        raise AssertionError("loading the preload queues nothing")


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def run_preload(jobs: int) -> dict[str, Any]:
    local_environment()
    started_emulators = ensure_emulators()
    prefix = f"benchpre{uuid.uuid4().hex[:8]}"
    names = TableNames(f"{prefix}-jobs", f"{prefix}-runs", f"{prefix}-control")
    client = new_client("dynamodb")
    create_tables(client, names)
    try:
        return _run(DynamoStore(client, names), jobs)
    finally:
        for table in (names.jobs, names.runs, names.control):
            client.delete_table(TableName=table)
        if started_emulators:
            subprocess.run([str(EMULATORS_SCRIPT), "stop"], check=False)


def _run(store: DynamoStore, jobs: int) -> dict[str, Any]:
    now = datetime.now(UTC).replace(microsecond=0)
    minute = (now + DAY).replace(hour=0, minute=0, second=0)  # the coming midnight
    writing = time.perf_counter()
    _write_jobs(store, jobs, minute, now)
    write_seconds = time.perf_counter() - writing
    load_at = minute - LEAD / 2

    def preload() -> MinutePreload:
        return MinutePreload(store, _NoQueue(), list(range(PARTITIONS)), LEAD)

    gc.collect()
    rss_before = _peak_rss_mb()
    untraced = preload()
    started, cpu = time.perf_counter(), time.process_time()
    rows = untraced.load_upcoming(load_at)
    load_seconds, load_cpu = time.perf_counter() - started, time.process_time() - cpu
    peak_rss = _peak_rss_mb()
    del untraced
    gc.collect()
    traced_rows, bytes_held = _bytes_held(preload, load_at)
    assert traced_rows == rows, (traced_rows, rows)
    return {
        "jobs": jobs,
        "rows": rows,
        "load_seconds": round(load_seconds, 2),
        "load_cpu_seconds": round(load_cpu, 2),
        "bytes_per_job": round(bytes_held / max(1, rows)),
        "peak_rss_mb": round(peak_rss, 1),
        "rss_before_load_mb": round(rss_before, 1),
        "job_build_us": round(_job_build_us(store, jobs, minute), 1),
        "write_seconds": round(write_seconds, 1),
    }


def _write_jobs(store: DynamoStore, jobs: int, minute: datetime, now: datetime) -> None:
    """``jobs`` jobs due in ``minute``, written by WRITERS threads a few batches ahead."""
    with ThreadPoolExecutor(max_workers=WRITERS) as pool:
        in_flight: set[Future[None]] = set()
        for chunk in _items(jobs, minute, now):
            if len(in_flight) >= 2 * WRITERS:  # a few batches ahead, never all N items at once
                done, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
                for future in done:
                    future.result()
            in_flight.add(pool.submit(_write, store.client, store.names.jobs, chunk))
        for future in in_flight:
            future.result()


def _bytes_held(preload: Callable[[], MinutePreload], load_at: datetime) -> tuple[int, int]:
    """A preload's rows loaded under tracemalloc, and the bytes it held (what freeing it gave back)."""
    tracemalloc.start()
    try:
        traced = preload()
        traced_rows = traced.load_upcoming(load_at)
        gc.collect()
        loaded = tracemalloc.get_traced_memory()[0]
        del traced
        gc.collect()
        released = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return traced_rows, loaded - released


def _job_build_us(store: DynamoStore, jobs: int, minute: datetime) -> float:
    """Microseconds to build a job from its due row, over every eighth partition's rows."""
    sample = [
        row
        for partition in range(0, PARTITIONS, 8)
        for row in store.due_rows(partition, minute_bucket(minute), minute + timedelta(seconds=59), jobs)
    ]
    started = time.perf_counter()
    for row in sample:
        row.job()
    return (time.perf_counter() - started) / max(1, len(sample)) * 1e6
