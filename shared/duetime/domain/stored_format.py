"""How duetime reads what it stored or queued: tolerantly, so that one release reads what the next one writes.

A model that a client writes through the API forbids fields it does not know (a typo is a 422 naming it).
Read back from a table or a queue (validation context ``STORED``), the same model ignores them: a field a
later release added is data this release does not use, never a reason to fail a read (and with it a bucket,
a claim or a run). What this release cannot read at all (a schedule kind it does not have, a malformed
value) still fails, and is a format change only a finalized upgrade may write (docs/stored-formats.md).
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic import BaseModel, ValidationInfo, model_validator

STORED: dict[str, Any] = {"stored": True}  # the validation context of data read from a table or a queue


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
