"""The stack's settings come from CDK context (cdk.json and -c key=value), reach the template, and are refused
by name when unknown or bad; the stack is bound to the caller's account when the CDK CLI found one.

The in-process tests build the app as the CDK CLI runs it; the end-to-end ones run `make synth` and the CDK
CLI itself (infra/cdk/cdk.sh), offline, with no AWS credentials.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")

import aws_cdk as cdk
from aws_cdk.assertions import Template

ROOT = Path(__file__).resolve().parents[2]
CDK_DIR = ROOT / "infra" / "cdk"
sys.path.insert(0, str(CDK_DIR))

from duetime_cdk.config import ContextError, StackConfig  # noqa: E402
from duetime_cdk.stack import deployment_environment, duetime_app  # noqa: E402

# The README's throwaway stack, with an alert address and two partition groups, as -c gives them: strings.
THROWAWAY = {
    "stack_name": "DuetimeTest",
    "deletion_protection": "false",
    "alert_email": "oncall@example.com",
    "partition_groups": "0-31,32-63",
}
CDK_JSON_CONTEXT: dict[str, Any] = json.loads((CDK_DIR / "cdk.json").read_text())["context"]


def assert_is_the_throwaway_stack(template: Mapping[str, Any]) -> None:
    """Tables deleted with the stack, alerts mailed to THROWAWAY's address, one rule per THROWAWAY group
    (and the prescaler's)."""
    resources = template["Resources"].values()

    def of_type(kind: str) -> list[dict[str, Any]]:
        return [r for r in resources if r["Type"] == kind]

    tables = of_type("AWS::DynamoDB::GlobalTable")
    assert len(tables) == 3
    assert {t["DeletionPolicy"] for t in tables} == {"Delete"}
    assert {t["Properties"]["Replicas"][0]["DeletionProtectionEnabled"] for t in tables} == {False}
    subscriptions = [
        (s["Properties"]["Protocol"], s["Properties"]["Endpoint"]) for s in of_type("AWS::SNS::Subscription")
    ]
    assert subscriptions == [("email", "oncall@example.com")]
    rules = of_type("AWS::Events::Rule")
    poller_rules = [r for r in rules if "Input" in r["Properties"]["Targets"][0]]
    groups = sorted(json.loads(r["Properties"]["Targets"][0]["Input"])["partitions"] for r in poller_rules)
    assert groups == ["0-31", "32-63"]
    other_rules = sorted(r["Properties"]["ScheduleExpression"] for r in rules if r not in poller_rules)
    assert other_rules == ["rate(1 minute)", "rate(5 minutes)"]  # reconciler; forecast_scaling (default)
    assert not of_type("AWS::ApplicationAutoScaling::ScalableTarget")


def app_with(context: dict[str, Any], environ: dict[str, str]) -> tuple[cdk.Stack, Template]:
    """The app as the CDK CLI runs it: cdk.json's context overridden by the -c pairs, and its environment."""
    app = cdk.App(context={**CDK_JSON_CONTEXT, **context})
    try:
        stack = duetime_app(app, environ)
    except ContextError as exc:
        pytest.fail(f"{exc}\n`make test` builds the Lambda asset (make lambda-assets)", pytrace=False)
    app.synth()
    return stack, Template.from_stack(stack)


# --- in process -----------------------------------------------------------------------------------------


def test_context_from_the_command_line_reaches_the_template() -> None:
    environ = {"CDK_DEFAULT_ACCOUNT": "123456789012", "CDK_DEFAULT_REGION": "eu-west-1"}
    stack, template = app_with(THROWAWAY, environ)
    assert stack.stack_name == "DuetimeTest"
    assert_is_the_throwaway_stack(template.to_json())
    assert (stack.account, stack.region) == ("123456789012", "eu-west-1")  # the credentials' environment


def test_a_hot_standby_of_pollers_is_a_flag_that_reaches_every_poller() -> None:
    handler = {"Properties": {"Handler": "functions/poller/handler.handler"}}
    for flag, expected in (("false", "false"), ("true", "true")):
        _, template = app_with({**THROWAWAY, "poller_hot_standby": flag}, {})
        pollers = template.find_resources("AWS::Lambda::Function", handler).values()
        variables = {
            p["Properties"]["Environment"]["Variables"]["DUETIME_POLLER_HOT_STANDBY"] for p in pollers
        }
        assert variables == {expected}


def test_resting_quiet_groups_is_a_flag_that_reaches_every_poller_and_the_api() -> None:
    poller = {"Properties": {"Handler": "functions/poller/handler.handler"}}
    api = {"Properties": {"Handler": "functions/api/handler.handler"}}
    for flag, expected in (("false", "false"), ("true", "true")):
        _, template = app_with({**THROWAWAY, "poller_rest_when_quiet": flag}, {})
        pollers = list(template.find_resources("AWS::Lambda::Function", poller).values())
        apis = list(template.find_resources("AWS::Lambda::Function", api).values())
        assert pollers and len(apis) == 1
        functions = [*pollers, *apis]
        variables = {
            f["Properties"]["Environment"]["Variables"]["DUETIME_POLLER_REST_WHEN_QUIET"] for f in functions
        }
        assert variables == {expected}


def test_without_an_account_the_stack_is_environment_agnostic() -> None:
    # The CLI names a region even without credentials (us-east-1); only an account binds the stack.
    assert deployment_environment({"CDK_DEFAULT_REGION": "us-east-1"}) is None
    assert deployment_environment({}) is None
    bound = deployment_environment({"CDK_DEFAULT_ACCOUNT": "123456789012", "CDK_DEFAULT_REGION": "eu-west-1"})
    assert bound is not None and (bound.account, bound.region) == ("123456789012", "eu-west-1")


def test_cdk_json_holds_settings_only_and_they_are_the_defaults() -> None:
    assert StackConfig.from_mapping(CDK_JSON_CONTEXT) == StackConfig()


def test_an_unknown_context_key_fails_the_synth_naming_it() -> None:
    with pytest.raises(
        ContextError, match=r"unknown CDK context key 'delection_protection'; the settings are: "
    ):
        StackConfig.from_mapping({"delection_protection": "false"})
    with pytest.raises(ContextError, match=r"unknown CDK context keys 'alert_mail', 'stackname'"):
        StackConfig.from_mapping({"stackname": "DuetimeTest", "alert_mail": "a@example.com"})


def test_the_cdks_own_context_keys_are_left_to_the_cdk() -> None:
    cdk_own = {
        "@aws-cdk/core:newStyleStackSynthesis": True,
        "@aws-cdk-containers/ecs-service-extensions:enableDefaultLogDriver": True,
        "aws:cdk:enable-path-metadata": True,
        "aws:cdk:bundling-stacks": ["**"],
        "aws-cdk:enableDiffNoFail": True,
        "cdk-migrate": True,
        "acknowledged-issue-numbers": [32775],
        "cli-telemetry": False,
    }
    assert StackConfig.from_mapping(cdk_own) == StackConfig()


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("deletion_protection", "ture", "valid boolean"),
        ("forecast_scaling", "yes please", "valid boolean"),
        ("stack_name", "Duetime_Test", "CloudFormation stack name"),
        ("stack_name", "1Duetime", "CloudFormation stack name"),
        ("stack_name", "D" * 129, "CloudFormation stack name"),
        ("alert_email", "oncall", "e-mail address"),
        ("peak_scale_up", "23:55", "schedule expression"),
        ("worker_batch_size", "11", "less than or equal to 10"),
        ("worker_min_pollers", "1", "greater than or equal to 2"),
        ("worker_max_pollers", "1", "greater than or equal to 2"),
        ("partition_groups", "0-31", "cover partitions 0-63"),
        ("partition_groups", "12", "must divide 64"),
    ],
)
def test_a_bad_value_fails_the_synth_naming_the_setting(key: str, value: str, why: str) -> None:
    with pytest.raises(ContextError, match=rf"^bad CDK context:\n  {key}: .*{why}.*\(given: '{value}'\)"):
        StackConfig.from_mapping({key: value})


