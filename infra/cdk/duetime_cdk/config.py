"""Stack settings, from CDK context, validated with pydantic."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, ValidationInfo, field_validator, model_validator

from duetime.capacity.warm_throughput import (
    DEFAULT_WARM_READ_UNITS,
    DEFAULT_WARM_WRITE_UNITS,
    NEW_TABLE_READ_UNITS,
    NEW_TABLE_WRITE_UNITS,
    parse_units,
)
from duetime.domain.ids import DEFAULT_POLLER_GROUPS, PARTITIONS
from duetime.domain.partitions import parse_partitions
from duetime.domain.target_guard import parse_ports

ROOT = Path(__file__).resolve().parents[3]
LambdaArchitecture = Literal["arm64", "x86_64"]
# a wheel's platform tag -> Lambda's name
WHEEL_ARCHITECTURES: dict[str, LambdaArchitecture] = {"aarch64": "arm64", "x86_64": "x86_64"}

# Context keys of the CDK's own (feature flags, what the CLI passes or stores in cdk.json: aws:cdk:..., the
# acknowledged notices, the telemetry switch): not ours to validate. Every other key must be a setting.
CDK_CONTEXT_PREFIXES = ("@aws-cdk/", "@aws-cdk-containers/", "aws:cdk:", "aws-cdk:", "cdk-")
CDK_CONTEXT_KEYS = frozenset({"acknowledged-issue-numbers", "cli-telemetry"})

TABLE_NAME = re.compile(r"[A-Za-z0-9_.-]{3,255}")  # DynamoDB's rule for table names
STACK_NAME = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,127}")  # CloudFormation's rule for stack names
SCHEDULE = re.compile(r"(at|rate|cron)\(.+\)")  # Application Auto Scaling's schedule expressions (UTC)
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


class ContextError(ValueError):
    """The CDK context holds a key that is no setting, or a setting whose value is refused. The message
    names each such key."""


class StackConfig(BaseModel):
    """The stack's settings, one per CDK context key (infra/cdk/README.md lists them)."""

    stack_name: str = "Duetime"
    deletion_protection: bool = True
    partition_groups: list[list[int]] = Field(
        default_factory=lambda: [
            list(range(i, i + PARTITIONS // DEFAULT_POLLER_GROUPS))
            for i in range(0, PARTITIONS, PARTITIONS // DEFAULT_POLLER_GROUPS)
        ]
    )
    # Keep the next poller invocation waiting as a hot standby for the holder's whole run (a dead poller
    # replaced within seconds in any minute, at twice the pollers' Lambda cost); off: only in busy minutes.
    poller_hot_standby: bool = False
    # A quiet group's holder gives the lease back until the next tick (duetime.scheduling.quiet) and the API
    # wakes it when a job is written due before then (duetime.scheduling.wake); off: every holder serves its
    # whole minute.
    poller_rest_when_quiet: bool = True
    # Claims that scale out (duetime.scheduling.fan_out): a group's holder whose coming minute holds more than
    # it claims alone starts helpers (a function of poller_helper_memory_mb, one vCPU at 1,769) for that
    # minute only.
    poller_fan_out: bool = True
    poller_helper_memory_mb: int = Field(default=1769, ge=128, le=10240)
    worker_max_concurrency: int = Field(default=100, ge=2, le=1000)
    worker_batch_size: int = Field(default=10, ge=1, le=10)
    # The worker's SQS event source in provisioned mode: at least worker_min_pollers event pollers kept
    # running (each up to 10 concurrent batches), up to worker_max_pollers, scaling by up to 1,000 concurrent
    # invocations a minute. Unset: standard mode, which starts a spike with 5 and adds up to 300 a minute, so
    # the midnight spike of exact jobs waits on that ramp. It costs $0.00925 per poller-hour (us-east-1), for
    # the minimum all month: 2 pollers $13.32 a month, 20 $133.20; more while scaling. Provisioned mode has no
    # MaximumConcurrency (AWS refuses both): worker_max_pollers is then the worker's cap.
    worker_min_pollers: int | None = Field(default=None, ge=2, le=200)
    worker_max_pollers: int = Field(default=200, ge=2, le=2000)
    # The most workers ever provisioned: the prescaler's ceiling, or the scheduled peak window's workers.
    peak_workers: int = Field(default=90, ge=1, le=1000)
    # Workers kept provisioned when nothing is forecast (outside the peak window, with scheduled_scaling). 0
    # by default: pollers warm a worker before each minute that holds runs (duetime.scheduling.warmup), so a
    # warm one need not be paid for all day.
    baseline_workers: int = Field(default=0, ge=0, le=1000)
    peak_scale_up: str = "cron(55 23 * * ? *)"
    peak_scale_down: str = "cron(15 0 * * ? *)"
    alert_email: str | None = None
    # The code asset (relative paths are from the repository root) and the architecture it was built for:
    # unset, the one its binary wheels name; set, it must be that one.
    lambda_asset: Path = Field(default=ROOT / "build" / "lambda", validate_default=True)
    lambda_architecture: LambdaArchitecture = "arm64"
    # A LocalStack (community) deployment: leaves out what LocalStack cannot create or run: the API
    # Gateway Lambda authorizer (the api function checks tokens itself), the dashboard, scheduled scaling
    # (forecast_scaling stays: LocalStack's Lambda keeps provisioned concurrency configs).
    localstack: bool = False
    # The prescaler (duetime.scheduling.prescale) provisions workers only ahead of minutes the due index shows
    # busy.
    forecast_scaling: bool = True
    # ...and switches the worker's SQS event source to provisioned mode ahead of a minute standard mode would
    # not start within 60 s, back to standard (MaximumConcurrency restored) once the queue has drained: the
    # pollers a spike needs, bought for the spike only (31 for the seed's midnight, for about 15-20 minutes:
    # $0.07-0.10). Only with forecast_scaling and without worker_min_pollers (which pins provisioned mode).
    forecast_pollers: bool = True
    # The tables' capacity mode (`duetime plan` recommends one for a workload): on_demand, every request
    # billed; provisioned, capacity units an hour under auto scaling at 70% (1 to 40,000 units a table and
    # index), the prescaler switching the tables to on demand from 20-25 minutes before each minute of more
    # than table_busy_runs_per_minute due runs to 15 minutes after it (duetime.scheduling.table_modes; AWS
    # allows four switches to on demand a table in a rolling 24 hours, and the prescaler never needs a fifth).
    # Provisioned needs forecast_scaling (the prescaler).
    capacity_mode: Literal["on_demand", "provisioned"] = "on_demand"
    table_busy_runs_per_minute: int = Field(default=20_000, ge=1)
    # The worker function's memory: its CPU share follows it (1,769 MB a vCPU); `duetime plan` recommends
    # the cheapest whose spike still starts in time (256 MB at the seed's scale: calls wait, CPU is small).
    worker_memory_mb: int = Field(default=1024, ge=256, le=10240)
    # Instead: peak_workers provisioned from peak_scale_up to peak_scale_down every day, idle or not, by
    # Application Auto Scaling (not on LocalStack, which does not have it for Lambda). Not both: they would
    # set the same alias's provisioned concurrency.
    scheduled_scaling: bool = False
    # SSRF guard off: jobs may call loopback and private addresses (for LocalStack smoke tests). On AWS that
    # lets every team reach whatever the functions' network reaches, the Lambda runtime API on 127.0.0.1
    # among it: outside LocalStack it needs allow_private_targets_on_aws as well, which says so on purpose.
    allow_private_targets: bool = False
    allow_private_targets_on_aws: bool = False
    # AWS targets without a role, called with the worker's own credentials: LocalStack only (on AWS it would
    # let any team act with the worker's rights)
    aws_targets_without_role: bool = False
    # Ports HTTP targets and notification webhooks may use besides 80, 443 and 1024-65535 (the functions'
    # DUETIME_ALLOWED_TARGET_PORTS), e.g. -c allowed_target_ports=8,25 or 20-23; the others are refused when a
    # job is written and at each call (no team makes duetime probe a host's privileged ports).
    allowed_target_ports: list[int] = Field(default_factory=list)
    api_rate_limit: int = Field(default=100, ge=1)
    api_burst_limit: int = Field(default=200, ge=1)
    # Concurrent instances of the api function, reserved for it and its ceiling: however many requests one
    # team sends (each may run 29 s), the api function never takes more of the account's Lambda concurrency,
    # so the pollers and workers always find theirs. Past it API Gateway answers 429/502 and the caller
    # retries. 0: none reserved (an account whose concurrency quota leaves nothing to reserve; AWS keeps 100
    # unreserved). LocalStack deploys it and does not enforce it.
    api_reserved_concurrency: int = Field(default=50, ge=0, le=10_000)
    # How long API Gateway keeps a TeamAuthorizer decision for a token: a revoked or rotated-out token's
    # requests, and a disabled team's, reach the api function (which checks every request's token and
    # refuses them) for at most this long, instead of being stopped at API Gateway.
    # 0 turns the cache off (one authorizer invocation per request); API Gateway allows up to 3600.
    authorizer_cache_seconds: int = Field(default=300, ge=0, le=3600)
    # DynamoDB warm throughput (duetime.capacity.warm_throughput): write and read units a second each table
    # and index takes at once, e.g. -c warm_write_units=runs:26000,jobs/due:17000 (names: jobs, jobs/due,
    # jobs/team-jobs, runs, runs/reap, control). The names given replace their defaults, the rest keep
    # theirs; 0: none (a new table's 4,000 writes, 12,000 reads). AWS charges once for raising it (not a
    # monthly cost), and a raised warm throughput cannot be lowered.
    # Default writes: what `duetime plan` says the seed's midnight asks of each table on the default stack
    # (duetime.capacity.warm_throughput.DEFAULT_WARM_WRITE_UNITS); reads: none. Left out with localstack
    # (storage.py).
    warm_write_units: dict[str, int] = Field(default_factory=lambda: dict(DEFAULT_WARM_WRITE_UNITS))
    warm_read_units: dict[str, int] = Field(default_factory=lambda: dict(DEFAULT_WARM_READ_UNITS))

    # Adopt existing tables by name instead of the stack's own (docs/guide/operations.md, "Restore"): tables
    # restored from point-in-time recovery or imported from a backup, or tables kept from an earlier stack.
    # The stack neither creates, changes nor deletes them (their PITR, TTL and deletion protection are the
    # operator's), and grants its functions the same access to them and their indexes as to its own.
    jobs_table: str | None = None
    runs_table: str | None = None
    control_table: str | None = None

    @field_validator("jobs_table", "runs_table", "control_table")
    @classmethod
    def _table_name(cls, name: str | None) -> str | None:
        # DynamoDB's naming rules: 3 to 255 of a-z, A-Z, 0-9, _, - and . (Amazon DynamoDB Developer Guide,
        # "Supported data types and naming rules").
        if name is not None and not TABLE_NAME.fullmatch(name):
            raise ValueError("a DynamoDB table name is 3 to 255 characters of a-z, A-Z, 0-9, _, - and .")
        return name

    @property
    def adopted_tables(self) -> dict[str, str]:
        """The tables adopted by name, by role (jobs, runs, control)."""
        named = {"jobs": self.jobs_table, "runs": self.runs_table, "control": self.control_table}
        return {role: name for role, name in named.items() if name}

    @field_validator("stack_name")
    @classmethod
    def _stack_name(cls, name: str) -> str:
        if not STACK_NAME.fullmatch(name):
            raise ValueError(
                "a CloudFormation stack name has letters, digits and hyphens only, starts with a letter and "
                "is at most 128 characters long"
            )
        return name

    @field_validator("peak_scale_up", "peak_scale_down")
    @classmethod
    def _schedule(cls, expression: str) -> str:
        if not SCHEDULE.fullmatch(expression):
            raise ValueError("must be a schedule expression: cron(...), rate(...) or at(...), in UTC")
        return expression

    @field_validator("alert_email")
    @classmethod
    def _email(cls, address: str | None) -> str | None:
        if address is not None and not EMAIL.fullmatch(address):
            raise ValueError("must be an e-mail address")
        return address

    @field_validator("partition_groups", mode="before")
    @classmethod
    def _groups(cls, value: Any) -> Any:
        """``"0-31,32-63"`` (each comma-separated range one group), or a number of equal groups of
        consecutive partitions: ``16`` is ``"0-3,4-7,...,60-63"``."""
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            if value < 1 or PARTITIONS % value:
                raise ValueError(
                    f"a number of partition groups must divide {PARTITIONS}: 1, 2, 4, 8, 16, 32 or 64"
                )
            size = PARTITIONS // value
            return [list(range(first, first + size)) for first in range(0, PARTITIONS, size)]
        if isinstance(value, str):
            return [parse_partitions(group) for group in value.split(",")]
        return value

    @field_validator("partition_groups")
    @classmethod
    def _cover_all_once(cls, groups: list[list[int]]) -> list[list[int]]:
        flat = sorted(p for g in groups for p in g)
        if flat != list(range(64)):
            raise ValueError("partition_groups must cover partitions 0-63, each exactly once")
        return groups

    @field_validator("allowed_target_ports", mode="before")
    @classmethod
    def _ports(cls, value: Any) -> Any:
        """``"25"``, ``"8,25"``, ``"20-23"`` from ``-c``; a number or a list of them from cdk.json."""
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if isinstance(value, list):
            value = ",".join(str(port) for port in value)
        return parse_ports(value) if isinstance(value, str) else value

    @field_validator("warm_write_units", "warm_read_units", mode="before")
    @classmethod
    def _warm(cls, value: Any, info: ValidationInfo) -> dict[str, int]:
        if info.field_name == "warm_write_units":
            defaults, floor = DEFAULT_WARM_WRITE_UNITS, NEW_TABLE_WRITE_UNITS
        else:
            defaults, floor = DEFAULT_WARM_READ_UNITS, NEW_TABLE_READ_UNITS
        if info.data.get("localstack"):  # (validated before: defined above) no default pre-warming there
            defaults = {}
        return {**defaults, **parse_units(value, floor)}

    @field_validator("worker_max_pollers")
    @classmethod
    def _at_least_the_minimum(cls, maximum: int, info: ValidationInfo) -> int:
        minimum = info.data.get("worker_min_pollers")
        if minimum is not None and maximum < minimum:
            raise ValueError(f"must be at least worker_min_pollers ({minimum})")
        return maximum

    @field_validator("lambda_asset")
    @classmethod
    def _built(cls, path: Path) -> Path:
        path = path if path.is_absolute() else ROOT / path
        if not (path / ".built").is_file():
            raise ValueError(
                f"{path} holds no finished Lambda build (no .built): build it with scripts/build_lambda.sh "
                "(`make lambda-assets` builds build/lambda)"
            )
        return path

    @model_validator(mode="after")
    def _consistent(self) -> StackConfig:
        self._architecture_of_the_asset()
        self._private_targets_confirmed()
        if self.localstack:
            self._without_what_localstack_lacks()
        self._one_worker_scaling()
        if self.capacity_mode == "provisioned" and not self.forecast_scaling:
            raise ValueError(
                "capacity_mode=provisioned needs forecast_scaling: the prescaler switches the tables to on "
                "demand ahead of a spike (without it, every spike would meet provisioned capacity)"
            )
        return self

    def _architecture_of_the_asset(self) -> None:
        built_for = asset_architectures(self.lambda_asset)
        if "lambda_architecture" not in self.model_fields_set and len(built_for) == 1:
            (self.lambda_architecture,) = built_for  # unset: what the asset is built for
        if built_for and built_for != {self.lambda_architecture}:
            raise ValueError(
                f"lambda_asset {self.lambda_asset} holds wheels for {', '.join(sorted(built_for))}, "
                f"but lambda_architecture is {self.lambda_architecture}"
            )

    def _private_targets_confirmed(self) -> None:
        if self.aws_targets_without_role and not self.localstack:
            raise ValueError(
                "aws_targets_without_role is for LocalStack only: on AWS it would let any team act with the "
                "worker's own rights"
            )
        if self.allow_private_targets and not self.localstack and not self.allow_private_targets_on_aws:
            raise ValueError(
                "allow_private_targets outside LocalStack lets every team's jobs call loopback and private "
                "addresses: the Lambda runtime API on 127.0.0.1 (other invocations' events) and whatever the "
                "functions' network reaches. If that is what you want, say so with "
                "allow_private_targets_on_aws=true as well"
            )
        if self.allow_private_targets_on_aws and not self.allow_private_targets:
            raise ValueError(
                "allow_private_targets_on_aws confirms allow_private_targets, which is not set: set both, or "
                "neither"
            )

    def _without_what_localstack_lacks(self) -> None:
        if "scheduled_scaling" in self.model_fields_set and self.scheduled_scaling:
            raise ValueError(
                "scheduled_scaling needs Application Auto Scaling for Lambda, which LocalStack community "
                "does not have: leave it unset (or false) with localstack=true"
            )
        self.scheduled_scaling = False
        for key in ("warm_write_units", "warm_read_units"):
            if key in self.model_fields_set and any(getattr(self, key).values()):
                raise ValueError(
                    f"{key} sets DynamoDB warm throughput, which LocalStack's CloudFormation does not "
                    f"apply: leave it unset (or 0) with localstack=true"
                )
            setattr(self, key, {})  # no default pre-warming on LocalStack either (storage.py says why)
        if self.capacity_mode == "provisioned":
            raise ValueError(
                "capacity_mode=provisioned makes provisioned AWS::DynamoDB::GlobalTable resources, which "
                "LocalStack's CloudFormation cannot create (localstack/localstack, services/dynamodb/"
                "resource_providers/aws_dynamodb_globaltable.py hands WriteProvisionedThroughputSettings to "
                "CreateTable unchanged): leave it on_demand with localstack=true"
            )

    def _one_worker_scaling(self) -> None:
        default_cap = type(self).model_fields["worker_max_concurrency"].default
        if self.worker_min_pollers is not None and self.worker_max_concurrency != default_cap:
            raise ValueError(
                f"worker_max_concurrency ({self.worker_max_concurrency}) caps the worker's event source in "
                "standard mode only; with worker_min_pollers (provisioned mode) AWS takes no "
                "MaximumConcurrency: cap the worker with worker_max_pollers instead (about 10 concurrent "
                "batches a poller)"
            )
        if "forecast_pollers" in self.model_fields_set and self.forecast_pollers:
            if self.worker_min_pollers is not None:
                raise ValueError(
                    "forecast_pollers switches the worker's event source between standard and provisioned "
                    "mode; worker_min_pollers pins provisioned mode: set one of them"
                )
            if not self.forecast_scaling:
                raise ValueError("forecast_pollers is the prescaler's: it needs forecast_scaling=true")
        if self.forecast_scaling and self.scheduled_scaling:
            raise ValueError(
                "forecast_scaling and scheduled_scaling both set the worker alias's provisioned concurrency: "
                "turn one off (scheduled_scaling=true needs forecast_scaling=false)"
            )

    @property
    def prescaler_switches_pollers(self) -> bool:
        """Whether the prescaler switches the worker's event source's provisioned mode: ``forecast_pollers``,
        with a prescaler (``forecast_scaling``) and the event source not pinned (``worker_min_pollers``)."""
        return self.forecast_scaling and self.forecast_pollers and self.worker_min_pollers is None

    @property
    def team_authorizer(self) -> bool:
        """API Gateway's TOKEN authorizer in front of /v1 (LocalStack community never runs one)."""
        return not self.localstack

    @property
    def dashboard(self) -> bool:
        """The CloudWatch dashboard (LocalStack community cannot create one)."""
        return not self.localstack

    @classmethod
    def from_context(cls, node: Any) -> StackConfig:
        """The settings in a construct node's context (``cdk.json`` and ``-c key=value``, as the CDK CLI
        merges them, or ``CDK_CONTEXT_JSON``): see ``from_mapping``."""
        return cls.from_mapping(node.get_all_context())

    @classmethod
    def from_mapping(cls, context: Mapping[str, Any]) -> StackConfig:
        """Every key that is not the CDK's own must be a setting, and every setting's value must be valid;
        otherwise ContextError, naming each offending key. ``-c key=value`` gives strings: pydantic parses
        them ("true"/"false" for flags, numbers). A null value leaves the setting at its default."""
        settings = {key: value for key, value in context.items() if not is_cdk_context_key(key)}
        unknown = sorted(set(settings) - set(cls.model_fields))
        if unknown:
            raise ContextError(
                f"unknown CDK context key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                f"the settings are: {', '.join(cls.model_fields)} (infra/cdk/README.md)"
            )
        try:
            return cls.model_validate({key: value for key, value in settings.items() if value is not None})
        except ValidationError as exc:
            raise ContextError(describe(exc)) from exc


def is_cdk_context_key(key: str) -> bool:
    """Whether a context key belongs to the CDK itself (a feature flag, a CLI setting), not to duetime."""
    return key in CDK_CONTEXT_KEYS or key.startswith(CDK_CONTEXT_PREFIXES)


def describe(error: ValidationError) -> str:
    """One line per refused setting: its name, why, and the value given (a check across settings has no
    single name; its message names the settings it concerns)."""
    lines = []
    for problem in error.errors():
        name = ".".join(str(part) for part in problem["loc"])
        message = problem["msg"].removeprefix("Value error, ")
        lines.append(f"{name}: {message} (given: {problem['input']!r})" if name else message)
    return "bad CDK context:\n  " + "\n  ".join(lines)


def asset_architectures(asset: Path) -> set[LambdaArchitecture]:
    """The Lambda architectures the asset's binary wheels were built for (empty if it has none)."""
    found: set[LambdaArchitecture] = set()
    for wheel in asset.glob("*.dist-info/WHEEL"):
        for line in wheel.read_text().splitlines():
            if line.startswith("Tag:"):
                platform = line.split("-")[-1].strip()
                found |= {name for tag, name in WHEEL_ARCHITECTURES.items() if platform.endswith(f"_{tag}")}
    return found
