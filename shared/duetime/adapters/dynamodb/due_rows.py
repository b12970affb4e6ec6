"""``CompactDueRow``: a due row as the minute preload holds it, a few hundred bytes a job."""

from __future__ import annotations

import functools
import zlib
from datetime import UTC, datetime

from duetime.adapters.dynamodb.codec import Item, item_to_job, number_attribute, string_attribute
from duetime.domain.models import Job, JobSpec
from duetime.domain.timeutil import iso_z, parse_iso_z

_PACKED_TIMES = ("created_at", "updated_at", "next_nominal_at", "last_scheduled_at")
_SEP = "\x1f"  # after each time and the team's length (none holds it); then the team (by length) and spec
_WBITS, _MEM_LEVEL = -11, 4  # raw deflate, a 2 KiB window: the preset and a usual spec fit in it


@functools.cache
def _preset() -> bytes:
    """The preset dictionary rows are deflated against: a spec's JSON with every default."""
    spec = JobSpec.model_validate(
        {"name": "-", "schedule": {"cron": "0 0 * * *"}, "target": {"url": "https://-"}}
    )
    return spec.model_dump_json().encode()


@functools.lru_cache(maxsize=4096)
def _epoch_seconds(text: str) -> int:
    """An ``iso_z`` time in seconds since the epoch; the same int object for the same time while cached."""
    return int(parse_iso_z(text).timestamp())


def _stored_time(text: str) -> datetime:
    """``parse_iso_z``, many times faster for the one shape the store writes (``iso_z``: 20
    characters, ``T`` and ``Z`` in place), with the same result: an aware datetime in ``UTC``."""
    if len(text) == 20 and text[10] == "T" and text[19] == "Z":
        return datetime.fromisoformat(text)
    return parse_iso_z(text)


class CompactDueRow:
    """A due row as the minute preload holds it (``duetime.ports.DueRow``), in a few hundred bytes instead
    of a model's few thousand: slots, no ``__dict__``; the fire time, job id and version at hand; everything
    else ``item_to_job`` reads (the spec JSON as stored, team, and the item's other times) in one bytes
    object, deflated against a preset dictionary of a spec's field names and default values, so what a job
    shares with every other job costs a few bytes and only what is its own (name, URL, headers, body) is
    kept. ``job()`` inflates it into the item's attributes and builds the model through ``item_to_job``,
    so it equals what ``due_jobs`` returns. Rows due in the same second share one fire-time integer."""

    __slots__ = ("_packed", "active_run", "fire_at", "job_id", "version")
    # What ``item_to_job`` reads: all a due row's reader asks the index for.
    ATTRIBUTES = ("job_id", "version", "next_fire_at", "active_run", "team", "spec", *_PACKED_TIMES)

    def __init__(self, item: Item) -> None:
        self.fire_at = _epoch_seconds(item["next_fire_at"]["S"])
        self.job_id: str = item["job_id"]["S"]
        self.version = int(item["version"]["N"])
        self.active_run: str | None = item["active_run"]["S"] if "active_run" in item else None
        team = item["team"]["S"]
        times = [item[name]["S"] if name in item else "" for name in _PACKED_TIMES]
        text = _SEP.join([*times, str(len(team)), team + item["spec"]["S"]])
        deflate = zlib.compressobj(6, zlib.DEFLATED, _WBITS, _MEM_LEVEL, zlib.Z_DEFAULT_STRATEGY, _preset())
        self._packed = deflate.compress(text.encode()) + deflate.flush()

    def job(self) -> Job:
        inflate = zlib.decompressobj(_WBITS, _preset())
        text = (inflate.decompress(self._packed) + inflate.flush()).decode()
        *times, team_length, rest = text.split(_SEP, len(_PACKED_TIMES) + 1)
        team, spec = rest[: int(team_length)], rest[int(team_length) :]
        item: Item = {
            "job_id": string_attribute(self.job_id),
            "version": number_attribute(self.version),
            "next_fire_at": string_attribute(iso_z(datetime.fromtimestamp(self.fire_at, UTC))),
            "team": string_attribute(team),
            "spec": string_attribute(spec),
        }
        for name, value in zip(_PACKED_TIMES, times, strict=True):
            if value:
                item[name] = string_attribute(value)
        if self.active_run is not None:
            item["active_run"] = string_attribute(self.active_run)
        return item_to_job(item, _stored_time)

    def __repr__(self) -> str:
        return f"CompactDueRow({self.job_id!r}, fire_at={self.fire_at}, version={self.version})"
