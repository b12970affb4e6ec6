"""What a team's API rate bucket (``rate_limits.py``) and its run budget (``run_budgets.py``) share: one item
per team in the control table, ``("<kind>#<team>", "<kind>")``, moved only by conditional UpdateItems with no
read before them. A failed condition is a normal outcome: DynamoDB hands back the item as it is
(``ReturnValuesOnConditionCheckFailure``), which tells the caller which write to make next, if any.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from botocore.exceptions import ClientError

from duetime.adapters.dynamodb.codec import Item, string_attribute
from duetime.adapters.dynamodb.conditional import lost_race
from duetime.adapters.dynamodb.conditions import Condition

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient


def counter_key(kind: str, team_id: str) -> Item:
    return {"pk": string_attribute(f"{kind}#{team_id}"), "sk": string_attribute(kind)}


class TeamCounter:
    """A kind of per-team item in the control table (``kind``), and the guess this process keeps of each
    team's last value (``_seen``: which write to try first)."""

    kind = ""

    def __init__(self, client: DynamoDBClient, control_table: str) -> None:
        self.client = client
        self.table = control_table
        self._seen: dict[str, int] = {}

    def update(
        self, team_id: str, update: str, condition: Condition, names: dict[str, str], values: Item
    ) -> tuple[bool, Item]:
        """One conditional UpdateItem of the team's item: (True, the item after it) when ``condition`` held,
        else (False, the item as it is; empty when there is none)."""
        try:
            response = self.client.update_item(
                TableName=self.table,
                Key=counter_key(self.kind, team_id),
                UpdateExpression=update,
                ConditionExpression=condition.expression,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if not lost_race(exc):
                raise
            return False, cast(Item, exc.response.get("Item") or {})
        return True, response["Attributes"]
