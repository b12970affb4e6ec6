"""`duetime plan`'s fixed cost counts what the default stack really keeps running: its StackDefaults are
checked here against the synthesized template (pollers, memory, run length, provisioned concurrency: the
prescaler by default, the scheduled window otherwise, the dashboard, every alarm metric, the event source's
maximum concurrency)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")

import aws_cdk as cdk
from aws_cdk.assertions import Template

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "infra" / "cdk"))

from duetime_cdk.config import ContextError, StackConfig  # noqa: E402
from duetime_cdk.stack import DuetimeStack  # noqa: E402

from duetime.capacity.fixed_cost import StackDefaults  # noqa: E402

DEFAULTS = StackDefaults()


PRESCALER = "functions/prescaler/handler.handler"


def synth(**context: str) -> Template:
    app = cdk.App(context={"deletion_protection": "false", **context})
    try:
        config = StackConfig.from_context(app.node)
    except ContextError as exc:
        pytest.fail(f"{exc}\n`make lambda-assets` builds the Lambda asset", pytrace=False)
    return Template.from_stack(DuetimeStack(app, "DuetimeFixedCost", config=config))


@pytest.fixture(scope="module")
def template() -> Template:
    return synth()


@pytest.fixture(scope="module")
def scheduled() -> Template:
    """The stack with the scheduled window instead of the prescaler (``forecast_scaling=False``)."""
    return synth(scheduled_scaling="true", forecast_scaling="false")


def functions(template: Template, handler: str) -> list[dict[str, Any]]:
    found = template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": handler}})
    return [resource["Properties"] for resource in found.values()]


def rules_of(template: Template, handler: str) -> list[dict[str, Any]]:
    """The properties of the EventBridge rules whose (first) target is a function of ``handler``."""
    found = template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": handler}})
    return [
        rule["Properties"]
        for rule in template.find_resources("AWS::Events::Rule").values()
        if rule["Properties"]["Targets"][0]["Arn"].get("Fn::GetAtt", [None])[0] in found
    ]


def rate_minutes(expression: str) -> float:
    amount, unit = re.fullmatch(r"rate\((\d+) (minutes?|hours?)\)", expression).groups()  # type: ignore[union-attr]
    return float(amount) * (60 if unit.startswith("hour") else 1)


def cron_minute_of_day(expression: str) -> int:
    minute, hour = re.fullmatch(r"cron\((\d+) (\d+) .*\)", expression).groups()  # type: ignore[union-attr]
    return int(hour) * 60 + int(minute)


def test_the_pollers_are_the_groups_memory_and_run_length_the_fixed_cost_counts(template: Template) -> None:
    pollers = functions(template, "functions/poller/handler.handler")
    assert len(pollers) == DEFAULTS.poller_groups
    assert {p.get("MemorySize", 128) for p in pollers} == {DEFAULTS.poller_memory_mb}
    rules = rules_of(template, "functions/poller/handler.handler")
    assert len(rules) == DEFAULTS.poller_groups
    assert {r["ScheduleExpression"] for r in rules} == {"rate(1 minute)"}
    inputs = [r["Targets"][0]["Input"] for r in rules]
    assert all(f'"run_seconds":{DEFAULTS.poller_run_seconds:g}' in i.replace(" ", "") for i in inputs)
    # The handover the fixed cost assumes (early, or at the end of the run with a hot standby):
    hot_standby = {p["Environment"]["Variables"]["DUETIME_POLLER_HOT_STANDBY"] for p in pollers}
    assert hot_standby == {"true" if DEFAULTS.poller_hot_standby else "false"}
    rest = {p["Environment"]["Variables"]["DUETIME_POLLER_REST_WHEN_QUIET"] for p in pollers}
    assert rest == {"true" if DEFAULTS.poller_rests_when_quiet else "false"}


def test_provisioned_concurrency_is_set_by_the_prescaler_or_the_schedule_as_the_fixed_cost_assumes(
    template: Template,
) -> None:
    prescalers = functions(template, PRESCALER)
    targets = template.find_resources("AWS::ApplicationAutoScaling::ScalableTarget")
    if DEFAULTS.forecast_scaling:
        assert len(prescalers) == 1 and not targets
    else:
        assert not prescalers and len(targets) == 1


def test_the_prescaler_is_the_interval_and_memory_the_fixed_cost_counts(template: Template) -> None:
    (prescaler,) = functions(template, PRESCALER)
    assert prescaler["MemorySize"] == DEFAULTS.prescaler_memory_mb
    (rule,) = rules_of(template, PRESCALER)
    assert rate_minutes(rule["ScheduleExpression"]) == DEFAULTS.prescaler_interval_minutes
    variables = prescaler["Environment"]["Variables"]
    assert variables["DUETIME_PRESCALE_MAX_WORKERS"] == str(DEFAULTS.peak_workers)
    assert variables["DUETIME_PRESCALE_BASELINE_WORKERS"] == str(DEFAULTS.baseline_provisioned_workers)


def test_the_scheduled_window_and_the_baseline_when_forecast_scaling_is_off(scheduled: Template) -> None:
    (worker,) = functions(scheduled, "functions/worker/handler.handler")
    assert worker["MemorySize"] == DEFAULTS.worker_memory_mb
    (target,) = scheduled.find_resources("AWS::ApplicationAutoScaling::ScalableTarget").values()
    up, down = sorted(
        target["Properties"]["ScheduledActions"],
        key=lambda a: a["ScalableTargetAction"]["MinCapacity"],
        reverse=True,
    )
    assert up["ScalableTargetAction"]["MinCapacity"] == DEFAULTS.peak_workers
    assert down["ScalableTargetAction"]["MinCapacity"] == DEFAULTS.baseline_provisioned_workers
    window = (cron_minute_of_day(down["Schedule"]) - cron_minute_of_day(up["Schedule"])) % 1440
    assert window == DEFAULTS.prescale_minutes_per_day


def test_the_dashboard_and_every_alarm_metric(template: Template) -> None:
    assert len(template.find_resources("AWS::CloudWatch::Dashboard")) == DEFAULTS.dashboards
    metrics = 0
    for alarm in template.find_resources("AWS::CloudWatch::Alarm").values():
        queries = alarm["Properties"].get("Metrics")
        metrics += sum("MetricStat" in q for q in queries) if queries else 1
    assert metrics == DEFAULTS.alarm_metrics


def test_the_event_source_sets_a_maximum_concurrency(template: Template) -> None:
    # With a maximum concurrency, Lambda keeps 5 long polls on an idle queue, not 2: the SQS part's assumption
    (mapping,) = template.find_resources("AWS::Lambda::EventSourceMapping").values()
    assert mapping["Properties"]["ScalingConfig"]["MaximumConcurrency"] > 0
    assert DEFAULTS.event_source_long_polls == 5


def test_the_tables_are_pre_warmed_as_the_plan_assumes(template: Template) -> None:
    """`duetime plan` takes StackDefaults.warm_write_units as each table's and index's write capacity at
    the spike (its warm throughput, bought once: no part of the fixed cost a month)."""
    warm = {}
    for logical, table in template.find_resources("AWS::DynamoDB::GlobalTable").items():
        role = next(r for r in ("jobs", "runs", "control") if logical.startswith(f"Storage{r.title()}"))
        warm[role] = table["Properties"].get("WarmThroughput", {}).get("WriteUnitsPerSecond", 0)
        for index in table["Properties"].get("GlobalSecondaryIndexes", []):
            units = index.get("WarmThroughput", {}).get("WriteUnitsPerSecond", 0)
            warm[f"{role}/{index['IndexName']}"] = units
    assert {name: units for name, units in warm.items() if units} == DEFAULTS.warm_write_units
    assert DEFAULTS.warm_write_units  # the default stack is ready for the seed's midnight
