"""Reads shared by the scheduling store and the API catalog: one item by key, and many by BatchGetItem."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from duetime.adapters.dynamodb.codec import Item, item_to_job, item_to_run, run_key, string_attribute
from duetime.adapters.dynamodb.tables import TableNames
from duetime.adapters.retrying import UNPROCESSED, Sleep, resend
from duetime.domain.models import Job, Run, Team
from duetime.domain.stored_format import STORED

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient


def team_key(team_id: str) -> Item:
    return {"pk": string_attribute(f"team#{team_id}"), "sk": string_attribute("team")}


def read_job(client: DynamoDBClient, names: TableNames, job_id: str) -> Job | None:
    item = client.get_item(
        TableName=names.jobs, Key={"job_id": string_attribute(job_id)}, ConsistentRead=True
    ).get("Item")
    return item_to_job(item) if item else None


def read_run(client: DynamoDBClient, names: TableNames, run_id: str) -> Run | None:
    try:
        key = run_key(run_id)
    except ValueError:
        return None  # not a run id: no such run
    item = client.get_item(TableName=names.runs, Key=key, ConsistentRead=True).get("Item")
    return item_to_run(item) if item else None


def read_team(client: DynamoDBClient, names: TableNames, team_id: str) -> Team | None:
    item = client.get_item(TableName=names.control, Key=team_key(team_id)).get("Item")
    return Team.model_validate_json(item["team"]["S"], context=STORED) if item else None


def batch_get(
    client: DynamoDBClient,
    table: str,
    keys: Sequence[Item],
    consistent: bool = False,
    attributes: Sequence[str] = (),
    sleep: Sleep = time.sleep,
) -> list[Item]:
    """Every item found for ``keys`` (only ``attributes`` of each when given), 100 keys per BatchGetItem,
    sending what DynamoDB left unprocessed again after a backoff (``UNPROCESSED``) until none is left."""
    found: list[Item] = []

    def send(request: dict[str, Any]) -> dict[str, Any]:
        response = client.batch_get_item(RequestItems=request)
        found.extend(response.get("Responses", {}).get(table, []))
        return response.get("UnprocessedKeys") or {}

    for start in range(0, len(keys), 100):
        read: dict[str, Any] = {"Keys": list(keys[start : start + 100]), "ConsistentRead": consistent}
        if attributes:
            read["ProjectionExpression"] = ", ".join(f"#a{i}" for i in range(len(attributes)))
            read["ExpressionAttributeNames"] = {f"#a{i}": name for i, name in enumerate(attributes)}
        resend(send, {table: read}, UNPROCESSED, sleep=sleep)
    return found
