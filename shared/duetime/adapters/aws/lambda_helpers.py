"""Starting a busy minute's helpers (``duetime.scheduling.fan_out``): an asynchronous Invoke of the helper
function."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from duetime.ports.functions import HelperAssignment

if TYPE_CHECKING:
    from mypy_boto3_lambda.client import LambdaClient


class LambdaHelperLauncher:
    """Implements ``duetime.scheduling.fan_out.HelperLauncher``: one ``InvocationType=Event`` invoke of the
    helper function per assignment, its event ``{"helper": <assignment>}``
    (``duetime.scheduling.events.PollerTick``). Lambda queues the event and retries a failed invocation twice;
    a refused invoke raises here."""

    def __init__(self, client: LambdaClient, function_name: str) -> None:
        self.client = client
        self.function_name = function_name

    def launch(self, assignment: HelperAssignment) -> None:
        payload = json.dumps({"helper": assignment.model_dump(mode="json")}).encode()
        self.client.invoke(FunctionName=self.function_name, InvocationType="Event", Payload=payload)
