"""Models <-> DynamoDB items (low-level attribute values). Specs and payloads are stored as JSON strings."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeAlias

from duetime.adapters.dynamodb.reap_checks import DEFAULT_LEASE_CHECK, waiting_check
from duetime.domain.due_index import due_bucket, due_key
from duetime.domain.ids import partition_of, split_run_id
from duetime.domain.models import (
    HttpTarget,
    Job,
    JobSpec,
    JobState,
    RetryPolicy,
    Run,
    RunResult,
    RunStatus,
    parse_target,
)
from duetime.domain.stored_format import FIRST_FORMAT, FORMAT_ATTRIBUTE, STORED
from duetime.domain.timeutil import iso_z, parse_iso_z

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

# An item or key as the low-level client sends and returns it (the stubs' own shape, so responses need no
# conversion): attribute name -> one attribute value, e.g. ``{"S": "..."}``.
Item: TypeAlias = "dict[str, AttributeValueTypeDef]"
_SPEC_FIELDS = set(JobSpec.model_fields)


def string_attribute(value: str) -> AttributeValueTypeDef:
    """A string attribute value (``{"S": ...}``)."""
    return {"S": value}


def number_attribute(value: int) -> AttributeValueTypeDef:
    """A number attribute value (``{"N": ...}``: DynamoDB sends numbers as strings)."""
    return {"N": str(value)}


def time_attribute(value: datetime) -> AttributeValueTypeDef:
    """An instant as stored: a string attribute, ``iso_z`` (to the second; sorts in time order)."""
    return {"S": iso_z(value)}


def _optional_time(item: Item, name: str, parse: Callable[[str], datetime] = parse_iso_z) -> datetime | None:
    """The time attribute ``name`` of ``item``, None when the item has none."""
    return parse(item[name]["S"]) if name in item else None


def stamped(item: Item, stored_format: int) -> Item:
    """``item`` with its stored format (``fmt``), which format 1 (the releases before formats) never wrote."""
    if stored_format > FIRST_FORMAT:
        item[FORMAT_ATTRIBUTE] = number_attribute(stored_format)
    return item


def scheduling_attributes(job: Job, state: JobState, now: datetime) -> tuple[Item, list[str]]:
    """SET values and REMOVE names for a job's schedule state; the due-index keys only while it is due."""
    values: Item = {"version": number_attribute(state.version)}
    removes: list[str] = []
    for name in ("next_nominal_at", "next_fire_at", "last_scheduled_at"):
        value = getattr(state, name)
        if value is None:
            removes.append(name)
        else:
            values[name] = time_attribute(value)
    if state.active_run is not None:
        values["active_run"] = string_attribute(state.active_run)
    else:
        removes.append("active_run")
    if state.next_fire_at is not None and not job.paused:
        values["due_bucket"] = string_attribute(due_bucket(job.id, state.next_fire_at, now))
        values["due_key"] = string_attribute(due_key(job.id, state.next_fire_at))
    else:
        removes += ["due_bucket", "due_key"]
    return values, removes


def job_to_item(job: Job, now: datetime, stored_format: int = FIRST_FORMAT) -> Item:
    item: Item = {
        "job_id": string_attribute(job.id),
        "team": string_attribute(job.team),
        "partition": number_attribute(partition_of(job.id)),
        "spec": string_attribute(job.model_dump_json(include=_SPEC_FIELDS)),
        "created_at": time_attribute(job.created_at),
        "updated_at": time_attribute(job.updated_at),
    }
    values, _ = scheduling_attributes(job, job.state, now)
    item.update(values)
    return stamped(item, stored_format)


def item_to_job(item: Item, parse_time: Callable[[str], datetime] = parse_iso_z) -> Job:
    """The job an item holds; its times read with ``parse_time`` (a faster reader of the same format)."""
    spec = json.loads(item["spec"]["S"])
    return Job.model_validate(
        {
            **spec,
            "id": item["job_id"]["S"],
            "team": item["team"]["S"],
            "created_at": parse_time(item["created_at"]["S"]),
            "updated_at": parse_time(item["updated_at"]["S"]),
            "state": {  # validated with the job: one call into pydantic rather than two
                "next_nominal_at": _optional_time(item, "next_nominal_at", parse_time),
                "next_fire_at": _optional_time(item, "next_fire_at", parse_time),
                "last_scheduled_at": _optional_time(item, "last_scheduled_at", parse_time),
                "version": int(item["version"]["N"]),
                "active_run": item["active_run"]["S"] if "active_run" in item else None,
            },
        },
        context=STORED,
    )


def reap_shard(partition: int) -> str:
    return f"p{partition:02d}"


def run_key(run_id: str) -> Item:
    """The runs table's key for a run id ``<job id>@<occurrence>``; ``ValueError`` for anything else (no
    such run can exist)."""
    job_id, occurrence = split_run_id(run_id)
    return {"job_id": string_attribute(job_id), "occurrence": string_attribute(occurrence)}