def test_scheduled_scaling_and_forecast_scaling_are_exclusive_and_the_error_names_both() -> None:
    for context in ({"scheduled_scaling": "true"}, {"scheduled_scaling": "true", "forecast_scaling": "true"}):
        with pytest.raises(ContextError) as refused:
            StackConfig.from_mapping(context)
        message = str(refused.value)
        assert message.startswith("bad CDK context:\n  ")
        assert "forecast_scaling" in message and "scheduled_scaling" in message
    chosen = StackConfig.from_mapping({"scheduled_scaling": "true", "forecast_scaling": "false"})
    assert (chosen.scheduled_scaling, chosen.forecast_scaling) == (True, False)
    default = StackConfig.from_mapping({})
    assert (default.scheduled_scaling, default.forecast_scaling) == (False, True)
    neither = StackConfig.from_mapping({"forecast_scaling": "false"})
    assert (neither.scheduled_scaling, neither.forecast_scaling) == (False, False)


def test_the_scaling_mode_reaches_the_template() -> None:
    prescaler = "functions/prescaler/handler.handler"
    _, scheduled = app_with({**THROWAWAY, "scheduled_scaling": "true", "forecast_scaling": "false"}, {})
    assert len(scheduled.find_resources("AWS::ApplicationAutoScaling::ScalableTarget")) == 1
    assert scheduled.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": prescaler}}) == {}


