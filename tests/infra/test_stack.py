"""The CDK stack, synthesized in-process and checked with aws_cdk.assertions, cdk-nag and cfn-lint."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")

import aws_cdk as cdk
from aws_cdk.assertions import Annotations, Match, Template

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "infra" / "cdk"))

from duetime_cdk.config import ContextError, StackConfig  # noqa: E402
from duetime_cdk.functions import NOTHING_OF_BODIES_RECORDED  # noqa: E402
from duetime_cdk.pollers import claims_per_second_for, poller_memory_mb  # noqa: E402
from duetime_cdk.stack import DuetimeStack, check_with_cdk_nag  # noqa: E402

import duetime  # noqa: E402
from duetime.capacity.warm_throughput import DEFAULT_WARM_WRITE_UNITS, targets  # noqa: E402
from duetime.domain.alarms import RECONCILER_ALARMS  # noqa: E402


def synth(**context: Any) -> tuple[DuetimeStack, Template]:
    app = cdk.App(context=context)
    try:
        config = StackConfig.from_context(app.node)  # refuses a lambda_asset that is not built
    except ContextError as exc:
        pytest.fail(f"{exc}\n`make test` builds the Lambda asset (make lambda-assets)", pytrace=False)
    stack = DuetimeStack(app, "DuetimeTest", config=config)
    check_with_cdk_nag(app)
    app.synth()
    return stack, Template.from_stack(stack)


@pytest.fixture(scope="module")
def test_stack() -> tuple[DuetimeStack, Template]:
    return synth(deletion_protection="false")


@pytest.fixture(scope="module")
def template(test_stack: tuple[DuetimeStack, Template]) -> Template:
    return test_stack[1]


def resources(template: Template, kind: str) -> dict[str, Any]:
    found: dict[str, Any] = template.find_resources(kind)
    return found


POLLER = "functions/poller/handler.handler"
PRESCALER = "functions/prescaler/handler.handler"
DEPLOY_GATE = "functions/deploy_gate/handler.handler"
RECONCILER = "functions/reconciler/handler.handler"


def function_ids(template: Template, handler: str) -> list[str]:
    """The logical ids of the functions of ``handler``."""
    return [
        name
        for name, f in resources(template, "AWS::Lambda::Function").items()
        if f["Properties"]["Handler"] == handler
    ]


def rules_of(template: Template, handler: str) -> list[dict[str, Any]]:
    """The properties of the EventBridge rules whose (first) target is a function of ``handler``."""
    ids = function_ids(template, handler)
    return [
        r["Properties"]
        for r in resources(template, "AWS::Events::Rule").values()
        if r["Properties"]["Targets"][0]["Arn"].get("Fn::GetAtt", [None])[0] in ids
    ]


def test_tables_are_on_demand_with_pitr_ttl_and_the_indexes_the_code_queries(template: Template) -> None:
    tables = resources(template, "AWS::DynamoDB::GlobalTable")
    assert len(tables) == 3

    def key(table: dict[str, Any]) -> tuple[str, ...]:
        return tuple(k["AttributeName"] for k in table["Properties"]["KeySchema"])

    by_key = {key(t): t["Properties"] for t in tables.values()}
    jobs, runs = ("job_id",), ("job_id", "occurrence")
    assert set(by_key) == {jobs, runs, ("pk", "sk")}
    for props in by_key.values():
        assert props["BillingMode"] == "PAY_PER_REQUEST"
        replica = props["Replicas"][0]
        assert replica["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert by_key[runs]["TimeToLiveSpecification"] == {"AttributeName": "ttl", "Enabled": True}
    indexes = {
        t: {
            i["IndexName"]: [k["AttributeName"] for k in i["KeySchema"]]
            for i in p.get("GlobalSecondaryIndexes", [])
        }
        for t, p in by_key.items()
    }
    assert indexes[jobs] == {"due": ["due_bucket", "due_key"], "team-jobs": ["team", "job_id"]}
    assert indexes[runs] == {"reap": ["reap_shard", "reap_at"]}  # a job's runs: a Query on the table


def warm_throughput(template: Template) -> dict[str, dict[str, int] | None]:
    """Each table's WarmThroughput (by its role, from the logical id) and each GSI's, as
    ``duetime.capacity.warm_throughput`` names them (None: not set)."""
    found: dict[str, dict[str, int] | None] = {}
    for logical, table in resources(template, "AWS::DynamoDB::GlobalTable").items():
        (role,) = [r for r in ("jobs", "runs", "control") if logical.startswith(f"Storage{r.title()}")]
        found[role] = table["Properties"].get("WarmThroughput")
        for index in table["Properties"].get("GlobalSecondaryIndexes", []):
            found[f"{role}/{index['IndexName']}"] = index.get("WarmThroughput")
    return found


def expected_warm(write: dict[str, int], read: dict[str, int]) -> dict[str, dict[str, int] | None]:
    expected: dict[str, dict[str, int] | None] = {}
    for name in targets():
        units = {"WriteUnitsPerSecond": write.get(name, 0), "ReadUnitsPerSecond": read.get(name, 0)}
        expected[name] = {key: value for key, value in units.items() if value} or None
    return expected


def test_every_table_and_index_is_pre_warmed_to_the_setting(template: Template) -> None:
    # By default: what `duetime plan` says the seed's midnight asks of each (tests/unit/test_plan.py).
    assert warm_throughput(template) == expected_warm(DEFAULT_WARM_WRITE_UNITS, {})
    assert warm_throughput(template)["runs"] == {"WriteUnitsPerSecond": 38000}
    # Given: the names given replace their defaults, the rest keep theirs; 0 is none.
    write = "jobs:9000,jobs/due:17000,runs:26000,runs/reap:5000,jobs/team-jobs:4000,control:0"
    _, given = synth(
        deletion_protection="false", warm_write_units=write, warm_read_units="jobs:15000,runs/reap:12000"
    )
    assert warm_throughput(given) == expected_warm(
        {"jobs": 9000, "jobs/due": 17000, "runs": 26000, "runs/reap": 5000, "jobs/team-jobs": 4000},
        {"jobs": 15000, "runs/reap": 12000},
    )
    # cdk.json's form: an object.
    off = {name: 0 for name in DEFAULT_WARM_WRITE_UNITS}
    _, none = synth(deletion_protection="false", warm_write_units=off)
    assert set(warm_throughput(none).values()) == {None}


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("warm_write_units", "runz:9000", "'runz' is no table or index; they are: jobs, jobs/due"),
        ("warm_write_units", "runs:3000", "runs: 3,000 is under the 4,000 a new on-demand table"),
        ("warm_write_units", "runs=9000", "is not <table or index>:<units a second>"),
        ("warm_write_units", "runs:lots", "runs: 'lots' is not a whole number"),
        ("warm_read_units", "jobs:4000", "jobs: 4,000 is under the 12,000 a new on-demand table"),
    ],
)
def test_a_bad_warm_throughput_is_refused_naming_the_key(key: str, value: str, why: str) -> None:
    with pytest.raises(ContextError, match=rf"^bad CDK context:\n  {key}: .*{re.escape(why)}"):
        StackConfig.from_mapping({key: value})


def test_deletion_protection_is_on_by_default_and_off_for_test_stacks(template: Template) -> None:
    off = [
        t["Properties"]["Replicas"][0].get("DeletionProtectionEnabled")
        for t in resources(template, "AWS::DynamoDB::GlobalTable").values()
    ]
    assert off == [False, False, False]
    _, default = synth()
    on = default.find_resources("AWS::DynamoDB::GlobalTable")
    assert [t["Properties"]["Replicas"][0]["DeletionProtectionEnabled"] for t in on.values()] == [True] * 3
    assert {t["DeletionPolicy"] for t in on.values()} == {"Retain"}


def test_run_queue_has_a_dead_letter_queue_and_a_visibility_above_the_worker_timeout(
    template: Template,
) -> None:
    queues = resources(template, "AWS::SQS::Queue")
    runs = [q["Properties"] for q in queues.values() if "RedrivePolicy" in q["Properties"]]
    assert len(queues) == 2 and len(runs) == 1
    assert runs[0]["RedrivePolicy"]["maxReceiveCount"] == 10
    assert runs[0]["VisibilityTimeout"] == 6 * 900


def test_one_eventbridge_rule_per_partition_group_ticks_its_poller_every_minute(template: Template) -> None:
    rules = rules_of(template, POLLER)
    inputs = sorted(json.loads(r["Targets"][0]["Input"])["partitions"] for r in rules)
    assert inputs == ["0-15", "16-31", "32-47", "48-63"]
    assert {r["ScheduleExpression"] for r in rules} == {"rate(1 minute)"}
    # Besides them, the prescaler's rule and the reconciler's only.
    assert len(resources(template, "AWS::Events::Rule")) == len(rules) + len(
        rules_of(template, PRESCALER)
    ) + len(rules_of(template, RECONCILER))
    split = [[*range(0, 8), *range(32, 40)], [*range(8, 32), *range(40, 64)]]
    _, custom = synth(deletion_protection="false", partition_groups=split)
    # A group of two ranges keeps both in its label (it used to become "0-39": partitions it does not own).
    labels = sorted(json.loads(r["Targets"][0]["Input"])["partitions"] for r in rules_of(custom, POLLER))
    assert labels == ["0-7,32-39", "8-31,40-63"]


def test_poller_invocations_overlap_so_a_standby_can_take_the_lease_over(template: Template) -> None:
    pollers = [
        f["Properties"]
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == "functions/poller/handler.handler"
    ]
    run_seconds = {json.loads(r["Targets"][0]["Input"])["run_seconds"] for r in rules_of(template, POLLER)}
    assert len(pollers) == 4 and run_seconds == {135}
    assert all(p["Timeout"] >= 135 + 10 for p in pollers)  # the handler stops 10 s before the timeout
    configs = [
        c["Properties"]
        for c in resources(template, "AWS::Lambda::EventInvokeConfig").values()
        if c["Properties"]["FunctionName"]["Ref"] in function_ids(template, POLLER)
    ]
    assert [(c["MaximumEventAgeInSeconds"], c["MaximumRetryAttempts"]) for c in configs] == [(60, 0)] * 4


def test_each_poller_has_the_memory_its_share_of_the_midnight_minute_needs(template: Template) -> None:
    """Sized from the bytes a preloaded job holds (`duetime bench preload`): a group's share of 500,000 jobs
    due in one minute, twice over, on top of the process; never below 512 MB, for the CPU that comes with
    it."""
    pollers = [
        f["Properties"]
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == "functions/poller/handler.handler"
    ]
    assert [p["MemorySize"] for p in pollers] == [poller_memory_mb(16)] * 4 == [512] * 4
    assert poller_memory_mb(16, bytes_per_job=5003) == 1280  # had it held whole models
    assert poller_memory_mb(32, bytes_per_job=1000) == 576  # bigger jobs, fewer groups: more memory
    assert poller_memory_mb(64, bytes_per_job=1000) == 1088


def test_pollers_may_warm_the_worker_alias_the_queue_feeds_and_nothing_else(template: Template) -> None:
    aliases = resources(template, "AWS::Lambda::Alias")
    (alias_id,) = [k for k, a in aliases.items() if a["Properties"]["Name"] == "live"]
    pollers = [
        f["Properties"]
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == "functions/poller/handler.handler"
    ]
    assert len(pollers) == 4
    for poller in pollers:
        assert poller["Environment"]["Variables"]["DUETIME_WORKER_FUNCTION_ARN"] == {"Ref": alias_id}
    invokes = [
        statement
        for policy in resources(template, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement["Action"] == "lambda:InvokeFunction" and statement.get("Resource") == {"Ref": alias_id}
    ]
    assert len(invokes) == 5  # one per poller role and the helpers' role, on the alias only


def test_workers_take_sqs_batches_with_partial_failures_and_a_concurrency_cap(template: Template) -> None:
    template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "BatchSize": 10,
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "ScalingConfig": {"MaximumConcurrency": 100},
            "FunctionName": Match.any_value(),
        },
    )


def test_by_default_the_worker_event_source_is_in_standard_mode(template: Template) -> None:
    (mapping,) = resources(template, "AWS::Lambda::EventSourceMapping").values()
    assert mapping["Properties"]["ScalingConfig"] == {"MaximumConcurrency": 100}
    assert "ProvisionedPollerConfig" not in mapping["Properties"]


def test_worker_min_pollers_puts_the_worker_event_source_in_provisioned_mode(tmp_path: Path) -> None:
    _, template = synth(deletion_protection="false", worker_min_pollers="20", worker_max_pollers="100")
    (mapping,) = resources(template, "AWS::Lambda::EventSourceMapping").values()
    properties = mapping["Properties"]
    assert properties["ProvisionedPollerConfig"] == {"MinimumPollers": 20, "MaximumPollers": 100}
    assert "ScalingConfig" not in properties  # AWS refuses MaximumConcurrency with provisioned mode
    assert (properties["BatchSize"], properties["FunctionResponseTypes"]) == (10, ["ReportBatchItemFailures"])
    cfn_lint(template, tmp_path)
    _, minimum_only = synth(deletion_protection="false", worker_min_pollers="2")
    (mapping,) = resources(minimum_only, "AWS::Lambda::EventSourceMapping").values()
    assert mapping["Properties"]["ProvisionedPollerConfig"] == {"MinimumPollers": 2, "MaximumPollers": 200}


def test_worker_pollers_out_of_range_are_refused_naming_the_setting() -> None:
    for context, refused in (
        ({"worker_min_pollers": "1"}, r"worker_min_pollers: Input should be greater than or equal to 2"),
        ({"worker_min_pollers": "201"}, r"worker_min_pollers: Input should be less than or equal to 200"),
        ({"worker_min_pollers": "2", "worker_max_pollers": "2001"}, r"worker_max_pollers: .* equal to 2000"),
        (
            {"worker_min_pollers": "20", "worker_max_pollers": "10"},
            r"worker_max_pollers: must be at least worker_min_pollers \(20\) \(given: '10'\)",
        ),
        (  # a cap provisioned mode would silently drop
            {"worker_min_pollers": "20", "worker_max_concurrency": "50"},
            r"worker_max_concurrency \(50\) caps the worker's event source in standard mode only",
        ),
    ):
        with pytest.raises(ContextError, match=refused):
            StackConfig.from_mapping(context)


@pytest.fixture(scope="module")
def scheduled() -> Template:
    """The stack with the worker's provisioned concurrency on the daily schedule instead of the forecast."""
    return synth(deletion_protection="false", scheduled_scaling="true", forecast_scaling="false")[1]


