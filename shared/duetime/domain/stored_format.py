"""How duetime reads what it stored or queued: tolerantly, so that one release reads what the next one writes.

A model that a client writes through the API forbids fields it does not know (a typo is a 422 naming it).
Read back from a table or a queue (validation context ``STORED``), the same model ignores them: a field a
later release added is data this release does not use, never a reason to fail a read (and with it a bucket,
a claim or a run). What this release cannot read at all (a schedule kind it does not have, a malformed
value) still fails, and is a format change only a finalized upgrade may write (docs/stored-formats.md).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationInfo, model_validator

STORED: dict[str, Any] = {"stored": True}  # the validation context of data read from a table or a queue

# The stored format: one number for every item family and message an installation holds. An item written
# whole carries it in the attribute ``fmt``, a run message in its key ``"fmt"``; what carries none was
# written in format 1 (the releases before stored formats had a version). A release writes its own format
# only once the installation is finalized at it (``duetime.domain.installation``), and reads its own and
# the one before (docs/stored-formats.md).
FORMAT_ATTRIBUTE = "fmt"
FIRST_FORMAT = 1
FORMAT = 2  # this release's
# The format each release line writes once finalized (a patch release writes its line's): a new format
# comes with a new minor (or major) version, never a patch.
RELEASE_FORMATS = {"0.1": 1, "0.2": 2}


def first_format() -> int:
    """The format a writer given no installation record writes: 1, which every release reads."""
    return FIRST_FORMAT


def release_format(release: str) -> int | None:
    """The format ``release`` (``major.minor.patch``, e.g. ``0.2.0``) writes once finalized; None for a line
    this release does not know."""
    line = ".".join(release.split("+")[0].split("-")[0].split(".")[:2])
    return RELEASE_FORMATS.get(line)


def format_of(stored: Mapping[str, Any]) -> int:
    """The format an item (``{"fmt": {"N": ...}}``) or a decoded message (``{"fmt": n}``) was written in."""
    value = stored.get(FORMAT_ATTRIBUTE)
    if isinstance(value, dict):
        value = value.get("N")
    try:
        return int(value) if value is not None else FIRST_FORMAT
    except (TypeError, ValueError):
        return FIRST_FORMAT


def is_stored(info: ValidationInfo) -> bool:
    return bool((info.context or {}).get("stored"))


class ReadsStoredTolerantly(BaseModel):
    """A model whose unknown fields are an error from a client and ignored in data read back (``STORED``)."""

    @model_validator(mode="before")
    @classmethod
    def _unknown_stored_fields_ignored(cls, data: Any, info: ValidationInfo) -> Any:
        if isinstance(data, dict) and is_stored(info):
            known = _known_keys(cls)
            if not known.issuperset(data):
                return {key: value for key, value in data.items() if key in known}
        return data


@functools.cache
def _known_keys(model: type[BaseModel]) -> frozenset[str]:
    """The keys ``model`` reads: its fields' names and their aliases."""
    keys = set(model.model_fields)
    for field in model.model_fields.values():
        keys.update(alias for alias in (field.alias, field.validation_alias) if isinstance(alias, str))
    return frozenset(keys)
