"""Two phases on DynamoDB Local, through the wiring every function uses (docs/guide/upgrading.md): a new
installation writes this release's stored format from its first item; one upgraded from a release before
formats writes format 1 until the operator finalizes (``duetime system finalize``), and a rollback past the
finalize is refused (``duetime system deploy-check``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from duetime import cli, wiring
from duetime.adapters.dynamodb.codec import job_to_item
from duetime.domain.ids import partition_of
from duetime.domain.stored_format import FORMAT, format_of
from duetime.domain.timeutil import minute_bucket, parse_iso_z
from duetime.ports import UnreadableRow

from ..twin_support import a_job
from .conftest import Stack
from .test_handlers import deployed  # noqa: F401 (a fixture)

pytestmark = pytest.mark.integration


@pytest.fixture
def wired(deployed: Stack) -> Iterator[Stack]:  # noqa: F811
    yield deployed


def items(stack: Stack, table: str) -> list[dict[str, Any]]:
    pages = stack.dynamodb.get_paginator("scan").paginate(TableName=table)
    return [item for page in pages for item in page["Items"]]


def a_job_created_and_triggered(stack: Stack) -> tuple[str, str]:
    """A job created through the API's logic and run once by hand: its id and its run's id."""
    service = wiring.make_job_service(wiring.settings(), wiring.make_store(wiring.settings()))
    team = stack.store.get_team("team-a")
    assert team is not None
    body = {"name": "nightly", "schedule": {"cron": "0 3 * * *"}, "target": {"url": "https://example.com/x"}}
    job = service.create_job(team, body)
    run = service.trigger(team, job.id)
    return job.id, run.run_id


def formats(stack: Stack, job_id: str, run_id: str) -> dict[str, int]:
    """The stored format of the job's item, its run's row, its history and the run's message."""
    job = next(i for i in items(stack, stack.names.jobs) if i["job_id"]["S"] == job_id)
    run = next(i for i in items(stack, stack.names.runs) if i.get("run_id", {}).get("S") == run_id)
    history = [i for i in items(stack, stack.names.control) if i["pk"]["S"].endswith(job_id)]
    bodies = []
    while batch := stack.consumer.receive(10, wait_seconds=1):
        bodies += [json.loads(m.body) for m in batch]
        stack.consumer.delete([m.receipt_handle for m in batch])
    message = next(b for b in bodies if b["run_id"] == run_id)
    return {
        "job": format_of(job),
        "run": format_of(run),
        "history": min(format_of(i) for i in history),
        "message": format_of(message),
    }


def duetime(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = cli.main([*argv, "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def test_a_new_installation_writes_every_item_and_message_in_this_releases_format(wired: Stack) -> None:
    job_id, run_id = a_job_created_and_triggered(wired)
    assert formats(wired, job_id, run_id) == {
        "job": FORMAT,
        "run": FORMAT,
        "history": FORMAT,
        "message": FORMAT,
    }
    installation = wiring.installation_record(wiring.settings())
    assert installation is not None
    record = installation.read_installation()
    assert (record.finalized_format, record.finalized_release) == (FORMAT, wiring.build_info.version)
    assert [r.release for r in record.releases] == [wiring.build_info.version]


def test_an_upgraded_installation_writes_the_old_format_until_finalized_then_refuses_a_rollback(
    wired: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    old = a_job(parse_iso_z("2026-12-07T03:00:00Z"))
    wired.store.ensure_low_water_mark(partition_of(old.id), minute_bucket(old.created_at))  # as 0.1.0 did
    wired.dynamodb.put_item(TableName=wired.names.jobs, Item=job_to_item(old, old.created_at))
    job_id, run_id = a_job_created_and_triggered(wired)
    assert set(formats(wired, job_id, run_id).values()) == {1}  # what 0.1.0 reads, byte for byte the same

    code, shown, _ = duetime(capsys, "system", "installation")
    assert code == 0 and shown["finalized_format"] == 1 and shown["finalize"].startswith("not yet")
    assert duetime(capsys, "system", "deploy-check", "--release", "0.1.0")[0] == 0  # a rollback is safe

    code, answer, err = duetime(capsys, "system", "finalize")
    assert (code, answer["finalized"], answer["writes_format"]) == (1, False, 1)
    assert "may run until" in err  # the release before may still run: a worker's 15 minutes
    code, answer, _ = duetime(capsys, "system", "finalize", "--force")
    assert (code, answer["finalized"], answer["writes_format"]) == (0, True, FORMAT)

    wiring.forget()  # a new process: it asks the record at its first write
    job_id, run_id = a_job_created_and_triggered(wired)
    assert set(formats(wired, job_id, run_id).values()) == {FORMAT}
    code, verdict, err = duetime(capsys, "system", "deploy-check", "--release", "0.1.0")
    assert (code, verdict["deploy"]) == (1, "refused")
    assert "rollback refused" in err and "0.1.0" in err
    assert duetime(capsys, "system", "deploy-check")[0] == 0  # this release again: allowed


def test_the_operator_lists_the_quarantined_rows(wired: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    assert duetime(capsys, "system", "quarantine")[1] == []
    row = UnreadableRow(
        "01JDZ3K6R2V9Q8T7S6P5N4M3K2", 7, "2026-12-07T03:00", "2026-12-07T03:00:05Z#01JD", "E: bad"
    )
    wired.store.record_unreadable([row], parse_iso_z("2026-12-07T03:00:10Z"))
    code, rows, _ = duetime(capsys, "system", "quarantine")
    assert code == 0
    assert rows == [
        {
            "job_id": row.job_id,
            "partition": 7,
            "bucket": row.bucket,
            "due_key": row.due_key,
            "error": "E: bad",
            "first_seen": "2026-12-07T03:00:10Z",
        }
    ]
