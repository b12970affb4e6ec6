"""The path and query parameters the routes share, with the constraints the OpenAPI document states."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Path, Query

JobId = Annotated[str, Path(min_length=1, max_length=64)]


RunId = Annotated[str, Path(min_length=1, max_length=128)]


TokenId = Annotated[str, Path(min_length=1, max_length=64)]


CalendarName = Annotated[str, Path(min_length=1, max_length=40)]


# A listing's next_cursor, as this API gives it: URL-safe base64. Its alphabet keeps every URL the document
# allows within API Gateway's 8,192 characters (an edge-optimized API's; a cursor of 2,048 characters each
# percent-encoded as three bytes of UTF-8 would make an 18 KB URL, which API Gateway refuses unanswered).
Cursor = Annotated[
    str | None,
    Query(max_length=2048, pattern=r"^[A-Za-z0-9_-]+={0,2}$", description="a listing's `next_cursor`"),
]
