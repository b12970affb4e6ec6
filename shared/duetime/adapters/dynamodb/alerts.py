"""Alerts kept in the control table, for local mode to show."""

from __future__ import annotations

import json
from typing import Any

from duetime.adapters.dynamodb.codec import string_attribute
from duetime.adapters.dynamodb.store_part import StorePart
from duetime.domain.timeutil import iso_z
from duetime.ports import Alert


class DynamoAlerts(StorePart):
    """Alerts kept in the store (local mode; mixed into ``DynamoStore``)."""

    def store_alert(self, alert: Alert) -> None:
        self.client.put_item(
            TableName=self.names.control,
            Item={
                "pk": string_attribute(f"alerts#{alert.team}"),
                "sk": string_attribute(f"{iso_z(alert.at)}#{alert.run_id}#{alert.attempt}#{alert.kind}"),
                "alert": string_attribute(json.dumps({**alert.__dict__, "at": iso_z(alert.at)})),
            },
        )

    def list_alerts(self, team: str) -> list[dict[str, Any]]:
        response = self.client.query(
            TableName=self.names.control,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": string_attribute(f"alerts#{team}")},
            ConsistentRead=True,
        )
        return [json.loads(item["alert"]["S"]) for item in response.get("Items", [])]
