"""The prescaler's hands on the worker's event source (``LambdaEventPollers``) against LocalStack's Lambda:
UpdateEventSourceMapping switches an SQS mapping created as the stack creates it (standard mode, capped by
MaximumConcurrency) to provisioned mode and back, and GetEventSourceMapping says which it is in.

The tests LocalStack (``AWS_ENDPOINT_URL_SQS``) runs no Lambda, so this uses the deployed-stack LocalStack
(``DUETIME_DEPLOYED_PORT``, default 4610) as ``test_lambda_executor`` does: reused when it answers, started
and stopped here otherwise.

What LocalStack 2026.3 does, seen here: it stores what it is given and answers it back. On:
``ProvisionedPollerConfig`` as set, ``ScalingConfig`` ``{}`` once emptied (it would also keep a
MaximumConcurrency beside provisioned mode, which AWS refuses: the adapter empties it). Off
(``ProvisionedPollerConfig={}``): ``ProvisionedPollerConfig`` ``{}`` (not absent) and the MaximumConcurrency
put back. The mapping is ``Updating`` in the Update's answer and ``Enabled`` again within a second. It
polls the same either way: the pollers' count and ramp are AWS's alone, and not tested here.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from duetime.adapters.aws.lambda_provisioning import LambdaEventPollers

# The deployed LocalStack's fixtures, imported to be used here (so their parameters below shadow them).
from .test_lambda_executor import ON_THE_DEPLOYED_PORT, DeployedLocalStack, _wait_for, deployed, function  # noqa: F401

pytestmark = [pytest.mark.integration, ON_THE_DEPLOYED_PORT]


@pytest.fixture
def worker_mapping(
    deployed: DeployedLocalStack,  # noqa: F811
    function: Callable[..., str],  # noqa: F811
) -> Iterator[tuple[Any, str]]:
    """The stack's worker event source in miniature: an SQS queue feeding a function's alias ``live``,
    batches of 10, partial batch failures, MaximumConcurrency 100. (Lambda client, mapping UUID.)"""
    name = function()
    sqs, lam = deployed.client("sqs"), deployed.client("lambda")
    queue = sqs.create_queue(QueueName=f"{name}-runs-{uuid.uuid4().hex[:6]}")["QueueUrl"]
    attributes = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]
    queue_arn = attributes["QueueArn"]
    version = lam.publish_version(FunctionName=name)["Version"]
    lam.create_alias(FunctionName=name, Name="live", FunctionVersion=version)
    mapping = lam.create_event_source_mapping(
        EventSourceArn=queue_arn,
        FunctionName=f"{name}:live",
        BatchSize=10,
        FunctionResponseTypes=["ReportBatchItemFailures"],
        ScalingConfig={"MaximumConcurrency": 100},
    )["UUID"]
    enabled(lam, mapping)
    yield lam, mapping
    lam.delete_event_source_mapping(UUID=mapping)
    sqs.delete_queue(QueueUrl=queue)


def enabled(lam: Any, mapping: str) -> dict[str, Any]:
    """The mapping once it is ``Enabled`` again (after a create or an update)."""
    found: dict[str, Any] = _wait_for(
        lambda: (m := lam.get_event_source_mapping(UUID=mapping))["State"] == "Enabled" and m,
        10,
        f"event source mapping {mapping} Enabled",
    )
    return found


def test_the_worker_event_source_goes_provisioned_and_back_to_standard_with_its_maximum_concurrency(
    worker_mapping: tuple[Any, str],
) -> None:
    lam, mapping = worker_mapping
    pollers = LambdaEventPollers(lam, mapping, max_pollers=200, max_concurrency=100)
    created = lam.get_event_source_mapping(UUID=mapping)
    assert created["ScalingConfig"] == {"MaximumConcurrency": 100}
    assert not created.get("ProvisionedPollerConfig")
    assert pollers.minimum_pollers() == 0  # standard mode, as the stack creates it

    pollers.provision_pollers(31)  # the seed's midnight
    on = enabled(lam, mapping)

    assert on["ProvisionedPollerConfig"] == {"MinimumPollers": 31, "MaximumPollers": 200}
    assert not on.get("ScalingConfig", {}).get("MaximumConcurrency")  # AWS takes one or the other
    assert pollers.minimum_pollers() == 31

    pollers.provision_pollers(0)  # the queue has drained
    off = enabled(lam, mapping)

    assert not off.get("ProvisionedPollerConfig")  # LocalStack answers {}
    assert off["ScalingConfig"] == {"MaximumConcurrency": 100}  # the standard mode's cap, restored
    assert pollers.minimum_pollers() == 0
    assert (off["BatchSize"], off["FunctionResponseTypes"]) == (10, ["ReportBatchItemFailures"])
