"""What every answer of the API shares: ``Out`` (documented without defaults), the error shape, health."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from duetime.domain.stored_format import ReadsStoredTolerantly


class Out(ReadsStoredTolerantly):
    """An answer. The API writes exactly its fields; a client reading an answer (``duetime.client``, context
    ``STORED``) ignores a field it does not know, which a later release of the server may add."""

    model_config = ConfigDict(extra="forbid")


class ErrorDetail(Out):
    code: str
    message: str
    field: str | None = None


class ErrorOut(Out):
    error: ErrorDetail


def no_defaults(schema: dict[str, Any]) -> None:
    """A field left out of a PATCH is left alone: the document shows no default for it."""
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for field in properties.values():
            if isinstance(field, dict):
                field.pop("default", None)


class Health(Out):
    status: str
    version: str = Field(description="duetime's version (semantic versioning)")
    commit: str = Field(
        description="the commit it was built from: a git short sha, -dirty with uncommitted changes, unknown"
    )