def test_with_scheduled_scaling_workers_are_scaled_up_before_midnight_and_really_down_after(
    scheduled: Template,
) -> None:
    targets = resources(scheduled, "AWS::ApplicationAutoScaling::ScalableTarget")
    (target,) = targets.values()
    actions = {a["ScheduledActionName"]: a for a in target["Properties"]["ScheduledActions"]}
    assert target["Properties"]["ScalableDimension"] == "lambda:function:ProvisionedConcurrency"
    up = next(a for a in actions.values() if a["Schedule"] == "cron(55 23 * * ? *)")
    down = next(a for a in actions.values() if a["Schedule"] == "cron(15 0 * * ? *)")
    # Both bounds: a scheduled action scales in only to its maximum, so a lowered minimum alone would leave
    # the 90 workers provisioned all day (~$778 a month instead of ~$11).
    assert up["ScalableTargetAction"] == {"MinCapacity": 90, "MaxCapacity": 90}
    assert down["ScalableTargetAction"] == {"MinCapacity": 0, "MaxCapacity": 0}  # pollers warm one instead
    assert target["Properties"]["MinCapacity"] == 0  # Lambda's provisioned concurrency may go to 0
    assert function_ids(scheduled, PRESCALER) == []  # the schedule alone sets it


def test_a_provisioned_baseline_of_workers_is_a_setting() -> None:
    _, template = synth(
        deletion_protection="false", baseline_workers="2", scheduled_scaling="true", forecast_scaling="false"
    )
    (target,) = resources(template, "AWS::ApplicationAutoScaling::ScalableTarget").values()
    down = next(a for a in target["Properties"]["ScheduledActions"] if a["Schedule"] == "cron(15 0 * * ? *)")
    assert down["ScalableTargetAction"] == {"MinCapacity": 2, "MaxCapacity": 2}
    _, forecast = synth(deletion_protection="false", baseline_workers="2", peak_workers="40")
    (prescaler,) = [
        resources(forecast, "AWS::Lambda::Function")[f] for f in function_ids(forecast, PRESCALER)
    ]
    variables = prescaler["Properties"]["Environment"]["Variables"]
    assert (variables["DUETIME_PRESCALE_BASELINE_WORKERS"], variables["DUETIME_PRESCALE_MAX_WORKERS"]) == (
        "2",
        "40",
    )
    assert "DUETIME_PRESCALE_POLICY" not in variables  # standard mode: the policy's 5 on-demand workers


def test_in_provisioned_mode_the_prescaler_counts_the_minimum_pollers_workers_as_on_demand() -> None:
    _, template = synth(deletion_protection="false", worker_min_pollers="3")
    (prescaler,) = [
        resources(template, "AWS::Lambda::Function")[f] for f in function_ids(template, PRESCALER)
    ]
    policy = prescaler["Properties"]["Environment"]["Variables"]["DUETIME_PRESCALE_POLICY"]
    assert json.loads(policy) == {"on_demand_workers": 30}  # a busy minute 30 workers start needs none


def test_provisioned_workers_can_be_left_out_altogether() -> None:
    _, template = synth(deletion_protection="false", forecast_scaling="false")
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalableTarget", 0)
    assert function_ids(template, PRESCALER) == []
    assert len(resources(template, "AWS::Events::Rule")) == 5  # the pollers' and the reconciler's


# --- the prescaler (forecast_scaling, the default) ------------------------------------------------------


def role_statements(template: Template, handler: str) -> list[tuple[list[str], list[Any]]]:
    """Each statement of the roles of the functions of ``handler``: its actions and its resources."""
    roles = [
        f["Properties"]["Role"]["Fn::GetAtt"][0]
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == handler
    ]
    found = []
    for policy in resources(template, "AWS::IAM::Policy").values():
        if not any({"Ref": role} in policy["Properties"]["Roles"] for role in roles):
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            assert statement["Effect"] == "Allow"
            actions, targets = statement["Action"], statement["Resource"]
            found.append(
                (
                    [actions] if isinstance(actions, str) else actions,
                    targets if isinstance(targets, list) else [targets],
                )
            )
    return found


