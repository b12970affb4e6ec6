"""Listing cursors: the start key of a page's Query as opaque text, taken back only by the same listing."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from duetime.domain.catalog import InvalidCursor


def encode_cursor(key: dict[str, Any] | None) -> str | None:
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode() if key else None


# A listing's start key: the attributes of the key it pages through (the table's and the index's), each a
# string, as DynamoDB takes a key attribute (not empty; a sort key at most 1,024 bytes).
TEAM_JOBS_KEY = ("team", "job_id")
CONTROL_KEY = ("pk", "sk")
RUNS_KEY = ("job_id", "occurrence")
MAX_KEY_BYTES = 1024


def decode_cursor(cursor: str | None, scope: tuple[str, str], keys: tuple[str, ...]) -> dict[str, Any] | None:
    """The start key a cursor carries. ``scope`` (attribute, value) is the listing's partition key: a
    cursor taken from another team's or job's listing is refused, not handed to DynamoDB. ``keys`` are the
    attributes of the listing's key: a cursor holding other attributes, or values DynamoDB would refuse
    (not a non-empty string of at most ``MAX_KEY_BYTES``), is refused too, however well-formed its JSON."""
    if not cursor:
        return None
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (binascii.Error, ValueError, RecursionError) as exc:
        raise InvalidCursor("cursor is not one this API returned") from exc
    if not isinstance(key, dict) or set(key) != set(keys) or not all(_key_value(v) for v in key.values()):
        raise InvalidCursor("cursor is not one this API returned")
    if key.get(scope[0]) != {"S": scope[1]}:
        raise InvalidCursor("cursor belongs to another listing")
    return key


def _key_value(value: Any) -> bool:
    """Whether ``value`` is a key attribute's value as DynamoDB takes one in a start key: ``{"S": text}``."""
    if not isinstance(value, dict) or set(value) != {"S"} or not isinstance(value["S"], str):
        return False
    try:
        size = len(value["S"].encode())
    except UnicodeEncodeError:  # a lone surrogate (JSON's "\ud800")
        return False
    return 0 < size <= MAX_KEY_BYTES
