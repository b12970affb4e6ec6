"""One bad row is one bad job (issue 49, item 2): a due row that cannot be read is quarantined (reported
once with its key, counted in ``UnreadableRows``, left where it is) and its bucket's other jobs are claimed,
by the sweep and by the minute preload, on the twin and on DynamoDB Local alike."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from duetime.adapters.dynamodb.codec import job_to_item
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.memory import MemoryAlerts, MemoryQueue
from duetime.domain.clock import ManualClock
from duetime.domain.due_index import due_key
from duetime.domain.ids import partition_of
from duetime.domain.timeutil import minute_bucket
from duetime.scheduling.poller import Poller, PollerConfig
from duetime.scheduling.poller_metrics import record_fire, record_poll
from duetime.scheduling.preload import MinutePreload

from ..twin_support import T0, a_job, at
from .conftest import against
from .test_store_contract import CORRUPTIONS, Subject, ids_in_partition, subjects

PARTITION = 4
QUARANTINE_LOG = "duetime.scheduling.quarantine"


@pytest.fixture(params=against("dynamodb"))
def subject(request: pytest.FixtureRequest) -> Iterator[Subject]:
    yield from subjects(request)


class Metrics:
    def __init__(self) -> None:
        self.added: dict[str, float] = {}

    def add_metric(self, name: str, unit: str, value: float) -> None:
        self.added[name] = self.added.get(name, 0) + value


def a_bucket_with_one_bad_row(subject: Subject, first: float, good: int, how: str) -> tuple[list[str], str]:
    """``good`` jobs due a second apart from ``first`` seconds after T0, and one whose payload cannot be
    read due 3 s after ``first``, all in one partition's bucket."""
    *good_ids, bad = ids_in_partition(PARTITION, good + 1)
    for n, job_id in enumerate(good_ids):
        subject.put_job(a_job(at(first + n), job_id), at(-30))
    subject.put_unreadable(a_job(at(first + 3), bad), at(-30), how)
    return good_ids, bad


def quarantined(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == QUARANTINE_LOG]