def run_payload(run: Run) -> str:
    """A run row's ``payload``: what its worker calls and how (target, timeout, retry policy), as JSON."""
    if not isinstance(run.target, HttpTarget):
        return run_payload_by_dict(run)
    text = run.model_dump_json(include=_PAYLOAD_FIELDS)
    if not _PRINTABLE_ASCII.fullmatch(text):
        return run_payload_by_dict(run)
    if run.waits_for is not None:  # in the payload, so a message carrying the run cannot drop it
        text = f'{text[:-1]},"waits_for":{json.dumps(run.waits_for)}}}'
    if run.success_by is not None:
        text = f'{text[:-1]},"success_by":"{iso_z(run.success_by)}"}}'
    return text


# The payload's fields pydantic writes as JSON itself (in this order, the model's), faster than a dict
# of their dumps through ``json.dumps``. The text is the same for an HTTP target (strings and whole numbers)
# as long as it is printable ASCII: outside that, ``json.dumps`` escapes what pydantic writes as it is (any
# other character, DEL). An AWS target may hold any JSON, whose floats the two write differently (``1e+16``
# and ``1e16``, NaN and null): such payloads, and those that are not printable ASCII, go by the dict path.
_PAYLOAD_FIELDS = {"target", "timeout_seconds", "retry"}
_PRINTABLE_ASCII = re.compile("[ -~]*")


def run_payload_by_dict(run: Run) -> str:
    """``run_payload``'s text by the general path: a dict of the models' JSON dumps through ``json.dumps``."""
    payload: dict[str, Any] = {
        "target": run.target.model_dump(mode="json"),
        "timeout_seconds": run.timeout_seconds,
        "retry": run.retry.model_dump(mode="json"),
    }
    if run.waits_for is not None:
        payload["waits_for"] = run.waits_for
    if run.success_by is not None:
        payload["success_by"] = iso_z(run.success_by)
    return json.dumps(payload, separators=(",", ":"))


def run_to_item(
    run: Run,
    lease_check: timedelta = DEFAULT_LEASE_CHECK,
    own_reap_entry: bool = True,
    visible_at: datetime | None = None,
    stored_format: int = FIRST_FORMAT,
) -> Item:
    """A new run row: queued (claims, triggers and backfills create runs), in the reap index at its first
    check (``reap_checks``): its message is sent as it is created, visible then or at ``visible_at`` (a
    message sent with a delay). Without ``own_reap_entry`` the row stays out of the index: a reap ticket
    covers it (``reap_tickets``). A skipped run (``claim_plan.skipped_run``) is written finished, with its
    result and no queue deadline, so never in the index."""
    item: Item = {
        **run_key(run.run_id),
        "run_id": string_attribute(run.run_id),
        "team": string_attribute(run.team),
        "partition": number_attribute(run.partition),
        "nominal_at": time_attribute(run.nominal_at),
        "fire_at": time_attribute(run.fire_at),
        "status": string_attribute(run.status.value),
        "attempt": number_attribute(run.attempt),
        "max_attempts": number_attribute(run.max_attempts),
        "payload": string_attribute(run_payload(run)),
        "created_at": time_attribute(run.created_at),
        "updated_at": time_attribute(run.updated_at),
        "ttl": number_attribute(run.expires_at_epoch),
    }
    if run.result is not None:  # a skipped run: recorded finished, with the reason
        item["result"] = string_attribute(run.result.model_dump_json(exclude_none=True))
    if run.finished_at is not None:
        item["finished_at"] = time_attribute(run.finished_at)
    if run.queue_deadline is not None:
        item["queue_deadline"] = time_attribute(run.queue_deadline)
    if run.queue_deadline is not None and own_reap_entry:
        item["reap_shard"] = string_attribute(reap_shard(run.partition))
        item["reap_at"] = time_attribute(
            waiting_check(visible_at or run.created_at, run.queue_deadline, lease_check)
        )
    return stamped(item, stored_format)


def item_to_run(item: Item) -> Run:
    payload = json.loads(item["payload"]["S"])
    result = json.loads(item["result"]["S"]) if "result" in item else None
    return Run(
        run_id=item["run_id"]["S"],
        job_id=item["job_id"]["S"],
        team=item["team"]["S"],
        partition=int(item["partition"]["N"]),
        nominal_at=parse_iso_z(item["nominal_at"]["S"]),
        fire_at=parse_iso_z(item["fire_at"]["S"]),
        status=RunStatus(item["status"]["S"]),
        attempt=int(item["attempt"]["N"]),
        max_attempts=int(item["max_attempts"]["N"]),
        owner=item["owner"]["S"] if "owner" in item else None,
        lease_expires_at=_optional_time(item, "lease_expires_at"),
        queue_deadline=_optional_time(item, "queue_deadline"),
        retry_at=_optional_time(item, "retry_at"),
        waits_for=payload.get("waits_for"),
        success_by=parse_iso_z(payload["success_by"]) if "success_by" in payload else None,
        target=parse_target(payload["target"]),
        timeout_seconds=payload["timeout_seconds"],
        retry=RetryPolicy.model_validate(payload["retry"], context=STORED),
        result=RunResult.model_validate(result, context=STORED) if result else None,
        created_at=parse_iso_z(item["created_at"]["S"]),
        started_at=_optional_time(item, "started_at"),
        finished_at=_optional_time(item, "finished_at"),
        updated_at=parse_iso_z(item["updated_at"]["S"]),
        expires_at_epoch=int(item["ttl"]["N"]),
        in_reap_index="reap_at" in item,
    )