def test_worker_min_pollers_from_the_command_line_reaches_the_event_source() -> None:
    # cdk.json sets worker_max_concurrency (to its default), which provisioned mode leaves out.
    _, template = app_with({**THROWAWAY, "worker_min_pollers": "20"}, {})
    (mapping,) = template.find_resources("AWS::Lambda::EventSourceMapping").values()
    assert mapping["Properties"]["ProvisionedPollerConfig"] == {"MinimumPollers": 20, "MaximumPollers": 200}
    assert "ScalingConfig" not in mapping["Properties"]
    assert StackConfig.from_mapping({"worker_min_pollers": None}).worker_min_pollers is None  # standard


def test_a_number_of_partition_groups_is_that_many_equal_ranges() -> None:
    sixteen = StackConfig.from_mapping({"partition_groups": "16"}).partition_groups
    assert sixteen == [list(range(first, first + 4)) for first in range(0, 64, 4)]
    assert StackConfig.from_mapping({"partition_groups": "4"}) == StackConfig()  # the default groups
    assert StackConfig.from_mapping({"partition_groups": "1"}).partition_groups == [list(range(64))]


def test_settings_are_parsed_from_the_strings_the_command_line_gives() -> None:
    config = StackConfig.from_mapping(
        {**THROWAWAY, "worker_max_concurrency": "50", "peak_scale_up": "rate(1 day)"}
    )
    assert (config.stack_name, config.deletion_protection, config.alert_email) == (
        "DuetimeTest",
        False,
        "oncall@example.com",
    )
    assert (config.partition_groups, config.worker_max_concurrency) == (
        [list(range(32)), list(range(32, 64))],
        50,
    )
    assert StackConfig.from_mapping({"alert_email": None}).alert_email is None  # null: the default


# --- the CDK CLI, end to end ----------------------------------------------------------------------------


