"""The tables a deployed stack made, from its CloudFormation outputs (``JobsTable``, ``RunsTable``,
``ControlTable``): how an operator's command finds an installation by its stack's name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from duetime.adapters.dynamodb.tables import TableNames

if TYPE_CHECKING:
    from mypy_boto3_cloudformation.client import CloudFormationClient


def stack_tables(cloudformation: CloudFormationClient, stack: str) -> TableNames | None:
    """The stack's tables; None when no such stack exists (a first deploy)."""
    try:
        stacks = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    except ClientError as exc:
        if "does not exist" in str(exc):
            return None
        raise
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
    try:
        return TableNames(outputs["JobsTable"], outputs["RunsTable"], outputs["ControlTable"])
    except KeyError as exc:
        raise ValueError(f"stack {stack} has no output {exc.args[0]}: is it duetime's?") from exc
