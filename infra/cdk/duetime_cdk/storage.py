"""The three DynamoDB tables, built from the same definitions the code (and DynamoDB Local) uses."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from duetime.adapters.dynamodb.tables import RUN_TTL_ATTRIBUTE, TableNames, table_definitions


def _attribute(definition: dict[str, Any], name: str) -> dynamodb.Attribute:
    kinds = {a["AttributeName"]: a["AttributeType"] for a in definition["AttributeDefinitions"]}
    kind = {"S": dynamodb.AttributeType.STRING, "N": dynamodb.AttributeType.NUMBER}[kinds[name]]
    return dynamodb.Attribute(name=name, type=kind)


def _warm(write: Mapping[str, int], read: Mapping[str, int], name: str) -> dynamodb.WarmThroughput | None:
    """``name``'s warm throughput (a table's role, or ``<role>/<index>``), or None: what a new table takes."""
    units = {"write_units_per_second": write.get(name, 0), "read_units_per_second": read.get(name, 0)}
    if not any(units.values()):
        return None
    return dynamodb.WarmThroughput(**{key: value for key, value in units.items() if value})


# Provisioned tables' auto scaling: AWS's default target, from one unit (what an idle table keeps) to the
# default table quota (what a table may take at all); each GSI inherits its table's settings.
AUTO_SCALING_TARGET_PERCENT = 70
AUTO_SCALING_MAX_UNITS = 40_000


def _billing(capacity_mode: str) -> dynamodb.Billing:
    """On demand, or provisioned with auto scaling (``duetime.scheduling.table_modes`` switches such tables
    to on demand around a forecast spike)."""
    if capacity_mode == "on_demand":
        return dynamodb.Billing.on_demand()
    scaled = dynamodb.Capacity.autoscaled(
        min_capacity=1,
        max_capacity=AUTO_SCALING_MAX_UNITS,
        target_utilization_percent=AUTO_SCALING_TARGET_PERCENT,
    )
    return dynamodb.Billing.provisioned(read_capacity=scaled, write_capacity=scaled)


class _KeyAttributes(TypedDict):
    """A table's or index's key, as TableV2 and GlobalSecondaryIndexPropsV2 take it."""

    partition_key: dynamodb.Attribute
    sort_key: NotRequired[dynamodb.Attribute]


def _keys(definition: dict[str, Any], schema: list[dict[str, str]]) -> _KeyAttributes:
    keys = _KeyAttributes(partition_key=_attribute(definition, schema[0]["AttributeName"]))
    if len(schema) > 1:
        keys["sort_key"] = _attribute(definition, schema[1]["AttributeName"])
    return keys


class Storage(Construct):
    """On-demand tables (or provisioned ones under auto scaling, ``capacity_mode``) with point-in-time
    recovery, TTL on runs, the due/reap/team/job indexes, and
    deletion protection unless the stack is a throwaway test stack; or, for the roles in ``adopt``, existing
    tables by name (restored ones: docs/guide/operations.md, "Restore"), which the stack does not manage.

    Each table and index is pre-warmed to ``warm_write_units`` / ``warm_read_units`` (names as in
    ``duetime.capacity.warm_throughput``; none for a name not given or 0): ``WarmThroughput`` on the
    ``AWS::DynamoDB::GlobalTable`` and on each of its ``GlobalSecondaryIndexes`` (CloudFormation's
    "AWS::DynamoDB::GlobalTable WarmThroughput": ReadUnitsPerSecond, WriteUnitsPerSecond, integers of at
    least 1, updated with no interruption). StackConfig empties both with ``localstack``: LocalStack's
    CloudFormation provider for AWS::DynamoDB::GlobalTable (localstack/localstack,
    services/dynamodb/resource_providers/aws_dynamodb_globaltable.py) does not read the table's
    WarmThroughput and hands each GSI's, unchecked, to its CreateTable, whose WarmThroughput support came
    only in localstack/localstack#13235 (October 2025); nothing there would be pre-warmed anyway."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        deletion_protection: bool,
        warm_write_units: Mapping[str, int] | None = None,
        warm_read_units: Mapping[str, int] | None = None,
        adopt: Mapping[str, str] | None = None,
        capacity_mode: str = "on_demand",
    ) -> None:
        super().__init__(scope, id)
        write, read = warm_write_units or {}, warm_read_units or {}
        adopt = adopt or {}
        self.tables: dict[str, dynamodb.ITableV2] = {}
        self._indexes: dict[str, set[str]] = {}
        logical = {"jobs": "Jobs", "runs": "Runs", "control": "Control"}
        for role, definition in zip(
            ("jobs", "runs", "control"), table_definitions(TableNames()), strict=True
        ):
            indexes = [
                dynamodb.GlobalSecondaryIndexPropsV2(
                    index_name=index["IndexName"],
                    projection_type=dynamodb.ProjectionType(index["Projection"]["ProjectionType"]),
                    non_key_attributes=index["Projection"].get("NonKeyAttributes"),
                    warm_throughput=_warm(write, read, f"{role}/{index['IndexName']}"),
                    **_keys(definition, index["KeySchema"]),
                )
                for index in definition.get("GlobalSecondaryIndexes", [])
            ]
            self._indexes[role] = {index.index_name for index in indexes}
            if role in adopt:  # an existing table, by name: the indexes are the same definitions' (``duetime
                # restore`` and the deploy check read them; a table without them fails there, by name)
                self.tables[role] = dynamodb.TableV2.from_table_attributes(
                    self, logical[role], table_name=adopt[role], global_indexes=sorted(self._indexes[role])
                )
                continue
            self.tables[role] = dynamodb.TableV2(
                self,
                logical[role],
                **_keys(definition, definition["KeySchema"]),
                billing=_billing(capacity_mode),
                point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                    point_in_time_recovery_enabled=True
                ),
                time_to_live_attribute=RUN_TTL_ATTRIBUTE if role in ("runs", "control") else None,
                global_secondary_indexes=indexes or None,
                deletion_protection=deletion_protection,
                warm_throughput=_warm(write, read, role),
                removal_policy=cdk.RemovalPolicy.RETAIN if deletion_protection else cdk.RemovalPolicy.DESTROY,
            )

    def table_arn(self, role: str) -> str:
        return self.tables[role].table_arn

    def indexes(self, role: str) -> list[str]:
        """The names of ``role``'s global secondary indexes."""
        return sorted(self._indexes[role])

    def index_arn(self, role: str, index: str) -> str:
        """The ARN of ``role``'s index named ``index``; an index the table does not have is an error here,
        not a statement that grants nothing."""
        if index not in self._indexes[role]:
            raise KeyError(f"the {role} table has no index {index!r} (it has {sorted(self._indexes[role])})")
        return f"{self.table_arn(role)}/index/{index}"