def test_by_default_the_prescaler_alone_sets_the_workers_provisioned_concurrency(template: Template) -> None:
    """No Application Auto Scaling target (it would fight the prescaler over the alias's provisioned
    concurrency config); one prescaler, ticked every 5 minutes, told the alias and the bounds."""
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalableTarget", 0)
    functions = resources(template, "AWS::Lambda::Function")
    (prescaler_id,) = function_ids(template, PRESCALER)
    prescaler = functions[prescaler_id]["Properties"]
    assert (prescaler["MemorySize"], prescaler["Timeout"]) == (256, 60)
    assert prescaler["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] == "prescaler"
    (alias_id,) = [
        k for k, a in resources(template, "AWS::Lambda::Alias").items() if a["Properties"]["Name"] == "live"
    ]
    variables = prescaler["Environment"]["Variables"]
    assert variables["DUETIME_WORKER_FUNCTION_ARN"] == {"Ref": alias_id}  # the alias's ARN, ...:live
    assert variables["DUETIME_PRESCALE_MAX_WORKERS"] == "90"  # peak_workers
    assert variables["DUETIME_PRESCALE_BASELINE_WORKERS"] == "0"  # baseline_workers
    assert {"DUETIME_JOBS_TABLE", "DUETIME_RUN_QUEUE_URL"} <= set(variables)  # LambdaCode's
    (rule,) = rules_of(template, PRESCALER)
    assert rule["ScheduleExpression"] == "rate(5 minutes)" and rule["State"] == "ENABLED"
    (target,) = rule["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [prescaler_id, "Arn"]}  # the function itself, no input
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 60}
    (invoke_config,) = [
        c["Properties"]
        for c in resources(template, "AWS::Lambda::EventInvokeConfig").values()
        if c["Properties"]["FunctionName"] == {"Ref": prescaler_id}
    ]
    assert (invoke_config["MaximumRetryAttempts"], invoke_config["MaximumEventAgeInSeconds"]) == (0, 300)


def test_the_prescaler_may_count_the_due_index_set_the_workers_and_read_the_queue_depth_only(
    template: Template,
) -> None:
    """Least privilege (LocalStack does not enforce IAM: only this test can tell): Query on the jobs
    table's ``due`` index, the provisioned concurrency calls on the worker alias (and the function's
    unqualified ARN, which IAM may evaluate too), GetQueueAttributes on the run queue, Get/Update of the
    worker's event source mapping (its provisioned mode, ``forecast_pollers``) on that mapping only."""
    tables = resources(template, "AWS::DynamoDB::GlobalTable")
    (jobs,) = [name for name in tables if "Jobs" in name]
    (alias_id,) = [
        k for k, a in resources(template, "AWS::Lambda::Alias").items() if a["Properties"]["Name"] == "live"
    ]
    (worker_id,) = function_ids(template, "functions/worker/handler.handler")
    queues = resources(template, "AWS::SQS::Queue")
    (runs_queue,) = [k for k, q in queues.items() if "RedrivePolicy" in q["Properties"]]
    statements = role_statements(template, PRESCALER)
    own = [
        (actions, resources_)
        for actions, resources_ in statements
        if not all(a.startswith(("logs:", "xray:")) for a in actions)
    ]
    assert own == [
        (["dynamodb:Query"], [{"Fn::Join": ["", [{"Fn::GetAtt": [jobs, "Arn"]}, "/index/due"]]}]),
        (
            [
                "lambda:GetProvisionedConcurrencyConfig",
                "lambda:PutProvisionedConcurrencyConfig",
                "lambda:DeleteProvisionedConcurrencyConfig",
            ],
            [{"Ref": alias_id}, {"Fn::GetAtt": [worker_id, "Arn"]}],
        ),
        (["sqs:GetQueueAttributes"], [{"Fn::GetAtt": [runs_queue, "Arn"]}]),
        (
            ["lambda:GetEventSourceMapping", "lambda:UpdateEventSourceMapping"],
            [mapping_arn(template)],
        ),
    ]
    wildcards = [actions for actions, resources_ in statements if "*" in resources_]
    assert wildcards == [["xray:PutTraceSegments", "xray:PutTelemetryRecords"]]  # the DuetimeFunction's own


def mapping_arn(template: Template) -> dict[str, Any]:
    """The worker's SQS event source mapping's ARN, as the template builds it from the mapping's UUID."""
    (mapping_id,) = resources(template, "AWS::Lambda::EventSourceMapping")
    return {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":lambda:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                ":event-source-mapping:",
                {"Ref": mapping_id},
            ],
        ]
    }


def prescaler_variables(template: Template) -> dict[str, Any]:
    (prescaler,) = [
        resources(template, "AWS::Lambda::Function")[f] for f in function_ids(template, PRESCALER)
    ]
    variables: dict[str, Any] = prescaler["Properties"]["Environment"]["Variables"]
    return variables


def test_by_default_the_prescaler_is_told_the_event_source_mapping_whose_provisioned_mode_it_switches(
    template: Template,
) -> None:
    """The mapping's UUID (its Ref), the pollers' cap and the standard mode's MaximumConcurrency it restores;
    the mapping itself is created in standard mode, capped as before."""
    (mapping_id, mapping), *_ = resources(template, "AWS::Lambda::EventSourceMapping").items()
    variables = prescaler_variables(template)

    assert variables["DUETIME_WORKER_EVENT_SOURCE_UUID"] == {"Ref": mapping_id}
    assert variables["DUETIME_PRESCALE_MAX_POLLERS"] == "200"  # worker_max_pollers
    assert variables["DUETIME_WORKER_MAX_CONCURRENCY"] == "100"  # worker_max_concurrency
    assert mapping["Properties"]["ScalingConfig"] == {"MaximumConcurrency": 100}
    assert "ProvisionedPollerConfig" not in mapping["Properties"]
    _, capped = synth(deletion_protection="false", worker_max_concurrency="40", worker_max_pollers="30")
    assert (
        prescaler_variables(capped)["DUETIME_WORKER_MAX_CONCURRENCY"],
        prescaler_variables(capped)["DUETIME_PRESCALE_MAX_POLLERS"],
    ) == ("40", "30")


@pytest.mark.parametrize(
    "context",
    [{"worker_min_pollers": "2"}, {"forecast_pollers": "false"}],
    ids=["provisioned-mode-pinned", "switching-off"],
)
def test_the_prescaler_leaves_the_event_source_alone_when_the_stack_pins_its_mode_or_says_so(
    context: dict[str, str],
) -> None:
    _, template = synth(deletion_protection="false", **context)

    variables = prescaler_variables(template)
    assert not {"DUETIME_WORKER_EVENT_SOURCE_UUID", "DUETIME_PRESCALE_MAX_POLLERS"} & set(variables)
    granted = [action for actions, _ in role_statements(template, PRESCALER) for action in actions]
    assert not [action for action in granted if "EventSourceMapping" in action]


def test_switching_the_event_source_needs_the_prescaler_and_an_unpinned_mode() -> None:
    with pytest.raises(ContextError, match="worker_min_pollers pins provisioned mode"):
        StackConfig.from_mapping({"forecast_pollers": "true", "worker_min_pollers": "2"})
    with pytest.raises(ContextError, match="forecast_pollers is the prescaler's"):
        StackConfig.from_mapping(
            {"forecast_pollers": "true", "forecast_scaling": "false", "scheduled_scaling": "true"}
        )
    pinned = StackConfig.from_mapping({"worker_min_pollers": "2"})  # the default gives way to the pin
    assert (pinned.forecast_pollers, pinned.prescaler_switches_pollers) == (True, False)
    assert StackConfig.from_mapping({}).prescaler_switches_pollers


def test_the_prescaler_and_scheduled_scaling_are_exclusive() -> None:
    with pytest.raises(ContextError, match="forecast_scaling and scheduled_scaling"):
        StackConfig.from_context(cdk.App(context={"scheduled_scaling": "true"}).node)
    config = StackConfig.from_mapping({"scheduled_scaling": "true", "forecast_scaling": "false"})
    assert (config.scheduled_scaling, config.forecast_scaling) == (True, False)


def test_functions_are_arm64_python313_with_tracing(template: Template) -> None:
    functions = resources(template, "AWS::Lambda::Function")
    # 4 pollers, the pollers' helper, worker, api, authorizer, prescaler, gate, reconciler
    assert len(functions) == 11
    for function in functions.values():
        props = function["Properties"]
        assert props["Runtime"] == "python3.13" and props["Architectures"] == ["arm64"]
        assert props["TracingConfig"] == {"Mode": "Active"}


def test_no_function_records_an_event_or_an_answer_in_its_traces_or_logs(template: Template) -> None:
    """Tokens issued, signing keys, targets' header secrets and the authorizer's token pass through the
    functions: powertools is told to record no answer or error in traces, log no event and print none, as
    each handler says in code too (tests/unit/test_no_bodies_in_traces.py)."""
    for function in resources(template, "AWS::Lambda::Function").values():
        variables = function["Properties"]["Environment"]["Variables"]
        assert {name: variables.get(name) for name in NOTHING_OF_BODIES_RECORDED} == {
            "POWERTOOLS_TRACER_CAPTURE_RESPONSE": "false",
            "POWERTOOLS_TRACER_CAPTURE_ERROR": "false",
            "POWERTOOLS_LOGGER_LOG_EVENT": "false",
            "POWERTOOLS_DEV": "false",
        }


