"""The deploy check inside the deploy: a custom resource (``Custom::DuetimeDeployCheck``) whose function
reads the installation's record and refuses a release that skips a finalize or rolls back past one
(``duetime.upgrades.deploy_gate``, docs/guide/upgrading.md). Every other function of the stack depends on
it, so CloudFormation updates it first, and a refusal fails the update, with the reason, before any function
changes; the stack rolls back as it was."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from duetime import build_info
from duetime_cdk.functions import DuetimeFunction, LambdaCode, allow
from duetime_cdk.storage import Storage

GATE_TIMEOUT = cdk.Duration.seconds(30)


class DeployGate(Construct):
    """The check's function (it reads one item of the control table, and answers CloudFormation's pre-signed
    URL) and the resource, whose ``Release`` and ``Build`` change with every release and build, so each
    deploy of new code asks it again."""

    def __init__(self, scope: Construct, id: str, *, code: LambdaCode, storage: Storage) -> None:
        super().__init__(scope, id)
        self.function = DuetimeFunction(
            self,
            "Check",
            code=code,
            handler="functions/deploy_gate/handler.handler",
            service="deploy-gate",
            statements=[allow(["dynamodb:GetItem"], [storage.table_arn("control")])],
            timeout=GATE_TIMEOUT,
            memory_mb=256,
        ).function
        commit = build_info.commit_from_file(code.asset / "duetime" / "COMMIT") or build_info.UNKNOWN
        self.resource = cdk.CustomResource(
            self,
            "Resource",
            service_token=self.function.function_arn,
            resource_type="Custom::DuetimeDeployCheck",
            properties={"Release": build_info.version, "Build": commit},
        )
