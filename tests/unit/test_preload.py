"""The store's due rows for the minute preload: a few hundred bytes a job, the job's model built only when
asked for, and equal to the model the store's ``due_jobs`` reads."""

from __future__ import annotations

import gc
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from duetime.adapters.dynamodb.codec import item_to_job, job_to_item
from duetime.adapters.dynamodb.store import CompactDueRow, DynamoStore
from duetime.claim_plan import initial_state
from duetime.ids import new_job_id, partition_of
from duetime.models import Job, JobSpec
from duetime.timeutil import minute_bucket

from ..job_support import create_job
from .test_poller_lease_loop import store as store  # the moto store fixture those tests use

MINUTE = datetime(2026, 12, 1, 10, 1, tzinfo=UTC)  # the minute the jobs are due in


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


# --- read from the store ---------------------------------------------------------------------------------


def due_at(store: DynamoStore, *seconds: int) -> list[Job]:
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


def at(second: float) -> datetime:
    return MINUTE + timedelta(seconds=second)


def fire_time(job: Job) -> datetime:
    assert job.state.next_fire_at is not None
    return job.state.next_fire_at


def test_due_rows_are_the_rows_due_jobs_reads_in_the_same_order(store: DynamoStore) -> None:
    jobs = due_at(store, 0, 0, 0, 1, 2, 2, 2)
    for partition in sorted({partition_of(job.id) for job in jobs}):
        args = (partition, minute_bucket(MINUTE), at(59), 10)
        rows, read = store.due_rows(*args), store.due_jobs(*args)
        assert [row.job() for row in rows] == read
        assert [(row.job_id, row.version) for row in rows] == [(job.id, job.state.version) for job in read]
        assert [row.fire_at for row in rows] == [int(fire_time(job).timestamp()) for job in read]
