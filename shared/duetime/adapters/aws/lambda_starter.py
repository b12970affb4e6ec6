"""Starting a partition group's poller from the API (``duetime.scheduling.wake``): an asynchronous Invoke of
the poller function with the group's tick, marked as a wake."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_lambda.client import LambdaClient


def wake_event(group: str, run_seconds: float) -> dict[str, Any]:
    """The poller's event for a woken group: its rule's input, plus ``wake``."""
    return {"partitions": group, "run_seconds": run_seconds, "wake": True}


class LambdaPollerStarter:
    """Implements ``duetime.scheduling.wake.PollerStarter`` with Lambda's ``Invoke``
    (``InvocationType=Event``)."""

    def __init__(self, client: LambdaClient, function_name: str, run_seconds: float) -> None:
        self.client = client
        self.function_name = function_name
        self.run_seconds = run_seconds

    def start(self, group: str) -> None:
        payload = json.dumps(wake_event(group, self.run_seconds)).encode()
        self.client.invoke(FunctionName=self.function_name, InvocationType="Event", Payload=payload)