def offline_environment(tmp_path: Path) -> dict[str, str]:
    """This process's environment without AWS credentials or settings (the tests' own, `make test`'s endpoint
    variables), so the CLI finds no account; no CLI telemetry or version check; no outer make's flags."""
    dropped = ("AWS_", "CDK_", "MAKE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped) and k not in ("MFLAGS",)}
    return {
        **env,
        "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "CDK_DISABLE_VERSION_CHECK": "true",
        "CDK_DISABLE_CLI_TELEMETRY": "true",
    }


def run(argv: list[str], cwd: Path, tmp_path: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    if shutil.which("node") is None:
        pytest.skip("the CDK CLI needs Node.js")
    return subprocess.run(
        argv, cwd=cwd, env=offline_environment(tmp_path), capture_output=True, text=True, timeout=timeout
    )


def test_make_synth_builds_the_throwaway_stack_the_readme_deploys(tmp_path: Path) -> None:
    assembly = tmp_path / "cdk.out"
    cdk_args = " ".join(f"-c {key}={value}" for key, value in THROWAWAY.items())
    result = run(
        ["make", "--no-print-directory", "synth", f"CDK_ARGS={cdk_args}", f"CDK_OUT={assembly}"],
        ROOT,
        tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    manifest = json.loads((assembly / "manifest.json").read_text())
    stacks = {k: a for k, a in manifest["artifacts"].items() if a["type"] == "aws:cloudformation:stack"}
    assert list(stacks) == ["DuetimeTest"]
    assert stacks["DuetimeTest"]["environment"] == "aws://unknown-account/unknown-region"  # no credentials
    assert_is_the_throwaway_stack(json.loads((assembly / "DuetimeTest.template.json").read_text()))
    assert f"{assembly} holds DuetimeTest (aws://unknown-account/unknown-region)" in result.stdout


def test_a_bad_value_given_to_make_synth_fails_it_naming_the_setting(tmp_path: Path) -> None:
    result = run(
        [
            "make",
            "--no-print-directory",
            "synth",
            "CDK_ARGS=-c deletion_protection=ture",
            f"CDK_OUT={tmp_path / 'out'}",
        ],
        ROOT,
        tmp_path,
    )
    assert result.returncode != 0
    assert "deletion_protection: Input should be a valid boolean" in result.stderr
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_context_in_cdk_json_reaches_the_app_through_the_cli(tmp_path: Path) -> None:
    # A project of its own whose cdk.json runs duetime's app with a key that is no setting: the CLI hands
    # cdk.json's context to the app, which refuses the key by name.
    project = tmp_path / "project"
    project.mkdir()
    app = f"{ROOT / '.venv' / 'bin' / 'python'} {CDK_DIR / 'app.py'}"
    (project / "cdk.json").write_text(json.dumps({"app": app, "context": {"not_a_setting": 1}}))
    cli = CDK_DIR / "node_modules" / ".bin" / "cdk"
    if not cli.exists():
        pytest.skip("the CDK CLI is not installed (infra/cdk/cdk.sh installs it at the first make synth)")
    result = run(
        [str(cli), "synth", "--quiet", "--no-notices", "--output", str(tmp_path / "out")], project, tmp_path
    )
    assert result.returncode != 0
    assert "unknown CDK context key 'not_a_setting'" in result.stderr


@pytest.mark.parametrize("command", ["deploy", "diff"])
def test_deploy_and_diff_refuse_context_they_would_ignore(tmp_path: Path, command: str) -> None:
    assembly = tmp_path / "cdk.out"
    assembly.mkdir()
    (assembly / "manifest.json").write_text("{}")
    result = run(
        [str(CDK_DIR / "cdk.sh"), command, str(assembly), "-c", "stack_name=DuetimeTest"], ROOT, tmp_path
    )
    assert result.returncode == 2
    assert f"'-c' would change nothing: cdk {command} takes the assembly make synth wrote" in result.stderr


def test_make_synth_takes_settings_only(tmp_path: Path) -> None:
    result = run(
        [str(CDK_DIR / "cdk.sh"), "synth", str(tmp_path / "out"), "--profile", "prod"], ROOT, tmp_path
    )
    assert result.returncode == 2
    assert "CDK_ARGS takes settings only, as -c key=value (got '--profile')" in result.stderr
