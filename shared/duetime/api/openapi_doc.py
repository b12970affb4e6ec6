"""The API's OpenAPI document, generated from the routes' declarations."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer, Tag

from duetime import __version__

TAGS = {
    "jobs": "A team's jobs: create, read, change, pause, delete; their previews, history and load",
    "runs": "A job's runs: trigger, backfill, list, retry, cancel",
    "calendars": "A team's calendars: named days its jobs exclude or count business days by",
    "team": "The caller's team and the IAM role its AWS targets are called under",
    "tokens": "The team's API tokens",
    "meta": "Health and this document (no token needed)",
}


# powertools' own validation-error shapes: duetime answers every error with ErrorOut instead
_UNUSED_DEFAULT_SCHEMAS = ("HTTPValidationError", "ResponseValidationError", "ValidationError")


def openapi_document(resolver: Any) -> str:
    """The API's OpenAPI document (served at /v1/openapi.json, kept in docs/openapi.json: ``python -m
    duetime.api.openapi_file``): every operation with a readable ``operationId`` and a tag, every error an
    ``ErrorOut``."""
    text = resolver.get_openapi_json_schema(
        title="duetime",
        version=__version__,
        description="A distributed job scheduler: jobs (cron in a time zone, rate, or one time) that call "
        "HTTP targets or AWS services (Lambda, SQS, SNS, EventBridge, Step Functions), at least once, with "
        "the run id as idempotency key.",
        tags=[Tag(name=name, description=description) for name, description in TAGS.items()],
        security_schemes={"bearerAuth": HTTPBearer()},
    )
    document = json.loads(text)
    schemas = document.get("components", {}).get("schemas", {})
    for name in _UNUSED_DEFAULT_SCHEMAS:  # in this order: each refers only to the ones after it
        if f'"#/components/schemas/{name}"' not in json.dumps(document):
            schemas.pop(name, None)
    return json.dumps(document, indent=2)
