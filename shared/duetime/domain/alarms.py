"""The reconciler's alarms as data: one list (``RECONCILER_ALARMS``) that the CDK app turns into CloudWatch
alarms (``infra/cdk/duetime_cdk/observability.py``) and that ``duetime system alarms --local`` evaluates over
the reconciler's recorded reports (``evaluate``), where no CloudWatch evaluates them.

How CloudWatch evaluates an alarm (AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html, "Evaluating
an alarm" and "Configuring how CloudWatch alarms treat missing data"): of the last ``evaluation_periods``
periods, ``datapoints_to_alarm`` breaching ones put it in ALARM; a period with no data point counts as
breaching under ``treatMissingData: breaching``, and as good under ``notBreaching``. ``evaluate`` follows
that, one period a minute, the period's value being the report recorded in it."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

RECONCILER_SERVICE = "reconciler"  # the metrics' ``service`` dimension
MISSED_FIRES = "MissedFires"
OLDEST_UNCLAIMED_DUE = "OldestUnclaimedDueSeconds"
OLDEST_QUEUED = "OldestQueuedSeconds"
RECONCILIATIONS = "Reconciliations"  # 1 per reconciler tick: the engine's heartbeat
PERIOD = timedelta(minutes=1)


class Missing(StrEnum):
    """CloudWatch's TreatMissingData values this project uses."""

    BREACHING = "breaching"
    NOT_BREACHING = "notBreaching"


class Comparison(StrEnum):
    GREATER = "GreaterThanThreshold"
    LESS = "LessThanThreshold"


_COMPARE: dict[Comparison, Callable[[float, float], bool]] = {
    Comparison.GREATER: operator.gt,
    Comparison.LESS: operator.lt,
}


@dataclass(frozen=True)
class AlarmDefinition:
    """One alarm on a metric the reconciler publishes (namespace ``duetime``, dimensions ``service`` =
    ``reconciler`` and ``installation``), per one-minute period."""

    name: str
    metric: str
    statistic: str  # "Maximum" or "Sum"
    comparison: Comparison
    threshold: float
    evaluation_periods: int
    datapoints_to_alarm: int
    missing: Missing
    description: str

    def breaches(self, value: float) -> bool:
        return _COMPARE[self.comparison](value, self.threshold)


RECONCILER_ALARMS: tuple[AlarmDefinition, ...] = (
    AlarmDefinition(
        name="MissedFires",
        metric=MISSED_FIRES,
        statistic="Maximum",
        comparison=Comparison.GREATER,
        threshold=0,
        evaluation_periods=1,
        datapoints_to_alarm=1,
        # The reconciler publishes the figure every tick (0 included): a missing minute is the reconciler's
        # own absence, which the heartbeat alarm reports; counting it here too would page twice.
        missing=Missing.NOT_BREACHING,
        description="due times passed their catch-up window without a run: pollers are not claiming",
    ),
    AlarmDefinition(
        name="OldestUnclaimedDue",
        metric=OLDEST_UNCLAIMED_DUE,
        statistic="Maximum",
        comparison=Comparison.GREATER,
        threshold=120,
        evaluation_periods=2,
        datapoints_to_alarm=2,
        missing=Missing.NOT_BREACHING,  # as MissedFires: the heartbeat alarm owns the reconciler's absence
        description="a due job has waited over 2 minutes unclaimed: pollers are stopped or behind",
    ),
    AlarmDefinition(
        name="OldestQueued",
        metric=OLDEST_QUEUED,
        statistic="Maximum",
        comparison=Comparison.GREATER,
        threshold=180,
        evaluation_periods=2,
        datapoints_to_alarm=2,
        missing=Missing.NOT_BREACHING,  # as MissedFires: the heartbeat alarm owns the reconciler's absence
        description="a claimed run has waited over 3 minutes for a worker: workers are not starting runs",
    ),
    AlarmDefinition(
        name="EngineHeartbeat",
        metric=RECONCILIATIONS,
        statistic="Sum",
        comparison=Comparison.LESS,
        threshold=1,
        evaluation_periods=3,
        datapoints_to_alarm=3,
        # Absence is the failure here: no report in 3 minutes means the reconciler (and with it every other
        # alarm above) is blind, so a missing minute breaches.
        missing=Missing.BREACHING,
        description="the reconciler has not reported for 3 minutes: nothing watches the schedule",
    ),
)


class AlarmState(StrEnum):
    OK = "OK"
    ALARM = "ALARM"
    INSUFFICIENT_DATA = "INSUFFICIENT_DATA"  # CloudWatch's, before an alarm has data; never local


@dataclass(frozen=True)
class Sample:
    """A reconciler report as the alarms read it: when, and its figures by metric name."""

    at: datetime
    values: dict[str, float]


@dataclass(frozen=True)
class AlarmReading:
    """An alarm's state at ``now``: the last period's value (None: no data point) and since when the alarm
    has been in this state, as far as the reports kept show (None: longer than they go back)."""

    name: str
    state: AlarmState
    value: float | None
    since: datetime | None
    description: str
    cloudwatch_name: str | None = None  # the alarm's name in CloudWatch (a deployed stack's; None locally)


def _period_values(
    samples: Sequence[Sample], metric: str, statistic: str, end: datetime, n: int
) -> list[float | None]:
    """The statistic of ``metric`` in each of the ``n`` one-minute periods ending at ``end``, oldest first
    (None: no report in that period). ``Sum`` adds the reports of a period, ``Maximum`` keeps the largest."""
    values: list[float | None] = []
    for k in range(n, 0, -1):
        start, stop = end - k * PERIOD, end - (k - 1) * PERIOD
        inside = [s.values[metric] for s in samples if start < s.at <= stop and metric in s.values]
        if not inside:
            values.append(None)
        else:
            values.append(sum(inside) if statistic == "Sum" else max(inside))
    return values


def _state_at(
    definition: AlarmDefinition, samples: Sequence[Sample], end: datetime
) -> tuple[AlarmState, float | None]:
    values = _period_values(
        samples, definition.metric, definition.statistic, end, definition.evaluation_periods
    )
    if definition.statistic == "Sum" and definition.missing is Missing.BREACHING:
        # A heartbeat counts reports: a period without one is 0 reports, which is what breaches.
        values = [0.0 if v is None else v for v in values]
    breaching = sum(
        1
        for v in values
        if (definition.missing is Missing.BREACHING if v is None else definition.breaches(v))
    )
    state = AlarmState.ALARM if breaching >= definition.datapoints_to_alarm else AlarmState.OK
    return state, values[-1]


def evaluate(
    definitions: Sequence[AlarmDefinition], samples: Sequence[Sample], now: datetime, history: int = 15
) -> list[AlarmReading]:
    """Each alarm's state at ``now`` over ``samples`` (the reconciler's reports, any order), and since when:
    the state is evaluated again at each of the ``history`` minutes before, and ``since`` is the first
    minute of the latest run of the same state (None when that run reaches past them)."""
    readings: list[AlarmReading] = []
    for definition in definitions:
        state, value = _state_at(definition, samples, now)
        since: datetime | None = now
        for k in range(1, history + 1):
            earlier, _ = _state_at(definition, samples, now - k * PERIOD)
            if earlier is not state:
                break
            since = now - k * PERIOD
        else:
            since = None
        readings.append(AlarmReading(definition.name, state, value, since, definition.description))
    return readings
