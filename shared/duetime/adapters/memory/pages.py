"""The twin's listings: opaque cursors only the listing that returned them takes back, pages in key order,
and values as DynamoDB gives them back after JSON."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from duetime.domain.catalog import InvalidCursor, Page


def json_value(value: Any) -> Any:
    """``value`` as DynamoDB gives it back after ``json.dumps(..., default=str)``."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def encode_cursor(listing: str, after: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([listing, after]).encode()).decode()


def decode_cursor(cursor: str | None, listing: str) -> str | None:
    """The key a cursor of ``listing`` starts after; ``InvalidCursor`` for anything else."""
    if not cursor:
        return None
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (binascii.Error, ValueError, RecursionError) as exc:
        raise InvalidCursor("cursor is not one this API returned") from exc
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        raise InvalidCursor("cursor is not one this API returned")
    if value[0] != listing:
        raise InvalidCursor("cursor belongs to another listing")
    return str(value[1])


def page(entries: list[tuple[str, Any]], listing: str, limit: int, cursor: str | None, newest: bool) -> Page:
    """One page of ``entries`` (key, item) in key order (``newest``: descending), after ``cursor``'s key."""
    after = decode_cursor(cursor, listing)
    ordered = sorted(entries, key=lambda entry: entry[0], reverse=newest)
    if after is not None:
        ordered = [e for e in ordered if (e[0] < after if newest else e[0] > after)]
    taken = ordered[:limit]
    more = len(ordered) > limit
    return Page([item for _, item in taken], encode_cursor(listing, taken[-1][0]) if more else None)
