"""The worker alias's provisioned concurrency and its SQS event source's provisioned mode, set with Lambda's
API (``duetime.scheduling.prescale``'s hands)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from duetime.ports.capacity import SQS_MAX_MINIMUM_POLLERS, SQS_MIN_POLLERS

if TYPE_CHECKING:
    from mypy_boto3_lambda.client import LambdaClient
    from mypy_boto3_lambda.type_defs import ProvisionedPollerConfigTypeDef, ScalingConfigTypeDef


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

    def __init__(self, client: LambdaClient, alias_arn: str) -> None:
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


class LambdaEventPollers:
    """Implements ``duetime.ports.ProvisionedEventPollers`` for the worker's SQS event source mapping (by its
    UUID): Get/UpdateEventSourceMapping.

    * **on**: ``ProvisionedPollerConfig={"MinimumPollers": n, "MaximumPollers": max(n, max_pollers)}`` and
      ``ScalingConfig={}``, which removes MaximumConcurrency ("To remove the configuration, pass an empty
      value", ScalingConfig in the Lambda API reference): AWS takes one or the other, never both.
    * **off**: ``ProvisionedPollerConfig={}`` (how the Lambda guide turns provisioned mode off, "return to
      default (on-demand) mode") and ``ScalingConfig={"MaximumConcurrency": max_concurrency}`` in the same
      call: the standard mode's cap (the stack's ``worker_max_concurrency``) is put back. Whether AWS takes
      both in one call is not documented; LocalStack 2026.3 does (tests/integration/test_event_pollers.py).
    * **read**: provisioned when Get returns a non-empty ``ProvisionedPollerConfig`` (LocalStack returns
      ``{}`` once it is off; AWS's default MinimumPollers for SQS is 2).

    The update returns at once with the mapping ``Updating``; AWS does not document how long the pollers
    take to come up, hence the prescaler's 5-10 minutes ahead.

    Sources:
    * "Configuring scaling behavior for SQS event source mappings" (AWS Lambda Developer Guide),
      https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html: up to 10 concurrent invokes a
      poller, up to 1,000 concurrency added a minute, maximum concurrency and provisioned mode exclusive.
    * "Apache Kafka event poller scaling modes in Lambda" (AWS Lambda Developer Guide),
      https://docs.aws.amazon.com/lambda/latest/dg/kafka-scaling-modes.html: ``--provisioned-poller-config
      '{}'`` disables provisioned mode (the only page that says how; the SQS pages do not).
    * "ProvisionedPollerConfig" and "ScalingConfig" (AWS Lambda API Reference),
      https://docs.aws.amazon.com/lambda/latest/api/API_ProvisionedPollerConfig.html,
      https://docs.aws.amazon.com/lambda/latest/api/API_ScalingConfig.html: SQS MinimumPollers 2-200
      (default 2), MaximumPollers default 200.
    """

    def __init__(
        self, client: LambdaClient, mapping_uuid: str, max_pollers: int, max_concurrency: int | None
    ) -> None:
        if not mapping_uuid:
            raise ValueError("switching the provisioned mode needs the worker's event source mapping UUID")
        if max_pollers < SQS_MIN_POLLERS:
            raise ValueError(f"max_pollers must be {SQS_MIN_POLLERS} or more, not {max_pollers}")
        self.client = client
        self.uuid = mapping_uuid
        self.max_pollers = max_pollers
        self.max_concurrency = max_concurrency

    def minimum_pollers(self) -> int:
        mapping = self.client.get_event_source_mapping(UUID=self.uuid)
        config = mapping.get("ProvisionedPollerConfig") or {}
        return int(config.get("MinimumPollers", SQS_MIN_POLLERS)) if config else 0

    def provision_pollers(self, minimum: int) -> None:
        if minimum and not SQS_MIN_POLLERS <= minimum <= SQS_MAX_MINIMUM_POLLERS:
            raise ValueError(
                f"an SQS event source takes 0 (standard mode) or {SQS_MIN_POLLERS}-{SQS_MAX_MINIMUM_POLLERS} "
                f"minimum pollers, not {minimum}"
            )
        if minimum:
            pollers: ProvisionedPollerConfigTypeDef = {
                "MinimumPollers": minimum,
                "MaximumPollers": max(minimum, self.max_pollers),
            }
            self.client.update_event_source_mapping(
                UUID=self.uuid, ProvisionedPollerConfig=pollers, ScalingConfig={}
            )
            return
        cap: ScalingConfigTypeDef = (
            {"MaximumConcurrency": self.max_concurrency} if self.max_concurrency else {}
        )
        self.client.update_event_source_mapping(UUID=self.uuid, ProvisionedPollerConfig={}, ScalingConfig=cap)
