"""A deployed stack's alarms as CloudWatch evaluates them (``duetime system alarms --stack``): the stack's
``AWS::CloudWatch::Alarm`` resources (CloudFormation ListStackResources: exactly its own, whatever their
generated names) and their states (CloudWatch DescribeAlarms, 100 names a call)."""

from __future__ import annotations

import json
import re
from typing import Any

import boto3

from duetime.domain.alarms import AlarmReading, AlarmState

DESCRIBE_ALARMS_NAMES_MAX = 100  # CloudWatch DescribeAlarms: AlarmNames, at most 100 items
_CONSTRUCT_AND_HASH = re.compile(r"^Observability|[0-9A-F]{8}$")


def stack_alarm_readings(cloudformation: Any, cloudwatch: Any | None, stack: str) -> list[AlarmReading]:
    """Each alarm of ``stack``: its state (OK, ALARM, INSUFFICIENT_DATA), the latest value CloudWatch
    evaluated (when its state reason says one), since when, and its description. ``cloudwatch``: None, a
    client made here."""
    cloudwatch = cloudwatch or boto3.client("cloudwatch")
    logical_ids = {
        resource["PhysicalResourceId"]: resource["LogicalResourceId"]
        for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack)
        for resource in page["StackResourceSummaries"]
        if resource["ResourceType"] == "AWS::CloudWatch::Alarm" and resource.get("PhysicalResourceId")
    }
    names = list(logical_ids)
    readings: list[AlarmReading] = []
    for i in range(0, len(names), DESCRIBE_ALARMS_NAMES_MAX):
        found = cloudwatch.describe_alarms(AlarmNames=names[i : i + DESCRIBE_ALARMS_NAMES_MAX])
        for alarm in found.get("MetricAlarms", []):
            readings.append(
                AlarmReading(
                    name=alarm_short_name(logical_ids.get(alarm["AlarmName"], alarm["AlarmName"])),
                    state=AlarmState(alarm["StateValue"]),
                    value=_latest_value(alarm.get("StateReasonData")),
                    since=alarm.get("StateUpdatedTimestamp"),
                    description=alarm.get("AlarmDescription", ""),
                    cloudwatch_name=alarm["AlarmName"],
                )
            )
    return sorted(readings, key=lambda r: r.name)


def alarm_short_name(logical_id: str) -> str:
    """The alarm's name as the runbooks give it (``EngineHeartbeat``), from its logical id in the template
    (``ObservabilityEngineHeartbeat1A2B3C4D``: the construct's path and CDK's hash of it)."""
    return _CONSTRUCT_AND_HASH.sub("", logical_id) or logical_id


def _latest_value(reason_data: str | None) -> float | None:
    """The newest of ``recentDatapoints`` in an alarm's ``StateReasonData`` (JSON), if it has any."""
    if not reason_data:
        return None
    points = json.loads(reason_data).get("recentDatapoints") or []
    return float(points[-1]) if points else None