@pytest.mark.parametrize("how", list(CORRUPTIONS))
def test_a_sweep_claims_every_good_job_of_the_bucket_and_quarantines_the_bad_row_once(
    subject: Subject, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    good, bad = a_bucket_with_one_bad_row(subject, 0, 8, how)
    clock = ManualClock(at(10))
    config = PollerConfig(partitions=[PARTITION], preload_lead=None)
    poller = Poller(subject.store, subject.store, MemoryQueue(clock), MemoryAlerts(), clock, config)
    metrics = Metrics()

    with caplog.at_level(logging.WARNING, logger=QUARANTINE_LOG):
        first = poller.claim()
        record_poll(metrics, first, None)
        clock.advance(1)
        again = poller.claim()  # the bucket is not settled yet: read again, the row not reported again

    assert (first.claimed_jobs, first.runs_created, first.unreadable_rows) == (8, 8, 1)
    assert {run.job_id for run in first.runs} == set(good)
    assert again.unreadable_rows == 0 and metrics.added["UnreadableRows"] == 1
    (line,) = quarantined(caplog)
    assert bad in line and due_key(bad, at(3)) in line and f"bucket {minute_bucket(T0)}" in line
    assert "half a spec" not in line and "full moon" not in line and "twice" not in line  # no payload

    # Once settled, the bucket is done though the row stays in it: the sweep reads on from the next minute.
    clock.set(T0 + timedelta(minutes=1) + config.bucket_settle)
    poller.claim()
    assert subject.store.low_water_marks([PARTITION])[PARTITION] > minute_bucket(T0)
    assert subject.store.count_due(PARTITION, minute_bucket(T0)) == 1  # never deleted


def test_a_page_of_unreadable_rows_only_does_not_hide_the_good_jobs_after_it(
    subject: Subject, caplog: pytest.LogCaptureFixture
) -> None:
    """Quarantined rows never leave their bucket: a sweep reads on past a page of them, and a settled
    bucket's mark moves only once its good jobs are read."""
    *bad, good = ids_in_partition(PARTITION, 5)
    for n, job_id in enumerate(bad):
        subject.put_unreadable(a_job(at(n), job_id), at(-30), "invalid JSON")
    subject.put_job(a_job(at(20), good), at(-30))
    clock = ManualClock(T0 + timedelta(minutes=2))  # the bucket settled: its mark may move this sweep
    config = PollerConfig(partitions=[PARTITION], preload_lead=None, page_size=2)
    poller = Poller(subject.store, subject.store, MemoryQueue(clock), MemoryAlerts(), clock, config)

    with caplog.at_level(logging.WARNING, logger=QUARANTINE_LOG):
        report = poller.claim()

    assert (report.claimed_jobs, report.unreadable_rows) == (1, 4)
    assert [run.job_id for run in report.runs] == [good]
    assert len(quarantined(caplog)) == 4


@pytest.mark.parametrize("how", ["invalid JSON", "a required field missing"])
def test_the_minute_preload_fires_every_good_row_and_quarantines_the_bad_one(
    subject: Subject, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    _, bad = a_bucket_with_one_bad_row(subject, 60, 5, how)
    clock = ManualClock(at(55))
    preload = MinutePreload(subject.store, MemoryQueue(clock), [PARTITION], timedelta(seconds=10))
    metrics = Metrics()
    preload.load_upcoming(at(55))

    with caplog.at_level(logging.WARNING, logger=QUARANTINE_LOG):
        report = preload.fire(at(66))
        record_fire(metrics, report)

    assert (report.runs_created, report.unreadable_rows) == (5, 1)
    assert metrics.added["UnreadableRows"] == 1
    (line,) = quarantined(caplog)
    assert bad in line and due_key(bad, at(63)) in line


def test_the_bad_row_is_kept_once_for_the_operator_with_its_first_report(subject: Subject) -> None:
    """``duetime system quarantine`` reads the record: the row's key and error (never its payload) and when a
    poller first reported it, kept once however many pollers find it again."""
    _, bad = a_bucket_with_one_bad_row(subject, 0, 3, "invalid JSON")
    clock = ManualClock(at(10))
    config = PollerConfig(partitions=[PARTITION], preload_lead=None)

    def a_poller() -> Poller:  # a new process each time: it reports the row again
        queue = MemoryQueue(clock)
        return Poller(
            subject.store,
            subject.store,
            queue,
            MemoryAlerts(),
            clock,
            config,
            quarantine_record=subject.store,
        )

    a_poller().claim()
    clock.advance(20)
    a_poller().claim()

    (kept,) = subject.store.quarantined_rows()
    assert (kept.row.job_id, kept.row.due_key, kept.row.partition) == (bad, due_key(bad, at(3)), PARTITION)
    assert kept.row.bucket == minute_bucket(T0) and kept.first_seen == at(10)
    assert "JSON" in kept.row.error and "half a spec" not in kept.row.error  # the error, not the payload


def test_a_row_a_later_release_wrote_runs_and_a_corrupt_one_is_quarantined_and_counted(
    subject: Subject, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 49's check: a bucket of good jobs, one whose item holds fields this release does not know (a
    top-level attribute and one inside its spec, as a later release may write them) and one whose payload
    cannot be read. Every good job and the later release's job run; the corrupt row is quarantined, counted
    in ``UnreadableRows`` (which the stack alarms on) and kept for the operator."""
    *good, later, bad = ids_in_partition(PARTITION, 6)
    for n, job_id in enumerate(good):
        subject.put_job(a_job(at(n), job_id), at(-30))
    put_as_a_later_release(subject, a_job(at(2), later), at(-30))
    subject.put_unreadable(a_job(at(3), bad), at(-30), "a wrong type")
    clock = ManualClock(at(10))
    config = PollerConfig(partitions=[PARTITION], preload_lead=None)
    store = subject.store
    poller = Poller(store, store, MemoryQueue(clock), MemoryAlerts(), clock, config, quarantine_record=store)
    metrics = Metrics()

    with caplog.at_level(logging.WARNING, logger=QUARANTINE_LOG):
        report = poller.claim()
        record_poll(metrics, report, None)

    assert {run.job_id for run in report.runs} == {*good, later}
    assert metrics.added["UnreadableRows"] == 1
    assert [q.row.job_id for q in store.quarantined_rows()] == [bad]
    assert len(quarantined(caplog)) == 1


def put_as_a_later_release(subject: Subject, job: Any, now: Any) -> None:
    """``job`` as a later release may store it: on DynamoDB, with a top-level attribute and a spec field this
    release does not know (the twin stores models, which have no such fields: the job as it is)."""
    if not isinstance(subject.store, DynamoStore):
        subject.put_job(job, now)
        return
    store = subject.store
    store.ensure_low_water_mark(partition_of(job.id), minute_bucket(now))
    item = job_to_item(job, now, 3)
    spec = json.loads(item["spec"]["S"])
    item["spec"] = {"S": json.dumps({**spec, "priority": "high", "target": {**spec["target"], "proxy": "x"}})}
    item["shard_hint"] = {"N": "7"}
    store.client.put_item(TableName=store.names.jobs, Item=item)


@pytest.mark.parametrize("derive", ["for_partitions", "alone"])
def test_a_group_poller_and_a_helper_keep_unreadable_rows_for_the_operator_as_the_poller_they_derive_from(
    subject: Subject, derive: str
) -> None:
    """On AWS each group's poller is the wired poller ``for_partitions`` its group, and a helper is it
    ``alone`` on its slice: both keep what the wired one keeps (they once dropped the quarantine record, so
    a deployed stack only counted and logged its unreadable rows)."""
    good, bad = ids_in_partition(PARTITION, 2)
    subject.put_job(a_job(at(0), good), at(-30))
    subject.put_unreadable(a_job(at(1), bad), at(-30), "a wrong type")
    clock = ManualClock(at(10))
    store = subject.store
    wired = Poller(
        store,
        store,
        MemoryQueue(clock),
        MemoryAlerts(),
        clock,
        PollerConfig(partitions=[], preload_lead=None),
        quarantine_record=store,
    )
    poller = getattr(wired, derive)([PARTITION])
    report = poller.claim()
    assert {run.job_id for run in report.runs} == {good}
    assert [q.row.job_id for q in store.quarantined_rows()] == [bad]
