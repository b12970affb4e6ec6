"""The installation's record (``InstallationRecord``), on the twin and on DynamoDB Local alike: which releases
have run, the format it is finalized at, and the two conditional writes that move it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from duetime.adapters.dynamodb.codec import job_to_item
from duetime.adapters.dynamodb.installation import DynamoInstallation
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.memory import MemoryStore
from duetime.adapters.memory.installation import MemoryInstallation
from duetime.domain.ids import partition_of
from duetime.domain.installation import Installation
from duetime.domain.models import Job
from duetime.domain.timeutil import minute_bucket
from duetime.ports import InstallationRecord

from ..twin_support import a_job
from .conftest import TWIN, against

T0 = datetime(2026, 12, 7, 5, 0, 0, tzinfo=UTC)


class Subject:
    """A record, and a way to store a job beside it (for ``holds_nothing``)."""

    def __init__(self, record: InstallationRecord, put_job: Any) -> None:
        self.record = record
        self.put_job = put_job


@pytest.fixture(params=against("dynamodb"))
def subject(request: pytest.FixtureRequest) -> Iterator[Subject]:
    if request.param == TWIN:
        store = MemoryStore()
        yield Subject(MemoryInstallation(store), lambda job: store.put_job(job, T0))
        return
    client, names = request.getfixturevalue("dynamodb_tables")
    store = DynamoStore(client, names)

    def put_job(job: Job) -> None:  # as the API writes a job: its partition's mark first
        store.ensure_low_water_mark(partition_of(job.id), minute_bucket(T0))
        client.put_item(TableName=names.jobs, Item=job_to_item(job, T0))

    yield Subject(DynamoInstallation(client, names), put_job)


def test_an_installation_never_recorded_reads_as_finalized_at_format_one(subject: Subject) -> None:
    assert subject.record.read_installation() == Installation()
    assert subject.record.read_installation().finalized_format == 1


def test_recording_a_release_keeps_its_first_sighting_and_moves_its_last(subject: Subject) -> None:
    subject.record.record_release("0.2.0", T0)
    subject.record.record_release("0.3.0", T0 + timedelta(minutes=1))
    after = subject.record.record_release("0.2.0", T0 + timedelta(minutes=7))
    seen = after.seen("0.2.0")
    assert seen is not None
    assert (seen.first_seen, seen.last_seen) == (T0, T0 + timedelta(minutes=7))
    assert [r.release for r in after.releases] == ["0.2.0", "0.3.0"]  # by first sighting
    assert subject.record.read_installation() == after


def test_a_new_installation_is_started_once(subject: Subject) -> None:
    assert subject.record.start_installation(2, "0.2.0", T0)
    assert not subject.record.start_installation(3, "0.3.0", T0 + timedelta(minutes=1))
    installation = subject.record.read_installation()
    assert (installation.finalized_format, installation.finalized_release) == (2, "0.2.0")
    assert installation.finalized_at == T0


def test_a_finalize_lands_only_on_the_format_it_read(subject: Subject) -> None:
    assert not subject.record.finalize_installation(2, "0.2.0", T0, was=2)  # it holds 1, not 2
    assert subject.record.finalize_installation(2, "0.2.0", T0, was=1)
    assert not subject.record.finalize_installation(2, "0.2.1", T0, was=1)  # beaten: it holds 2 now
    assert subject.record.finalize_installation(3, "0.3.0", T0 + timedelta(days=1), was=2)
    installation = subject.record.read_installation()
    assert (installation.finalized_format, installation.finalized_release) == (3, "0.3.0")


def test_a_finalize_keeps_the_releases_seen(subject: Subject) -> None:
    subject.record.record_release("0.2.0", T0)
    subject.record.finalize_installation(2, "0.2.0", T0 + timedelta(minutes=20), was=1)
    assert [r.release for r in subject.record.read_installation().releases] == ["0.2.0"]


def test_an_installation_holds_nothing_until_a_job_is_stored(subject: Subject) -> None:
    assert subject.record.holds_nothing()
    subject.put_job(a_job(T0 + timedelta(hours=1)))
    assert not subject.record.holds_nothing()
