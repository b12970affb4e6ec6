"""Warming the worker Lambda: an asynchronous Invoke of its alias with the warm-up event."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from duetime.ports.functions import WARMUP_EVENT

if TYPE_CHECKING:
    from mypy_boto3_lambda.client import LambdaClient


class LambdaWorkerWarmer:
    """Implements ``duetime.scheduling.warmup.WorkerWarmer`` for the worker function (its ``live`` alias: the
    one the SQS event source invokes, so the environment warmed is one the batches can use)."""

    def __init__(self, client: LambdaClient, function_arn: str) -> None:
        self.client = client
        self.function_arn = function_arn

    def warm(self) -> None:
        self.client.invoke(
            FunctionName=self.function_arn, InvocationType="Event", Payload=json.dumps(WARMUP_EVENT).encode()
        )