def test_api_has_the_team_authorizer_throttling_and_access_logs(template: Template) -> None:
    template.has_resource_properties(
        "AWS::ApiGateway::Authorizer",
        {"Type": "TOKEN", "IdentitySource": "method.request.header.Authorization"},
    )
    template.has_resource_properties(
        "AWS::ApiGateway::Stage",
        {
            "AccessLogSetting": Match.object_like({"DestinationArn": Match.any_value()}),
            "MethodSettings": Match.array_with(
                [Match.object_like({"ThrottlingRateLimit": 100, "ThrottlingBurstLimit": 200})]
            ),
        },
    )
    template.has_resource_properties(
        "AWS::ApiGateway::Method", {"AuthorizationType": "CUSTOM", "HttpMethod": "ANY"}
    )
    methods = [m["Properties"] for m in resources(template, "AWS::ApiGateway::Method").values()]
    # Every method is ANY, so a method the API does not serve reaches it and is answered 405 + Allow.
    assert {m["HttpMethod"] for m in methods} == {"ANY"}
    public = [m for m in methods if m.get("AuthorizationType", "NONE") == "NONE"]
    paths = resources(template, "AWS::ApiGateway::Resource")

    def path_of(resource_id: Any) -> str:
        if "Ref" not in resource_id:  # Fn::GetAtt [the API, RootResourceId]
            return ""
        resource = paths[resource_id["Ref"]]["Properties"]
        return path_of(resource["ParentId"]) + "/" + resource["PathPart"]

    # /healthz, /v1/openapi.json, the console's static files; every other path outside /v1 (the api function
    # answers 401 or 404 there), so API Gateway's own "Missing Authentication Token" is left for methods it
    # serves on no path. /v1/{proxy+} is behind the authorizer.
    assert sorted(path_of(m["ResourceId"]) or "/" for m in public) == [
        "/",
        "/console",
        "/console/{proxy+}",
        "/healthz",
        "/v1/openapi.json",
        "/{proxy+}",
    ]


API = "functions/api/handler.handler"


def stand_in_asset(tmp_path: Path) -> Path:
    """A finished Lambda build as far as the stack can tell (its ``.built`` mark, no wheels): enough to synth
    a setting's effect without ``make lambda-assets``."""
    asset = tmp_path / "lambda"
    asset.mkdir()
    (asset / ".built").write_text("")
    return asset


def reserved_concurrency(template: Template) -> dict[str, int | None]:
    """Each function's reserved concurrency (None: none reserved), by handler."""
    return {
        f["Properties"]["Handler"]: f["Properties"].get("ReservedConcurrentExecutions")
        for f in resources(template, "AWS::Lambda::Function").values()
    }


def test_the_api_function_alone_has_reserved_concurrency_so_no_team_can_starve_pollers_and_workers(
    tmp_path: Path,
) -> None:
    """However many 29 s requests one team sends, the api function runs at most ``api_reserved_concurrency``
    instances (50 by default): the rest of the account's concurrency stays for the pollers and workers."""
    asset = str(stand_in_asset(tmp_path))
    by_default = reserved_concurrency(synth(deletion_protection="false", lambda_asset=asset)[1])
    assert by_default.pop(API) == 50
    assert set(by_default.values()) == {None}  # the others draw on the unreserved pool, as before
    assert reserved_concurrency(synth(lambda_asset=asset, api_reserved_concurrency="7")[1])[API] == 7
    assert reserved_concurrency(synth(lambda_asset=asset, api_reserved_concurrency="0")[1])[API] is None


def test_the_authorizer_cache_keeps_a_decision_authorizer_cache_seconds(template: Template) -> None:
    """How long a rotated-out token (or a disabled team's cached Allow) lasts behind API Gateway."""
    template.has_resource_properties("AWS::ApiGateway::Authorizer", {"AuthorizerResultTtlInSeconds": 300})
    _, shortened = synth(authorizer_cache_seconds=0)
    shortened.has_resource_properties("AWS::ApiGateway::Authorizer", {"AuthorizerResultTtlInSeconds": 0})
    with pytest.raises(
        ContextError, match="authorizer_cache_seconds: Input should be less than or equal to 3600"
    ):
        StackConfig.from_context(cdk.App(context={"authorizer_cache_seconds": 7200}).node)


UNREADABLE = "a due job row could not be read: quarantined, that job does not run, the others do"


def test_alarms_cover_lateness_dead_runs_dlq_poller_errors_and_throttles(template: Template) -> None:
    alarms = {
        a["Properties"]["AlarmDescription"]: a["Properties"]
        for a in resources(template, "AWS::CloudWatch::Alarm").values()
    }
    assert set(alarms) == {
        "start lateness p99 over 5 s",
        "runs went dead (out of attempts)",
        "run messages reached the dead-letter queue",
        "a poller invocation or tick failed",
        "the prescaler failed: a busy minute may find no workers provisioned ahead",
        "a poller died and a standby took its partitions over",
        UNREADABLE,
        "Lambda throttled a duetime function",
        "DynamoDB throttled duetime's tables",
        *(d.description for d in RECONCILER_ALARMS),
        "a worker invocation failed",
        "an api or authorizer invocation failed",
        "the API answered 5xx",
        "a reconciler tick failed",
    }
    lateness = alarms["start lateness p99 over 5 s"]
    assert lateness["Threshold"] == 5 and lateness["ExtendedStatistic"] == "p99"
    # Every function's throttles, the prescaler's too.
    throttled = {
        q["MetricStat"]["Metric"]["Dimensions"][0]["Value"]["Ref"]
        for q in alarms["Lambda throttled a duetime function"]["Metrics"]
        if "MetricStat" in q
    }
    gate = template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": DEPLOY_GATE}})
    assert throttled == set(resources(template, "AWS::Lambda::Function")) - set(gate)  # a deploy shows it
    (prescaler,) = template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": PRESCALER}})
    failed = alarms["the prescaler failed: a busy minute may find no workers provisioned ahead"]
    assert (failed["MetricName"], failed["Dimensions"][0]["Value"]["Ref"]) == ("Errors", prescaler)
    # Any unreadable row in a minute (issue 49, item 2); no data (no such row) is not breaching.
    unreadable = alarms[UNREADABLE]
    assert (unreadable["Namespace"], unreadable["MetricName"], unreadable["Statistic"]) == (
        "duetime",
        "UnreadableRows",
        "Sum",
    )
    assert unreadable["Dimensions"] == [
        {"Name": "installation", "Value": {"Ref": "AWS::StackName"}},
        {"Name": "service", "Value": "poller"},
    ]
    assert (unreadable["Threshold"], unreadable["ComparisonOperator"], unreadable["Period"]) == (
        0,
        "GreaterThanThreshold",
        60,
    )
    assert (unreadable["EvaluationPeriods"], unreadable["TreatMissingData"]) == (1, "notBreaching")
    assert all(a["AlarmActions"] for a in alarms.values())
    template.resource_count_is("AWS::CloudWatch::Dashboard", 1)
    (dashboard,) = template.find_resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    assert "UnreadableRows" in body  # the failures graph shows the quarantined rows beside the dead runs


