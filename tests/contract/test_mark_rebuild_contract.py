"""``MarkRebuild`` (``duetime.ports``): the low-water marks rebuilt from the rows of a restored jobs table, on
the twin and DynamoDB Local alike, and the mark a poller read before the rebuild (WATERMARK_BEHIND_AS_READ).
DynamoDB Local has no point-in-time recovery: the restored rows here are written as a restore leaves them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from duetime.domain.timeutil import minute_bucket
from duetime.scheduling.restore import check_marks, rebuild_marks

from ..twin_support import T0, a_job
from .conftest import against
from .test_store_contract import Subject, ids_in_partition, subjects

MINUTE = timedelta(minutes=1)


@pytest.fixture(params=against("dynamodb"))
def subject(request: pytest.FixtureRequest) -> Iterator[Subject]:
    yield from subjects(request)


def test_due_rows_are_counted_by_partition_and_bucket(subject: Subject) -> None:
    first, second = ids_in_partition(11, 2)
    (third,) = ids_in_partition(12, 1)
    subject.put_job(a_job(T0 + 3 * MINUTE, first), T0)
    subject.put_job(a_job(T0 + 3 * MINUTE + timedelta(seconds=20), second), T0)
    subject.put_job(a_job(T0 + 5 * MINUTE, third), T0)
    subject.put_job(a_job(T0 + 9 * MINUTE, paused=True), T0)  # not due: not in the index
    assert subject.store.due_rows_by_bucket() == {
        (11, minute_bucket(T0 + 3 * MINUTE)): 2,
        (12, minute_bucket(T0 + 5 * MINUTE)): 1,
    }


def test_a_mark_is_lowered_to_the_oldest_row_only_where_it_is_later(subject: Subject) -> None:
    store = subject.store
    (restored,) = ids_in_partition(21, 1)
    subject.put_job(a_job(T0 + 2 * MINUTE, restored), T0)  # the row as the restore point left it
    store.advance_low_water_marks({21: minute_bucket(T0 + 9 * MINUTE)})  # the current control table's mark
    store.ensure_low_water_mark(22, minute_bucket(T0))
    assert check_marks(store, [21, 22]).behind == {21: 1}

    written = store.lower_low_water_marks(
        {21: minute_bucket(T0 + 2 * MINUTE), 22: minute_bucket(T0 + 5 * MINUTE), 23: minute_bucket(T0)}
    )
    assert written == {21: minute_bucket(T0 + 2 * MINUTE), 23: minute_bucket(T0)}  # 22's was earlier: kept
    assert store.low_water_marks([21, 22, 23]) == {
        21: minute_bucket(T0 + 2 * MINUTE),
        22: minute_bucket(T0),
        23: minute_bucket(T0),
    }
    assert check_marks(store, [21, 22, 23]).rows_behind == 0


def test_the_rebuild_leaves_no_due_row_behind_its_mark(subject: Subject) -> None:
    store = subject.store
    rows = ids_in_partition(31, 3)
    for minutes, job_id in zip((2, 4, 40), rows, strict=True):
        subject.put_job(a_job(T0 + minutes * MINUTE, job_id), T0)
    store.advance_low_water_marks({31: minute_bucket(T0 + 30 * MINUTE)})
    before = check_marks(store, [31])
    assert before.behind == {31: 2}

    rebuild = rebuild_marks(store, T0 + 31 * MINUTE, [31])
    assert rebuild.lowered == {31: minute_bucket(T0 + 2 * MINUTE)}
    assert rebuild.after.rows_behind == 0 and rebuild.after.rows == 3


def test_a_mark_lowered_since_its_mover_read_it_is_not_raised(subject: Subject) -> None:
    # A poller read 10:09, the rebuild lowered the mark to 10:02 meanwhile: the poller's move from 10:09
    # would skip the buckets from 10:02 it never read. Refused, and said so; a move from the lowered one goes.
    store = subject.store
    store.ensure_low_water_mark(41, minute_bucket(T0 + 9 * MINUTE))
    store.ensure_low_water_mark(42, minute_bucket(T0 + 9 * MINUTE))
    store.lower_low_water_marks({41: minute_bucket(T0 + 2 * MINUTE)})

    read = {41: minute_bucket(T0 + 9 * MINUTE), 42: minute_bucket(T0 + 9 * MINUTE)}
    refused = store.advance_low_water_marks(
        {41: minute_bucket(T0 + 10 * MINUTE), 42: minute_bucket(T0 + 10 * MINUTE)}, read
    )
    assert refused == {41}
    assert store.low_water_marks([41, 42]) == {
        41: minute_bucket(T0 + 2 * MINUTE),
        42: minute_bucket(T0 + 10 * MINUTE),
    }
    assert (
        store.advance_low_water_marks(
            {41: minute_bucket(T0 + 3 * MINUTE)}, {41: minute_bucket(T0 + 2 * MINUTE)}
        )
        == set()
    )
    assert store.low_water_marks([41]) == {41: minute_bucket(T0 + 3 * MINUTE)}
