"""The worker alias's provisioned concurrency, set with Lambda's API (``duetime.prescale``'s hands)."""

from __future__ import annotations

import contextlib
from typing import Any


def split_qualified_arn(arn: str) -> tuple[str, str]:
    """``arn:aws:lambda:<region>:<account>:function:<name>:<alias>`` -> (the function's ARN, the alias).
    Provisioned concurrency is set on a version or an alias, never on ``$LATEST``: an ARN without a
    qualifier is refused here, naming what is missing."""
    parts = arn.split(":")
    if len(parts) != 8 or parts[:3] != ["arn", parts[1], "lambda"] or parts[5] != "function" or not parts[7]:
        raise ValueError(
            f"worker_function_arn must be a Lambda alias ARN (...:function:<name>:<alias>), not {arn!r}"
        )
    return ":".join(parts[:7]), parts[7]


class LambdaProvisionedWorkers:
    """Implements ``duetime.ports.ProvisionedWorkers`` for the worker's alias (the one the SQS event source
    invokes): Get/Put/DeleteProvisionedConcurrencyConfig. 0 workers is no config at all (Put takes 1 or
    more)."""

    def __init__(self, client: Any, alias_arn: str) -> None:
        self.client = client
        self.function, self.qualifier = split_qualified_arn(alias_arn)

    def provisioned(self) -> int:
        try:
            config = self.client.get_provisioned_concurrency_config(
                FunctionName=self.function, Qualifier=self.qualifier
            )
        except self.client.exceptions.ProvisionedConcurrencyConfigNotFoundException:
            return 0
        return int(config.get("RequestedProvisionedConcurrentExecutions", 0))

    def provision(self, workers: int) -> None:
        if workers < 0:
            raise ValueError(f"provisioned workers must be 0 or more, not {workers}")
        if workers:
            self.client.put_provisioned_concurrency_config(
                FunctionName=self.function,
                Qualifier=self.qualifier,
                ProvisionedConcurrentExecutions=workers,
            )
            return
        with contextlib.suppress(self.client.exceptions.ResourceNotFoundException):  # none: already 0
            self.client.delete_provisioned_concurrency_config(
                FunctionName=self.function, Qualifier=self.qualifier
            )