def test_a_stack_of_sixteen_groups_watches_every_poller_within_cloudwatchs_ten_metrics_an_alarm() -> None:
    """CloudWatch refuses an alarm on a metric math expression over more than 10 metrics (a hard limit):
    with a poller function per group, 16 groups' poller errors and the functions' throttles are watched by
    alarms of at most 10 metrics each, which together still cover every function."""
    groups = [list(range(start, start + 4)) for start in range(0, 64, 4)]
    _, many = synth(deletion_protection="false", partition_groups=groups)
    alarms = list(resources(many, "AWS::CloudWatch::Alarm").values())
    watched: dict[str, set[str]] = {}
    for alarm in alarms:
        queries = alarm["Properties"].get("Metrics", [])
        stats = [q["MetricStat"]["Metric"] for q in queries if "MetricStat" in q]
        assert len(stats) <= 10, alarm["Properties"]["AlarmDescription"]
        for metric in stats:
            if metric["Namespace"] == "AWS/Lambda":
                key = f"{alarm['Properties']['AlarmDescription']}/{metric['MetricName']}"
                watched.setdefault(key, set()).add(metric["Dimensions"][0]["Value"]["Ref"])
    pollers = set(function_ids(many, POLLER))
    assert len(pollers) == 16
    assert watched["a poller invocation or tick failed/Errors"] == pollers
    gate = set(many.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": DEPLOY_GATE}}))
    functions = set(resources(many, "AWS::Lambda::Function")) - gate  # a deploy shows the gate's failure
    assert watched["Lambda throttled a duetime function/Throttles"] == functions


def test_no_iam_policy_grants_a_wildcard_action(template: Template) -> None:
    statements = [
        s
        for p in resources(template, "AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    actions = [
        a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    ]
    assert actions and not [a for a in actions if "*" in a]
    wildcard_resources = {
        a
        for s in statements
        if s.get("Resource") == "*"
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert wildcard_resources <= {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}


def test_the_api_function_may_update_the_control_table_where_each_teams_api_rate_is_counted(
    template: Template,
) -> None:
    """``DynamoRateLimiter`` decides each request with conditional UpdateItems on the control table (one,
    two when it guessed the bucket's state wrong); what it reads comes back on failed conditions."""
    [api_role] = [
        f["Properties"]["Role"]["Fn::GetAtt"][0]
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == "functions/api/handler.handler"
    ]
    [control] = [name for name in resources(template, "AWS::DynamoDB::GlobalTable") if "Control" in name]
    granted = [
        statement
        for policy in resources(template, "AWS::IAM::Policy").values()
        if {"Ref": api_role} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if "dynamodb:UpdateItem" in statement["Action"]
    ]
    assert {"Fn::GetAtt": [control, "Arn"]} in [
        resource
        for statement in granted
        for resource in (
            statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        )
    ]


def granted_to_tables(template: Template, handler: str) -> tuple[dict[str, set[str]], str, str]:
    """The actions the functions of ``handler`` may take on each resource named by ``Fn::GetAtt`` (a
    table's ARN), and the runs and control tables' logical ids."""
    tables = resources(template, "AWS::DynamoDB::GlobalTable")
    [runs] = [name for name in tables if "Runs" in name]
    [control] = [name for name in tables if "Control" in name]
    granted: dict[str, set[str]] = {}
    for actions, target in role_grants(template, handler):
        if isinstance(target, dict) and "Fn::GetAtt" in target:
            granted.setdefault(target["Fn::GetAtt"][0], set()).update(actions)
    return granted, runs, control


def role_grants(template: Template, handler: str) -> list[tuple[list[str], Any]]:
    """Each (actions, resource) of the policies of the roles of ``handler``'s functions."""
    return [
        (actions, target) for actions, targets in role_statements(template, handler) for target in targets
    ]


def test_the_worker_may_make_the_batched_writes_of_its_batch_on_aws(template: Template) -> None:
    """A batch's leases, results and slots go through PartiQL BatchExecuteStatement, which IAM authorizes
    per statement (PartiQLUpdate, PartiQLInsert), not as UpdateItem: without these, every batch of more
    than one run is refused on AWS (LocalStack does not enforce IAM, so only this test can tell)."""
    granted, runs, control = granted_to_tables(template, "functions/worker/handler.handler")
    assert {"dynamodb:BatchGetItem", "dynamodb:PartiQLUpdate", "dynamodb:UpdateItem"} <= granted[runs]
    assert {"dynamodb:PartiQLUpdate", "dynamodb:PartiQLInsert", "dynamodb:Query"} <= granted[control]
    assert not any("PartiQLDelete" in a or "PartiQLSelect" in a for a in granted[runs] | granted[control])


def test_every_poller_may_read_and_move_reap_checks_on_aws(template: Template) -> None:
    """The reaper reads the runs at their checks (BatchGetItem), moves live runs' checks by PartiQL
    (PartiQLUpdate) and deletes settled reap tickets (BatchWriteItem): without these every reaper pass is
    refused on AWS and no dead worker's run comes back (LocalStack does not enforce IAM, so only this test
    can tell)."""
    granted, runs, _ = granted_to_tables(template, "functions/poller/handler.handler")
    assert {"dynamodb:BatchGetItem", "dynamodb:PartiQLUpdate", "dynamodb:UpdateItem"} <= granted[runs]
    assert "dynamodb:BatchWriteItem" in granted[runs]
    assert not any("PartiQLDelete" in a or "PartiQLSelect" in a for a in granted[runs])


def test_every_poller_may_make_the_writes_of_a_claim_on_aws(template: Template) -> None:
    """A claim reads its jobs' versions (BatchGetItem on the jobs table), writes the run rows and their
    reap tickets (PartiQL INSERT into the runs table) and moves the schedules (PartiQL UPDATE of the jobs
    table), all by BatchExecuteStatement, which IAM authorizes per statement: without these no poller
    claims anything on AWS (LocalStack does not enforce IAM, so only this test can tell)."""
    granted, runs, _ = granted_to_tables(template, "functions/poller/handler.handler")
    [jobs] = [name for name in resources(template, "AWS::DynamoDB::GlobalTable") if "Jobs" in name]
    assert {"dynamodb:BatchGetItem", "dynamodb:PartiQLUpdate"} <= granted[jobs]
    assert "dynamodb:PartiQLInsert" in granted[runs]
    assert not any(
        "PartiQLDelete" in a or "PartiQLSelect" in a or "PartiQLInsert" in a for a in granted[jobs]
    )


HELPER = "functions/poller/helper.handler"


def test_a_busy_minutes_helpers_run_in_a_function_of_one_vcpu_only_the_pollers_may_invoke(
    template: Template,
) -> None:
    """The fan-out (``duetime.scheduling.fan_out``): one helper function (1,769 MB: a vCPU), invoked by the
    pollers (asynchronously, never retried, dropped after a minute) and by nothing else (no rule); the pollers
    are told its name; it has the pollers' rights on the tables."""
    functions = resources(template, "AWS::Lambda::Function")
    (helper_id,) = [k for k, f in functions.items() if f["Properties"]["Handler"] == HELPER]
    helper = functions[helper_id]["Properties"]
    assert helper["MemorySize"] == 1769 and helper["Timeout"] == 300
    pollers = [f["Properties"] for f in functions.values() if f["Properties"]["Handler"] == POLLER]
    assert len(pollers) == 4
    told = [p["Environment"]["Variables"]["DUETIME_POLLER_HELPER_FUNCTION"] for p in pollers]
    assert told == [{"Ref": helper_id}] * 4
    invoking = [
        target
        for actions, targets in role_statements(template, POLLER)
        if "lambda:InvokeFunction" in actions
        for target in targets
    ]
    assert {"Fn::GetAtt": [helper_id, "Arn"]} in invoking
    assert not rules_of(template, HELPER)
    (config,) = [
        c["Properties"]
        for c in resources(template, "AWS::Lambda::EventInvokeConfig").values()
        if c["Properties"]["FunctionName"] == {"Ref": helper_id}
    ]
    assert (config["MaximumEventAgeInSeconds"], config["MaximumRetryAttempts"]) == (60, 0)
    helper_grants = [g for g in role_statements(template, HELPER) if "logs:PutLogEvents" not in g[0]]
    poller_grants = [repr(grant) for grant in role_statements(template, POLLER)]
    assert helper_grants and all(repr(grant) in poller_grants for grant in helper_grants)
    claims = [actions for actions, _ in helper_grants if "dynamodb:PartiQLInsert" in actions]
    assert claims  # it may write a claim's run rows, as the pollers may


def test_each_group_claims_at_its_share_of_what_the_pre_warmed_tables_take(template: Template) -> None:
    """Claims paced (``duetime.scheduling.claim_pace``): the tables' warm throughput, for each claim and its
    start (the runs table's 38,000 units at 3.06 a run binds, at 90%: 11,191 a second), over the 4 groups."""
    pollers = [
        f["Properties"]
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == POLLER
    ]
    paced = {p["Environment"]["Variables"]["DUETIME_CLAIMS_PER_SECOND"] for p in pollers}
    assert paced == {f"{claims_per_second_for(DEFAULT_WARM_WRITE_UNITS) / 4:.1f}"} == {"2798.2"}
    local = synth(deletion_protection="false", localstack="true", lambda_asset="build/lambda-local")[1]
    for function in resources(local, "AWS::Lambda::Function").values():
        assert "DUETIME_CLAIMS_PER_SECOND" not in function["Properties"]["Environment"]["Variables"]


def test_without_fan_out_there_is_no_helper_function() -> None:
    _, alone = synth(deletion_protection="false", poller_fan_out="false")
    functions = resources(alone, "AWS::Lambda::Function").values()
    assert not [f for f in functions if f["Properties"]["Handler"] == HELPER]
    assert all(
        "DUETIME_POLLER_HELPER_FUNCTION" not in f["Properties"]["Environment"]["Variables"] for f in functions
    )


def test_every_poller_may_advance_a_minutes_low_water_marks_on_aws(template: Template) -> None:
    """The poller moves a minute's low-water marks in one PartiQL BatchExecuteStatement (UPDATE of the
    control table), which IAM authorizes per statement as PartiQLUpdate: without it every mark stays behind
    on AWS and each poll re-reads minutes already claimed (LocalStack does not enforce IAM, so only this test
    and ``test_iam_covers_requests`` can tell)."""
    granted, _, control = granted_to_tables(template, "functions/poller/handler.handler")
    assert "dynamodb:PartiQLUpdate" in granted[control]
    assert not any("PartiQLDelete" in a or "PartiQLSelect" in a for a in granted[control])


def test_the_api_function_may_insert_a_backfills_runs_on_aws(template: Template) -> None:
    """A backfill writes its runs by PartiQL INSERT (BatchExecuteStatement, authorized per statement), and
    nothing else by PartiQL: without the grant every backfill is refused on AWS (LocalStack does not enforce
    IAM, so only this test and ``test_iam_covers_requests`` can tell)."""
    granted, runs, _ = granted_to_tables(template, "functions/api/handler.handler")
    assert "dynamodb:PartiQLInsert" in granted[runs]
    others = [a for name, actions in granted.items() if name != runs for a in actions]
    assert not any("PartiQL" in a for a in others)
    assert not any(a.startswith("dynamodb:PartiQL") and a != "dynamodb:PartiQLInsert" for a in granted[runs])


def lambda_grants(template: Template, handler: str) -> list[tuple[list[str], Any]]:
    """Each statement of the roles of the functions of ``handler`` naming a ``lambda:`` action, as its
    actions and each resource."""
    return [
        (actions, t)
        for actions, t in role_grants(template, handler)
        if any(a.startswith("lambda:") for a in actions)
    ]


def api_wake(template: Template) -> tuple[dict[str, Any], dict[str, str]]:
    """The api function's environment, and each group's poller function (logical id) by the partitions
    its rule sends."""
    [environment] = [
        f["Properties"]["Environment"]["Variables"]
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == "functions/api/handler.handler"
    ]
    targets = [r["Targets"][0] for r in rules_of(template, POLLER)]
    pollers = {json.loads(t["Input"])["partitions"]: t["Arn"]["Fn::GetAtt"] for t in targets}
    # The rules target the poller functions themselves (an alias would be a Ref, not the function's Arn).
    assert all(arn[1] == "Arn" for arn in pollers.values())
    return environment, {label: arn[0] for label, arn in pollers.items()}


def test_the_api_function_may_wake_a_quiet_group_by_invoking_its_poller(template: Template) -> None:
    """A quiet group's poller gives the lease back until the next tick (``duetime.scheduling.quiet``); a job
    written due sooner makes the api function count a wake on the group's lease item (UpdateItem on the
    control table) and invoke a poller for the group, asynchronously, with the rule's input
    (``duetime.scheduling.wake``). It names the function the rules target and the groups exactly as the rules'
    inputs do, and may invoke that one function and nothing else (LocalStack does not enforce IAM: only this
    test can tell)."""
    environment, pollers = api_wake(template)
    assert environment["DUETIME_POLLER_GROUPS"] == "0-15;16-31;32-47;48-63"
    assert sorted(environment["DUETIME_POLLER_GROUPS"].split(";")) == sorted(pollers)
    [run_seconds] = {json.loads(r["Targets"][0]["Input"])["run_seconds"] for r in rules_of(template, POLLER)}
    assert environment["DUETIME_POLLER_RUN_SECONDS"] == str(run_seconds) == "135"
    # Any group's poller may serve a woken group (the event names it): the first group's, as all are sized
    # alike. Invoked by its name, unqualified, as the rules invoke it; the role names its ARN only.
    assert environment["DUETIME_POLLER_FUNCTION_NAME"] == {"Ref": pollers["0-15"]}
    grants = lambda_grants(template, "functions/api/handler.handler")
    assert grants == [(["lambda:InvokeFunction"], {"Fn::GetAtt": [pollers["0-15"], "Arn"]})]
    granted, _, control = granted_to_tables(template, "functions/api/handler.handler")
    assert "dynamodb:UpdateItem" in granted[control]  # the wake count on the group's lease item
    assert lambda_grants(template, "functions/authorizer/handler.handler") == []


def test_the_api_function_wakes_the_groups_the_stack_deploys() -> None:
    _, template = synth(deletion_protection="false", partition_groups="0-31,32-63")
    environment, pollers = api_wake(template)
    assert sorted(pollers) == ["0-31", "32-63"]
    assert environment["DUETIME_POLLER_GROUPS"] == "0-31;32-63"
    assert environment["DUETIME_POLLER_RUN_SECONDS"] == "135"
    assert environment["DUETIME_POLLER_FUNCTION_NAME"] == {"Ref": pollers["0-31"]}
    grants = lambda_grants(template, "functions/api/handler.handler")
    assert grants == [(["lambda:InvokeFunction"], {"Fn::GetAtt": [pollers["0-31"], "Arn"]})]


def test_cdk_nag_aws_solutions_pass_or_each_suppression_names_its_reason(
    test_stack: tuple[DuetimeStack, Template],
) -> None:
    stack, template = test_stack
    assert nag_findings(stack) == []
    suppressions = [
        s
        for r in template.to_json()["Resources"].values()
        for s in r.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
    ]
    assert suppressions and all(len(s["reason"]) > 30 for s in suppressions)


def test_cfn_lint_passes_on_the_template(template: Template, tmp_path: Path) -> None:
    cfn_lint(template, tmp_path)


def cfn_lint(template: Template, tmp_path: Path) -> None:
    path = tmp_path / "Duetime.template.json"
    path.write_text(json.dumps(template.to_json()))
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("cfn-lint")),
            "--config-file",
            str(ROOT / "infra/cdk/.cfnlintrc.yaml"),
            str(path),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def nag_findings(stack: DuetimeStack) -> list[Any]:
    annotations = Annotations.from_stack(stack)
    pattern = Match.string_like_regexp("AwsSolutions-.*")
    return [*annotations.find_error("*", pattern), *annotations.find_warning("*", pattern)]


# --- LocalStack deployments (-c localstack=true) ---------------------------------------------------------


def x86_64_asset(directory: Path) -> Path:
    """A finished asset as scripts/build_lambda.sh leaves it, with a binary wheel built for x86_64."""
    wheel = directory / "pydantic_core-2.41.5.dist-info" / "WHEEL"
    wheel.parent.mkdir(parents=True)
    wheel.write_text("Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp313-cp313-manylinux_2_17_x86_64\n")
    (directory / ".built").touch()
    return directory


# What LocalStack community cannot create or never runs, and what goes with it: the TeamAuthorizer and its
# function (role, policy, log group, API Gateway's permission to invoke it) and the dashboard. (The worker's
# scheduled scaling is off by default; the prescaler, which sets provisioned concurrency with the Lambda
# API, stays.)
LEFT_OUT_ON_LOCALSTACK = {
    "AWS::ApiGateway::Authorizer": 1,
    "AWS::CloudWatch::Dashboard": 1,
    "AWS::Lambda::Function": 1,
    "AWS::IAM::Role": 1,
    "AWS::IAM::Policy": 1,
    "AWS::Logs::LogGroup": 1,
    "AWS::Lambda::Permission": 1,
}


def test_a_localstack_stack_leaves_out_only_what_localstack_cannot_create(
    template: Template, tmp_path: Path
) -> None:
    asset = x86_64_asset(tmp_path / "lambda-local")
    stack, local = synth(deletion_protection="false", localstack="true", lambda_asset=str(asset))
    for kind in (
        "AWS::ApiGateway::Authorizer",
        "AWS::CloudWatch::Dashboard",
        "AWS::ApplicationAutoScaling::ScalableTarget",
    ):
        local.resource_count_is(kind, 0)

    def counts(t: Template) -> dict[str, int]:
        kinds = [r["Type"] for r in t.to_json()["Resources"].values()]
        return {kind: kinds.count(kind) for kind in kinds}

    expected = {k: n - LEFT_OUT_ON_LOCALSTACK.get(k, 0) for k, n in counts(template).items()}
    assert counts(local) == {k: n for k, n in expected.items() if n}
    # Everything else is there: tables, queues, pollers and their rules, the worker and its event source, the
    # prescaler and its rule, the API with its seven methods (healthz, openapi.json, the proxy, the console's
    # two, the root and its catch-all) and stage, the alarms and the topic.
    for kind, count in {
        "AWS::DynamoDB::GlobalTable": 3,
        "AWS::SQS::Queue": 2,
        "AWS::Lambda::Function": 10,  # 4 pollers, helper, worker, api, prescaler, gate, reconciler
        "Custom::DuetimeDeployCheck": 1,
        "AWS::Events::Rule": 6,
        "AWS::Lambda::EventSourceMapping": 1,
        "AWS::ApiGateway::RestApi": 1,
        "AWS::ApiGateway::Method": 7,
        "AWS::ApiGateway::Stage": 1,
        "AWS::CloudWatch::Alarm": 18,  # 9, and 9 absence alarms (issue 50)
        "AWS::SNS::Topic": 1,
    }.items():
        local.resource_count_is(kind, count)
    methods = [m["Properties"] for m in resources(local, "AWS::ApiGateway::Method").values()]
    assert {m.get("AuthorizationType", "NONE") for m in methods} == {"NONE"}  # the api function checks
    (rule,) = rules_of(local, PRESCALER)  # LocalStack's Lambda keeps provisioned concurrency configs
    assert rule["ScheduleExpression"] == "rate(5 minutes)"
    for function in resources(local, "AWS::Lambda::Function").values():
        assert function["Properties"]["Architectures"] == ["x86_64"]  # what the asset is built for
    # LocalStack's CloudFormation does not apply DynamoDB warm throughput (storage.py): none is set.
    assert set(warm_throughput(local).values()) == {None}
    # LocalStack cannot move an alias to a new version in place (workers.py): there the alias is named
    # after its version, so an update replaces it by one of another name; on AWS it is "live".
    (alias,) = resources(local, "AWS::Lambda::Alias").values()
    version = alias["Properties"]["FunctionVersion"]
    assert alias["Properties"]["Name"] == {"Fn::Join": ["-", ["live", version]]}
    assert [a["Properties"]["Name"] for a in resources(template, "AWS::Lambda::Alias").values()] == ["live"]
    assert nag_findings(stack) == []
    cfn_lint(local, tmp_path)


def test_localstack_settings_are_validated(tmp_path: Path) -> None:
    local = StackConfig.model_validate({"localstack": "true"})
    assert (local.team_authorizer, local.dashboard, local.scheduled_scaling) == (False, False, False)
    assert local.forecast_scaling is True
    default = StackConfig()
    assert (default.team_authorizer, default.dashboard, default.scheduled_scaling) == (True, True, False)
    assert default.forecast_scaling is True
    with pytest.raises(ValidationError, match="LocalStack community"):
        StackConfig.model_validate({"localstack": "true", "scheduled_scaling": "true"})
    with pytest.raises(ValidationError, match="LocalStack community"):
        StackConfig.model_validate(
            {"localstack": "true", "scheduled_scaling": "true", "forecast_scaling": "false"}
        )
    with pytest.raises(ValidationError, match="localstack"):
        StackConfig.model_validate({"localstack": "ture"})
    # Warm throughput: the defaults are dropped on LocalStack; one given is refused, naming it.
    assert (local.warm_write_units, local.warm_read_units) == ({}, {})
    assert default.warm_write_units == DEFAULT_WARM_WRITE_UNITS
    for key in ("warm_write_units", "warm_read_units"):
        with pytest.raises(ValidationError, match=f"{key} sets DynamoDB warm throughput, which LocalStack"):
            StackConfig.model_validate({"localstack": "true", key: "runs:40000"})
    assert (
        StackConfig.model_validate({"localstack": "true", "warm_write_units": "runs:0"}).warm_write_units
        == {}
    )
    with pytest.raises(ValidationError, match=r"no finished Lambda build \(no \.built\)"):
        StackConfig.model_validate({"lambda_asset": str(tmp_path / "lambda-local")})
    assert StackConfig.model_validate({"lambda_asset": "build/lambda"}).lambda_asset == ROOT / "build/lambda"
    assert StackConfig().lambda_architecture == "arm64"  # build/lambda's wheels
    asset = str(x86_64_asset(tmp_path / "lambda-local"))
    assert StackConfig.model_validate({"lambda_asset": asset}).lambda_architecture == "x86_64"
    with pytest.raises(ValidationError, match="holds wheels for x86_64, but lambda_architecture is arm64"):
        StackConfig.model_validate({"lambda_asset": asset, "lambda_architecture": "arm64"})
    with pytest.raises(ValidationError, match="holds wheels for arm64, but lambda_architecture is x86_64"):
        StackConfig.model_validate({"lambda_architecture": "x86_64"})


def test_the_worker_may_assume_only_roles_that_opt_in_by_name_and_call_no_target_itself(
    template: Template,
) -> None:
    """AWS targets are called under the team's role (duetime.domain.aws_targets): the worker's own role may
    assume roles named duetime-target-* in any account, and holds no right to call a function, queue, topic,
    bus or state machine of anyone's: a team cannot have duetime act with the worker's rights."""
    grants = role_grants(template, "functions/worker/handler.handler")
    assuming = [(actions, target) for actions, target in grants if any(a.startswith("sts:") for a in actions)]
    assert len(assuming) == 1
    actions, target = assuming[0]
    assert actions == ["sts:AssumeRole", "sts:TagSession"]
    assert target == TARGET_ROLES
    forbidden = ("lambda:Invoke", "states:StartExecution", "events:PutEvents")
    assert not any(a.startswith(forbidden) for actions, _ in grants for a in actions)
    topics = [t for actions, t in grants if "sns:Publish" in actions]
    queues = [t for actions, t in grants if "sqs:SendMessage" in actions]
    own = [t for t in topics + queues if isinstance(t, dict) and set(t) <= {"Ref", "Fn::GetAtt"}]
    assert len(own) == len(topics + queues) == 2, (topics, queues)  # the stack's alerts topic and run queue


TARGET_ROLES = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::*:role/duetime-target-*"]]}
API_HANDLER = "functions/api/handler.handler"
WORKER = "functions/worker/handler.handler"


def test_the_worker_may_tag_sessions_only_on_the_roles_it_may_assume(template: Template) -> None:
    """The worker's sessions carry the team's tag (duetime:team), which needs sts:TagSession: on the
    duetime-target-* roles only, never on any role (issue 33, item 5)."""
    tagging = [target for actions, target in role_grants(template, WORKER) if "sts:TagSession" in actions]
    assert tagging == [TARGET_ROLES]


def worker_role_id(template: Template) -> str:
    (worker,) = [
        f
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == WORKER
    ]
    role: str = worker["Properties"]["Role"]["Fn::GetAtt"][0]
    return role


def test_the_api_may_take_the_workers_role_alone_to_check_a_roles_trust_as_the_worker(
    template: Template,
) -> None:
    """Customers' trust policies name the worker's role: the API checks a role being registered from a
    session of it (duetime.adapters.aws.role_trust_probe), so the worker's role trusts the API's role, the API
    may assume that role and no other, and is told its ARN. On AWS the check is on; only LocalStack's stack
    turns it off (its STS lets any external id in)."""
    worker_role = worker_role_id(template)
    assuming = [(a, t) for a, t in role_grants(template, API_HANDLER) if any(x.startswith("sts:") for x in a)]
    assert assuming == [(["sts:AssumeRole"], {"Fn::GetAtt": [worker_role, "Arn"]})]
    (api,) = [
        f
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == API_HANDLER
    ]
    api_role = api["Properties"]["Role"]["Fn::GetAtt"][0]
    trust = resources(template, "AWS::IAM::Role")[worker_role]["Properties"]["AssumeRolePolicyDocument"]
    trusted = [s["Principal"] for s in trust["Statement"]]
    assert {"Service": "lambda.amazonaws.com"} in trusted
    assert {"AWS": {"Fn::GetAtt": [api_role, "Arn"]}} in trusted
    variables = api["Properties"]["Environment"]["Variables"]
    assert variables["DUETIME_WORKER_ROLE_ARN"] == {"Fn::GetAtt": [worker_role, "Arn"]}
    assert variables["DUETIME_AWS_ROLE_TRUST_UNCHECKED"] == "false"


def test_the_ports_an_installation_adds_for_targets_reach_every_function_that_calls_or_checks_them(
    template: Template,
) -> None:
    """The API checks a job's URLs, the workers and the pollers (notification webhooks) call them: each
    function of the shared code gets ``allowed_target_ports``; by default none is set (80, 443 and
    1024-65535 only)."""

    def ports_of(stack: Template) -> set[str | None]:
        return {
            function["Properties"]["Environment"]["Variables"].get("DUETIME_ALLOWED_TARGET_PORTS")
            for function in resources(stack, "AWS::Lambda::Function").values()
            if "DUETIME_JOBS_TABLE" in function["Properties"].get("Environment", {}).get("Variables", {})
        }

    assert ports_of(template) == {None}
    _, more = synth(deletion_protection="false", allowed_target_ports="25,8")
    assert ports_of(more) == {"8,25"}


@pytest.mark.parametrize("value", ["70000", "0", "smtp", "30-20"])
def test_a_port_setting_that_names_no_port_is_refused_naming_the_key(value: str, tmp_path: Path) -> None:
    (tmp_path / ".built").touch()
    with pytest.raises(ContextError, match="allowed_target_ports"):
        StackConfig.from_mapping({"lambda_asset": str(tmp_path), "allowed_target_ports": value})


@pytest.mark.parametrize(
    ("value", "ports"), [("25", [25]), (25, [25]), ([25, 8], [8, 25]), ("20-21", [20, 21])]
)
def test_the_port_setting_is_read_from_the_command_line_and_from_cdk_json(
    value: Any, ports: list[int], tmp_path: Path
) -> None:
    (tmp_path / ".built").touch()
    config = StackConfig.from_mapping({"lambda_asset": str(tmp_path), "allowed_target_ports": value})
    assert config.allowed_target_ports == ports


def test_aws_targets_without_a_role_are_refused_outside_localstack() -> None:
    with pytest.raises(ContextError, match="aws_targets_without_role is for LocalStack only"):
        StackConfig.from_mapping({"aws_targets_without_role": "true"})


def test_private_targets_outside_localstack_need_a_second_flag_that_says_so(tmp_path: Path) -> None:
    """allow_private_targets on AWS lets every team's jobs call loopback (the Lambda runtime API) and the
    functions' private networks: refused unless allow_private_targets_on_aws confirms it; on LocalStack
    the one flag does."""
    (tmp_path / ".built").touch()  # a finished build, as far as the settings can tell: no synth here
    built = {"lambda_asset": str(tmp_path)}
    with pytest.raises(ContextError, match="say so with allow_private_targets_on_aws=true as well"):
        StackConfig.from_mapping({**built, "allow_private_targets": "true"})
    with pytest.raises(ContextError, match="confirms allow_private_targets, which is not set"):
        StackConfig.from_mapping({**built, "allow_private_targets_on_aws": "true"})
    both = {"allow_private_targets": "true", "allow_private_targets_on_aws": "true"}
    assert StackConfig.from_mapping({**built, **both}).allow_private_targets
    assert StackConfig.from_mapping(
        {**built, "allow_private_targets": "true", "localstack": "true"}
    ).allow_private_targets
    assert not StackConfig.from_mapping(built).allow_private_targets


def test_what_api_gateway_answers_by_itself_is_in_the_apis_error_shape(template: Template) -> None:
    """API Gateway's own answers (the authorizer's 401 and 403, an unknown path or method, its throttle, a
    body too large, any other 4xx or 5xx) carry {"error": {"code", "message"}} as the api function's do,
    rendered as API Gateway renders the template ($context.error.messageString: the message as JSON text)."""
    from duetime.api.schemas import ErrorOut

    responses = {
        r["Properties"]["ResponseType"]: r["Properties"]
        for r in resources(template, "AWS::ApiGateway::GatewayResponse").values()
    }
    assert {
        "DEFAULT_4XX",
        "DEFAULT_5XX",
        "UNAUTHORIZED",
        "ACCESS_DENIED",
        "MISSING_AUTHENTICATION_TOKEN",
    } <= set(responses)
    for kind, response in responses.items():
        template_text = response["ResponseTemplates"]["application/json"]
        rendered = template_text.replace("$context.error.messageString", json.dumps('say "why"\\n'))
        shown = ErrorOut.model_validate_json(rendered)
        assert shown.error.code and shown.error.message == 'say "why"\\n', kind
    unserved = responses["MISSING_AUTHENTICATION_TOKEN"]  # a method API Gateway serves on no path: TRACE
    assert unserved["StatusCode"] == "405"
    assert unserved["ResponseParameters"] == {
        "gatewayresponse.header.Allow": "'DELETE, GET, PATCH, POST, PUT'"
    }
    assert responses["UNAUTHORIZED"]["StatusCode"] == "401"
    assert responses["THROTTLED"]["ResponseParameters"] == {"gatewayresponse.header.Retry-After": "'1'"}


def test_every_function_changes_only_after_the_deploy_check_allowed_the_release(template: Template) -> None:
    """The check (docs/guide/upgrading.md) is a custom resource whose properties change with the release and
    the build, so every deploy of new code asks it; every other function, the worker's alias and event
    source, the pollers' rules and the API depend on it, so CloudFormation updates them only after it
    answered, and a refusal rolls the stack back before any of them changes."""
    (check_id, check) = next(iter(template.find_resources("Custom::DuetimeDeployCheck").items()))
    assert check["Properties"]["Release"] == duetime.__version__ and check["Properties"]["Build"]
    (gate_id,) = template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": DEPLOY_GATE}})
    assert check["Properties"]["ServiceToken"] == {"Fn::GetAtt": [gate_id, "Arn"]}
    gated = {
        name: resource
        for kind in (
            "AWS::Lambda::Function",
            "AWS::Lambda::Alias",
            "AWS::Lambda::EventSourceMapping",
            "AWS::Events::Rule",
            "AWS::ApiGateway::RestApi",
        )
        for name, resource in resources(template, kind).items()
        if name != gate_id
    }
    assert gated and all(check_id in r.get("DependsOn", []) for r in gated.values()), [
        n for n, r in gated.items() if check_id not in r.get("DependsOn", [])
    ]


def test_absence_alarms_fire_on_missing_data_only_where_absence_is_the_failure(template: Template) -> None:
    """The reconciler's alarms, as ``duetime.domain.alarms`` defines them (the local evaluator reads the same
    list): on this installation's metrics, the heartbeat breaching on missing data, the others not."""
    alarms = {
        a["Properties"]["AlarmDescription"]: a["Properties"]
        for a in resources(template, "AWS::CloudWatch::Alarm").values()
    }
    for definition in RECONCILER_ALARMS:
        alarm = alarms[definition.description]
        assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == (
            "duetime",
            definition.metric,
            definition.statistic,
        )
        assert alarm["Dimensions"] == [
            {"Name": "installation", "Value": {"Ref": "AWS::StackName"}},
            {"Name": "service", "Value": "reconciler"},
        ]
        assert (alarm["Threshold"], alarm["ComparisonOperator"], alarm["Period"]) == (
            definition.threshold,
            definition.comparison.value,
            60,
        )
        assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (
            definition.evaluation_periods,
            definition.datapoints_to_alarm,
        )
        assert alarm["TreatMissingData"] == definition.missing.value
    heartbeat = alarms["the reconciler has not reported for 3 minutes: nothing watches the schedule"]
    assert (heartbeat["TreatMissingData"], heartbeat["ComparisonOperator"]) == (
        "breaching",
        "LessThanThreshold",
    )


def test_every_function_publishes_its_metrics_under_the_stacks_installation(template: Template) -> None:
    for function in resources(template, "AWS::Lambda::Function").values():
        variables = function["Properties"]["Environment"]["Variables"]
        assert variables["DUETIME_INSTALLATION"] == {"Ref": "AWS::StackName"}


def test_dynamodb_throttles_watch_every_table_and_each_index(template: Template) -> None:
    watched = set()
    for alarm in resources(template, "AWS::CloudWatch::Alarm").values():
        for query in alarm["Properties"].get("Metrics", []):
            metric = query.get("MetricStat", {}).get("Metric", {})
            if metric.get("Namespace") == "AWS/DynamoDB":
                dims = {d["Name"]: d["Value"] for d in metric["Dimensions"]}
                table = dims["TableName"]["Ref"]
                watched.add(
                    (
                        re.sub(r"[0-9A-F]{8}$", "", table),
                        dims.get("GlobalSecondaryIndexName"),
                        metric["MetricName"],
                    )
                )
    expected = {
        (table, index, name)
        for table, index in [
            ("StorageJobs", None),
            ("StorageRuns", None),
            ("StorageControl", None),
            ("StorageJobs", "due"),
            ("StorageJobs", "team-jobs"),
            ("StorageRuns", "reap"),
        ]
        for name in ("ReadThrottleEvents", "WriteThrottleEvents")
    }
    assert watched == expected


def test_the_reconciler_reads_the_due_and_reap_indexes_and_writes_only_its_reports(
    template: Template,
) -> None:
    """Least privilege (LocalStack does not enforce IAM: only this test can tell): Query on the two indexes,
    BatchGetItem on the runs (the runs a reap entry names) and control tables (low-water marks), PutItem and
    Query on the control table (its reports), nothing else; its rule ticks every minute."""
    tables = resources(template, "AWS::DynamoDB::GlobalTable")
    (jobs,) = [name for name in tables if "Jobs" in name]
    (runs,) = [name for name in tables if "Runs" in name]
    (control,) = [name for name in tables if "Control" in name]
    own = [
        (actions, resources_)
        for actions, resources_ in role_statements(template, RECONCILER)
        if not all(a.startswith(("logs:", "xray:")) for a in actions)
    ]
    arn = {name: {"Fn::GetAtt": [name, "Arn"]} for name in (jobs, runs, control)}
    assert own == [
        (["dynamodb:Query"], [{"Fn::Join": ["", [arn[jobs], "/index/due"]]}]),
        (["dynamodb:Query"], [{"Fn::Join": ["", [arn[runs], "/index/reap"]]}]),
        (["dynamodb:BatchGetItem"], [arn[runs], arn[control]]),
        (["dynamodb:PutItem", "dynamodb:Query"], [arn[control]]),
    ]
    (rule,) = rules_of(template, RECONCILER)
    assert rule["ScheduleExpression"] == "rate(1 minute)"


@pytest.fixture(scope="module")
def provisioned_tables() -> Template:
    return synth(deletion_protection="false", capacity_mode="provisioned", worker_memory_mb="256")[1]


def test_capacity_mode_provisioned_makes_every_table_provisioned_under_auto_scaling(
    provisioned_tables: Template,
) -> None:
    for table in resources(provisioned_tables, "AWS::DynamoDB::GlobalTable").values():
        props = table["Properties"]
        assert props["BillingMode"] == "PROVISIONED"
        scaling = props["WriteProvisionedThroughputSettings"]["WriteCapacityAutoScalingSettings"]
        assert (scaling["MinCapacity"], scaling["MaxCapacity"]) == (1, 40_000)
        assert scaling["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] == 70
        read = props["Replicas"][0]["ReadProvisionedThroughputSettings"]["ReadCapacityAutoScalingSettings"]
        assert read["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] == 70


def test_with_provisioned_tables_the_prescaler_may_switch_them_and_keep_its_log_and_nothing_else(
    provisioned_tables: Template,
) -> None:
    (prescaler_id,) = function_ids(provisioned_tables, PRESCALER)
    variables = resources(provisioned_tables, "AWS::Lambda::Function")[prescaler_id]["Properties"][
        "Environment"
    ]["Variables"]
    assert variables["DUETIME_TABLE_CAPACITY_MODE"] == "provisioned"
    assert json.loads(variables["DUETIME_TABLE_MODE_POLICY"]) == {"busy_runs_per_minute": 20_000}
    statements = role_statements(provisioned_tables, PRESCALER)
    switching = [targets for actions, targets in statements if "dynamodb:UpdateTable" in actions]
    assert len(switching) == 1 and len(switching[0]) == 3  # the three tables, by ARN
    log = [targets for actions, targets in statements if "dynamodb:PutItem" in actions]
    assert len(log) == 1 and len(log[0]) == 1  # the control table only


def test_by_default_the_tables_are_on_demand_and_the_prescaler_switches_none(template: Template) -> None:
    (prescaler_id,) = function_ids(template, PRESCALER)
    variables = resources(template, "AWS::Lambda::Function")[prescaler_id]["Properties"]["Environment"][
        "Variables"
    ]
    assert "DUETIME_TABLE_CAPACITY_MODE" not in variables
    assert not [a for a, _ in role_statements(template, PRESCALER) if "dynamodb:UpdateTable" in a]


def test_the_worker_memory_is_a_setting(provisioned_tables: Template, template: Template) -> None:
    def worker_memory(t: Template) -> int:
        (worker_id,) = function_ids(t, "functions/worker/handler.handler")
        return int(resources(t, "AWS::Lambda::Function")[worker_id]["Properties"]["MemorySize"])

    assert (worker_memory(template), worker_memory(provisioned_tables)) == (1024, 256)


def test_provisioned_tables_without_the_prescaler_are_refused_naming_the_setting() -> None:
    with pytest.raises(ContextError, match="capacity_mode=provisioned needs forecast_scaling"):
        StackConfig.from_context(
            cdk.App(context={"capacity_mode": "provisioned", "forecast_scaling": "false"}).node
        )


def test_provisioned_tables_on_localstack_are_refused_naming_why() -> None:
    with pytest.raises(ContextError, match="LocalStack's CloudFormation cannot create"):
        StackConfig.from_context(cdk.App(context={"capacity_mode": "provisioned", "localstack": "true"}).node)
