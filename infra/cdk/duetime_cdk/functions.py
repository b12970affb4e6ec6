"""The Lambda functions share one code asset (built without Docker by ``make lambda-assets``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from cdk_nag import NagSuppressions
from constructs import Construct

RUNTIME = lambda_.Runtime.PYTHON_3_13
ARCHITECTURES = {"arm64": lambda_.Architecture.ARM_64, "x86_64": lambda_.Architecture.X86_64}

# cdk-nag findings every function's resources answer, and why.
X_RAY_ANY_RESOURCE = [
    {
        "id": "AwsSolutions-IAM5",
        "applies_to": ["Resource::*"],
        "reason": "X-Ray PutTraceSegments/PutTelemetryRecords support no resource-level "
        "permissions; every other statement names its table, index, queue or topic.",
    }
]
# No function records an event or an answer (tokens issued, signing keys, targets' header secrets) in its
# traces or logs; the handlers say so in code, and the stack says so too, after any function's own settings.
# POWERTOOLS_DEV would have the api's event handler print every event.
NOTHING_OF_BODIES_RECORDED = {
    "POWERTOOLS_TRACER_CAPTURE_RESPONSE": "false",
    "POWERTOOLS_TRACER_CAPTURE_ERROR": "false",
    "POWERTOOLS_LOGGER_LOG_EVENT": "false",
    "POWERTOOLS_DEV": "false",
}
RUNTIME_PINNED = [
    {
        "id": "AwsSolutions-L1",
        "reason": "python3.13 is the runtime the code asset is built and tested for "
        "(scripts/build_lambda.sh); moving to a newer runtime is a deliberate, tested change.",
    }
]


def allow(actions: list[str], resources: list[str]) -> iam.PolicyStatement:
    return iam.PolicyStatement(actions=actions, resources=resources)


@dataclass(frozen=True)
class LambdaCode:
    """What every duetime function shares: the code asset, the architecture its wheels were built for
    (``make lambda-assets`` builds arm64), and the environment naming the tables, queue and topic."""

    asset: Path
    architecture: str = "arm64"
    environment: dict[str, str] = field(default_factory=dict)


class DuetimeFunction(Construct):
    """A function with its own role (logs + X-Ray + exactly the statements it is given), its own log
    group with a retention, active tracing and powertools settings (no event or answer recorded)."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        code: LambdaCode,
        handler: str,
        service: str,
        statements: list[iam.PolicyStatement],
        timeout: cdk.Duration,
        memory_mb: int = 512,
        environment: dict[str, str] | None = None,
        reserved_concurrency: int | None = None,
    ) -> None:
        """``reserved_concurrency``: instances of the function the account keeps for it and lets it use at
        most (None: none reserved, the function draws on the account's unreserved concurrency)."""
        super().__init__(scope, id)
        self.log_group = logs.LogGroup(
            self, "Logs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=cdk.RemovalPolicy.DESTROY
        )
        self.role = self._role(service, statements)
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=ARCHITECTURES[code.architecture],
            code=lambda_.Code.from_asset(str(code.asset)),
            handler=handler,
            role=self.role,
            timeout=timeout,
            memory_size=memory_mb,
            log_group=self.log_group,
            tracing=lambda_.Tracing.ACTIVE,
            reserved_concurrent_executions=reserved_concurrency,
            environment={
                "POWERTOOLS_SERVICE_NAME": service,
                "POWERTOOLS_METRICS_NAMESPACE": "duetime",
                "POWERTOOLS_LOG_LEVEL": "INFO",
                **code.environment,
                **(environment or {}),
                **NOTHING_OF_BODIES_RECORDED,
            },
        )
        NagSuppressions.add_resource_suppressions(
            self.role.node.find_child("DefaultPolicy"), X_RAY_ANY_RESOURCE
        )
        NagSuppressions.add_resource_suppressions(self.function, RUNTIME_PINNED)

    def _role(self, service: str, statements: list[iam.PolicyStatement]) -> iam.Role:
        """The function's own role: its log group, X-Ray, and exactly ``statements``."""
        role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"duetime {service}: only what the {service} calls",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["xray:PutTraceSegments", "xray:PutTelemetryRecords"], resources=["*"]
            )
        )
        for statement in statements:
            role.add_to_policy(statement)
        return role
