"""The reconciler's alarms evaluated over its reports as CloudWatch evaluates them: M of N one-minute
periods, missing data breaching only where absence is the failure (the heartbeat)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from duetime.adapters.aws.cloudwatch_alarms import alarm_short_name, stack_alarm_readings
from duetime.domain.alarms import (
    MISSED_FIRES,
    OLDEST_QUEUED,
    OLDEST_UNCLAIMED_DUE,
    RECONCILER_ALARMS,
    RECONCILIATIONS,
    AlarmState,
    Missing,
    Sample,
    evaluate,
)

T0 = datetime(2026, 12, 1, 10, 0, 30, tzinfo=UTC)


def report(minute: int, unclaimed: float = 0, missed: float = 0, queued: float = 0) -> Sample:
    values = {
        MISSED_FIRES: missed,
        OLDEST_UNCLAIMED_DUE: unclaimed,
        OLDEST_QUEUED: queued,
        RECONCILIATIONS: 1,
    }
    return Sample(T0 + timedelta(minutes=minute), values)


def states(samples: list[Sample], now_minute: float) -> dict[str, AlarmState]:
    now = T0 + timedelta(minutes=now_minute)
    return {r.name: r.state for r in evaluate(RECONCILER_ALARMS, samples, now)}


def test_healthy_reports_every_minute_leave_every_alarm_ok() -> None:
    samples = [report(m) for m in range(10)]
    assert set(states(samples, 9.5).values()) == {AlarmState.OK}


def test_a_due_job_waiting_unclaimed_fires_after_two_breaching_minutes_and_clears_after() -> None:
    samples = [report(m) for m in range(5)] + [report(5, unclaimed=150, missed=3), report(6, unclaimed=210)]
    assert states(samples[:6], 5.5)["OldestUnclaimedDue"] is AlarmState.OK  # one breaching minute of 2
    assert states(samples[:6], 5.5)["MissedFires"] is AlarmState.ALARM  # any missed fire
    assert states(samples, 6.5)["OldestUnclaimedDue"] is AlarmState.ALARM
    assert states(samples, 6.5)["MissedFires"] is AlarmState.OK  # the minute after counted none
    cleared = [*samples, report(7)]
    assert states(cleared, 7.5)["OldestUnclaimedDue"] is AlarmState.OK


def test_the_heartbeat_fires_when_reports_stop_and_clears_when_they_resume() -> None:
    samples = [report(m) for m in range(5)]
    assert states(samples, 5.5)["EngineHeartbeat"] is AlarmState.OK  # 1 minute without: not yet
    assert states(samples, 7.5)["EngineHeartbeat"] is AlarmState.ALARM  # 3 minutes without a report
    (heartbeat,) = [
        r
        for r in evaluate(RECONCILER_ALARMS, samples, T0 + timedelta(minutes=7.5))
        if r.name == "EngineHeartbeat"
    ]
    assert heartbeat.value == 0 and heartbeat.since == T0 + timedelta(minutes=7.5)
    resumed = [*samples, report(8), report(9), report(10)]
    assert states(resumed, 10.5)["EngineHeartbeat"] is AlarmState.OK


def test_the_other_alarms_stay_ok_when_reports_stop_the_heartbeat_owns_absence() -> None:
    samples = [report(m, unclaimed=500) for m in range(3)]  # breaching, then silence
    later = states(samples, 9.5)
    assert later["OldestUnclaimedDue"] is AlarmState.OK and later["EngineHeartbeat"] is AlarmState.ALARM


def test_since_is_the_first_minute_of_the_current_state() -> None:
    samples = [report(m) for m in range(3)] + [report(m, queued=400) for m in range(3, 8)]
    (queued,) = [
        r
        for r in evaluate(RECONCILER_ALARMS, samples, T0 + timedelta(minutes=7.5))
        if r.name == "OldestQueued"
    ]
    assert queued.state is AlarmState.ALARM and queued.value == 400
    assert queued.since == T0 + timedelta(minutes=4.5)  # minutes 3 and 4 breaching: ALARM from 4


def test_only_the_heartbeat_treats_missing_data_as_breaching() -> None:
    assert {d.name for d in RECONCILER_ALARMS if d.missing is Missing.BREACHING} == {"EngineHeartbeat"}


class _Stack:
    """CloudFormation's ListStackResources of a stack with two alarms (and a function)."""

    def get_paginator(self, _: str) -> Any:
        return self

    def paginate(self, StackName: str) -> list[dict[str, Any]]:
        return [
            {
                "StackResourceSummaries": [
                    {
                        "ResourceType": "AWS::CloudWatch::Alarm",
                        "LogicalResourceId": "ObservabilityEngineHeartbeat5D1F3A2B",
                        "PhysicalResourceId": f"{StackName}-ObservabilityEngineHe-1XYZ",
                    },
                    {
                        "ResourceType": "AWS::CloudWatch::Alarm",
                        "LogicalResourceId": "ObservabilityApiErrors2C0FFEE12",
                        "PhysicalResourceId": f"{StackName}-ObservabilityApiError-2XYZ",
                    },
                    {
                        "ResourceType": "AWS::Lambda::Function",
                        "LogicalResourceId": "Worker",
                        "PhysicalResourceId": "f",
                    },
                ]
            }
        ]


class _CloudWatch:
    def describe_alarms(self, AlarmNames: list[str]) -> dict[str, Any]:
        return {
            "MetricAlarms": [
                {
                    "AlarmName": name,
                    "StateValue": "ALARM" if "Engine" in name else "OK",
                    "StateReasonData": '{"recentDatapoints": [0.0]}',
                    "AlarmDescription": "d",
                }
                for name in AlarmNames
            ]
        }


def test_a_stacks_alarms_are_named_as_the_runbooks_name_them_beside_cloudwatchs_generated_names() -> None:
    readings = stack_alarm_readings(_Stack(), _CloudWatch(), "Duetime")
    assert [(r.name, r.state.value, r.cloudwatch_name) for r in readings] == [
        ("ApiErrors2", "OK", "Duetime-ObservabilityApiError-2XYZ"),
        ("EngineHeartbeat", "ALARM", "Duetime-ObservabilityEngineHe-1XYZ"),
    ]
    assert alarm_short_name("ObservabilityDynamoDbThrottlesJobsTable0A1B2C3D") == "DynamoDbThrottlesJobsTable"
