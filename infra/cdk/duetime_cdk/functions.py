"""The Lambda functions share one code asset (built without Docker by ``make lambda-assets``)."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

RUNTIME = lambda_.Runtime.PYTHON_3_13
ARCHITECTURE = lambda_.Architecture.ARM_64  # the asset is built for manylinux2014_aarch64


class DuetimeFunction(Construct):
    """A function with its own role (logs + X-Ray + exactly the statements it is given), its own log
    group with a retention, active tracing and powertools settings."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        asset: Path,
        handler: str,
        service: str,
        environment: dict[str, str],
        statements: list[iam.PolicyStatement],
        timeout: cdk.Duration,
        memory_mb: int = 512,
    ) -> None:
        super().__init__(scope, id)
        self.log_group = logs.LogGroup(
            self, "Logs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=cdk.RemovalPolicy.DESTROY
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"duetime {service}: only what the {service} calls",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["xray:PutTraceSegments", "xray:PutTelemetryRecords"], resources=["*"]
            )
        )
        for statement in statements:
            self.role.add_to_policy(statement)
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            code=lambda_.Code.from_asset(str(asset)),
            handler=handler,
            role=self.role,
            timeout=timeout,
            memory_size=memory_mb,
            log_group=self.log_group,
            tracing=lambda_.Tracing.ACTIVE,
            environment={
                "POWERTOOLS_SERVICE_NAME": service,
                "POWERTOOLS_METRICS_NAMESPACE": "duetime",
                "POWERTOOLS_LOG_LEVEL": "INFO",
                **environment,
            },
        )
