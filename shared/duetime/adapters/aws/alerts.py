"""Where alerts about dead and failed runs go: SNS on AWS; the store (and the log) locally."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from duetime.adapters.dynamodb.store import DynamoStore
from duetime.domain.timeutil import iso_z
from duetime.ports import Alert

if TYPE_CHECKING:
    from mypy_boto3_sns.client import SNSClient

log = logging.getLogger(__name__)


def _payload(alert: Alert) -> dict[str, Any]:
    return {**alert.__dict__, "at": iso_z(alert.at)}


class SnsAlerts:
    def __init__(self, client: SNSClient, topic_arn: str) -> None:
        self.client = client
        self.topic_arn = topic_arn

    def publish(self, alert: Alert) -> None:
        self.client.publish(
            TopicArn=self.topic_arn,
            Subject=f"duetime: {alert.kind} {alert.run_id}"[:100],
            Message=json.dumps(_payload(alert)),
            MessageAttributes={
                "kind": {"DataType": "String", "StringValue": alert.kind},
                "team": {"DataType": "String", "StringValue": alert.team},
            },
        )


class StoredAlerts:
    """Local mode: alerts are logged and kept in the control table (``DynamoStore.list_alerts``)."""

    def __init__(self, store: DynamoStore) -> None:
        self.store = store

    def publish(self, alert: Alert) -> None:
        log.error("duetime alert", extra=_payload(alert))
        self.store.store_alert(alert)
