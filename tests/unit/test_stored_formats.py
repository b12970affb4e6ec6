"""Each release reads what the release before it and the release after it write (docs/stored-formats.md).

The shapes a release stores and queues are recorded in ``tests/fixtures/formats/<release>/`` (kept, never
edited: a new release adds its own folder); ``next/`` holds the shapes the release being made adds (the
changelog's Unreleased), and is renamed to its version when that release is tagged. This release must
read every recorded release's items and messages, and read them the same when a later release has added
fields to any of their objects: such a field is data this release does not use, never a reason to fail a
read (and with it a bucket, a claim or a run). What a client sends through the API still refuses a field
it does not know (a 422 naming it).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from duetime import build_info
from duetime.adapters.dynamodb.codec import item_to_job, item_to_run
from duetime.adapters.dynamodb.jobs import item_to_mark
from duetime.adapters.dynamodb.quarantine_record import item_to_quarantined
from duetime.adapters.dynamodb.reconciler import item_to_report
from duetime.adapters.dynamodb.table_modes import item_to_switch_log
from duetime.domain.models import JobSpec, Team
from duetime.domain.stored_format import STORED, format_of, release_format
from duetime.ports.queue import decode

FORMATS = Path(__file__).parents[1] / "fixtures" / "formats"
ADDED = "added_by_a_later_release"
FREE_MAPS = {"labels", "headers"}  # a team's own keys, not a model's fields: nothing is added there


def read_team(document: dict[str, Any]) -> Any:
    return Team.model_validate_json(json.dumps(document), context=STORED)  # as adapters/dynamodb reads it


READERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "job_item": item_to_job,
    "low_water_mark": item_to_mark,
    "quarantine_record": item_to_quarantined,
    "reconciler_report": item_to_report,
    "run_item": item_to_run,
    "run_message": lambda message: decode(json.dumps(message)),
    "table_modes_log": item_to_switch_log,
    "team": read_team,
}


def reader_of(path: Path) -> Callable[[dict[str, Any]], Any]:
    return next(read for prefix, read in READERS.items() if path.name.startswith(prefix))


def recorded() -> list[Path]:
    return sorted(FORMATS.glob("*/*.json"))


def with_a_field_added_everywhere(value: Any) -> Any:
    """``value`` with a field no release has yet in every object of it, the JSON an item's string attributes
    hold too, and an attribute on the item itself."""
    if isinstance(value, dict):
        grown = {
            key: item if key in FREE_MAPS else with_a_field_added_everywhere(item)
            for key, item in value.items()
        }
        if set(grown) == {"S"} and isinstance(grown["S"], str):  # a DynamoDB string attribute
            try:
                held = json.loads(grown["S"])
            except ValueError:
                return grown
            if isinstance(held, dict):
                return {"S": json.dumps(with_a_field_added_everywhere(held))}
            return grown
        return {**grown, ADDED: {"S": "x"} if _is_item(grown) else {"set": [1, 2]}}
    if isinstance(value, list):
        return [with_a_field_added_everywhere(item) for item in value]
    return value


def _is_item(value: dict[str, Any]) -> bool:
    """A DynamoDB item: every value an attribute value ({"S": ...}, {"N": ...}, ...)."""
    return bool(value) and all(
        isinstance(v, dict) and len(v) == 1 and next(iter(v)) in "SNBML" for v in value.values()
    )


def test_a_shape_of_every_release_is_recorded() -> None:
    # the releases so far, one each, and the one being made
    assert sorted(p.name for p in FORMATS.iterdir()) == ["0.1.0", "0.2.0", "next"]
    assert {next(prefix for prefix in READERS if p.name.startswith(prefix)) for p in recorded()} == set(
        READERS
    )


@pytest.mark.parametrize("path", recorded(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_this_release_reads_every_recorded_item_and_message(path: Path) -> None:
    assert reader_of(path)(json.loads(path.read_text())) is not None


@pytest.mark.parametrize("path", recorded(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_field_a_later_release_adds_to_any_object_is_ignored_and_the_read_is_the_same(path: Path) -> None:
    recorded_shape = json.loads(path.read_text())
    grown = with_a_field_added_everywhere(copy.deepcopy(recorded_shape))
    assert ADDED in json.dumps(grown)  # the test adds something to read past
    assert reader_of(path)(grown) == reader_of(path)(recorded_shape)


def test_what_a_client_sends_still_refuses_a_field_it_does_not_know() -> None:
    job = {"name": "x", "schedule": {"rate": "1 hour"}, "target": {"url": "https://example.com/x"}}
    JobSpec.model_validate(job)
    for grown in ({**job, "nmae": "typo"}, {**job, "target": {**job["target"], "methd": "GET"}}):
        with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
            JobSpec.model_validate(grown)


def test_what_this_release_cannot_read_at_all_still_fails_the_read() -> None:
    """A shape, not a field: a schedule kind this release does not have. Reading it fails (the poller
    quarantines such a row); only a finalized upgrade may write it."""
    item = json.loads((FORMATS / "0.1.0" / "job_item.json").read_text())
    spec = json.loads(item["spec"]["S"])
    item["spec"]["S"] = json.dumps({**spec, "schedule": {"every_other_full_moon": True}})
    with pytest.raises(ValidationError):
        item_to_job(item)


def test_each_release_recorded_its_items_and_messages_in_the_format_it_writes() -> None:
    for path in recorded():
        written = format_of(json.loads(path.read_text()))
        release = build_info.version if path.parent.name == "next" else path.parent.name
        expected = release_format(release)
        if path.stem != "team":  # a team's JSON alone: the format is on the item that holds it
            assert written == expected, path
