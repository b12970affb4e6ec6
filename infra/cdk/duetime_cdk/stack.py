"""The duetime stack: the composition root of the capabilities, each a construct owning its resources,
roles and IAM statements (storage, queue, alerts, pollers, workers, prescaler, API, observability)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from duetime_cdk.api import Api
from duetime_cdk.config import StackConfig
from duetime_cdk.deploy_gate import DeployGate
from duetime_cdk.functions import LambdaCode
from duetime_cdk.observability import Alerts, Observability
from duetime_cdk.pollers import Pollers
from duetime_cdk.prescaling import Prescaler
from duetime_cdk.queue import RunQueue
from duetime_cdk.reconciler import Reconciler
from duetime_cdk.storage import Storage
from duetime_cdk.workers import Workers


class DuetimeStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, *, config: StackConfig, **kwargs: Any) -> None:
        super().__init__(scope, id, description="duetime: a distributed job scheduler", **kwargs)
        self.config = config
        self.storage = storage = Storage(
            self,
            "Storage",
            deletion_protection=config.deletion_protection,
            warm_write_units=config.warm_write_units,
            warm_read_units=config.warm_read_units,
            adopt=config.adopted_tables,
            capacity_mode=config.capacity_mode,
        )
        self.queue = queue = RunQueue(self, "Queue")
        self.alerts = alerts = Alerts(self, "Alerts", email=config.alert_email)
        code = self._lambda_code()
        # Asked first on every deploy of new code: every function below depends on it (``_after_gate``).
        self.deploy_gate = DeployGate(self, "DeployGate", code=code, storage=storage)
        self.workers = Workers(
            self, "Workers", code=code, storage=storage, queue=queue, alerts=alerts, config=config
        )
        # The worker alias's provisioned concurrency: set by the prescaler from the forecast, or (Workers)
        # by Application Auto Scaling on a daily schedule; StackConfig allows one of the two at most.
        self.prescaler = self._prescaler(code) if config.forecast_scaling else None
        self.pollers = self._pollers(code)
        self.api = Api(
            self,
            "Api",
            code=code,
            storage=storage,
            queue=queue,
            pollers=self.pollers,
            worker_role=self.workers.role,
            config=config,
        )
        self.reconciler = Reconciler(self, "Reconciler", code=code, storage=storage)
        self.observability = self._observability()
        self._after_gate()
        self._outputs()

    def _after_gate(self) -> None:
        """Every function, alias, schedule and the API change only once the deploy check allowed the release
        (CloudFormation orders each after the check's resource; a refusal rolls back before them)."""
        for construct in (self.workers, self.prescaler, self.pollers, self.api, self.reconciler):
            if construct is self.api and self.config.localstack:
                # LocalStack (2026.3) takes a DependsOn added to the RestApi for a change of it, and a Ref to
                # a changed resource for a changed value: the stage, whose RestApiId is create-only, is then
                # replaced, a CreateStage of the stage that exists ("Stage already exists"), and an update in
                # place from or back to a release without the check fails. There the api's functions wait
                # for the check, not its API Gateway resources.
                for function in self.api.functions:
                    function.node.add_dependency(self.deploy_gate.resource)
            elif construct is not None:
                construct.node.add_dependency(self.deploy_gate.resource)

    def _lambda_code(self) -> LambdaCode:
        """The code asset every function runs, and the environment naming the tables, queue and topic."""
        config, tables = self.config, self.storage.tables
        return LambdaCode(
            config.lambda_asset,
            config.lambda_architecture,
            {
                "DUETIME_JOBS_TABLE": tables["jobs"].table_name,
                "DUETIME_RUNS_TABLE": tables["runs"].table_name,
                "DUETIME_CONTROL_TABLE": tables["control"].table_name,
                "DUETIME_RUN_QUEUE_URL": self.queue.queue.queue_url,
                "DUETIME_ALERTS_TOPIC_ARN": self.alerts.topic.topic_arn,
                "DUETIME_INSTALLATION": cdk.Aws.STACK_NAME,  # the metrics' installation dimension
                "DUETIME_ALLOW_PRIVATE_TARGETS": "true" if config.allow_private_targets else "false",
                "DUETIME_AWS_TARGETS_WITHOUT_ROLE": "true" if config.aws_targets_without_role else "false",
                # LocalStack's STS lets any external id in: a role's trust cannot be checked there
                "DUETIME_AWS_ROLE_TRUST_UNCHECKED": "true" if config.localstack else "false",
                **(
                    {"DUETIME_ALLOWED_TARGET_PORTS": ",".join(map(str, config.allowed_target_ports))}
                    if config.allowed_target_ports
                    else {}
                ),
            },
        )

    def _prescaler(self, code: LambdaCode) -> Prescaler:
        return Prescaler(
            self,
            "Prescaler",
            code=code,
            storage=self.storage,
            queue=self.queue,
            worker=self.workers.alias,
            event_source=self.workers.event_source,
            config=self.config,
        )

    def _pollers(self, code: LambdaCode) -> Pollers:
        config = self.config
        return Pollers(
            self,
            "Pollers",
            code=code,
            partition_groups=config.partition_groups,
            hot_standby=config.poller_hot_standby,
            rest_when_quiet=config.poller_rest_when_quiet,
            fan_out=config.poller_fan_out,
            helper_memory_mb=config.poller_helper_memory_mb,
            warm_write_units=None if config.localstack else config.warm_write_units,
            storage=self.storage,
            queue=self.queue,
            alerts=self.alerts,
            worker=self.workers.alias,
        )

    def _observability(self) -> Observability:
        """Alarms on every function and the pollers, the prescaler and the tables in particular."""
        pollers, prescaler = self.pollers, self.prescaler
        return Observability(
            self,
            "Observability",
            alerts=self.alerts,
            queue=self.queue,
            tables=[self.storage.tables[role] for role in ("jobs", "runs", "control")],
            indexes={
                self.storage.tables[role].node.id: self.storage.indexes(role) for role in ("jobs", "runs")
            },
            pollers=pollers.functions,
            functions=[
                *pollers.functions,
                *([pollers.helper] if pollers.helper else []),
                self.workers.function,
                *self.api.functions,
                *([prescaler.function] if prescaler else []),
                self.reconciler.function,
            ],  # not the deploy gate's: it runs inside a deploy, whose failure CloudFormation shows
            prescaler=prescaler.function if prescaler else None,
            dashboard=self.config.dashboard,
            reconciler=self.reconciler.function,
            worker=self.workers.function,
            api=self.api.functions,
            rest_api=self.api.rest_api,
        )

    def _outputs(self) -> None:
        control = self.storage.tables["control"].table_name
        for name, value, description in (
            ("ApiUrl", self.api.rest_api.url, "duetime REST API"),
            ("AlertsTopic", self.alerts.topic.topic_arn, None),
            ("JobsTable", self.storage.tables["jobs"].table_name, None),
            ("RunsTable", self.storage.tables["runs"].table_name, None),
            ("RunQueueUrl", self.queue.queue.queue_url, None),
            ("ControlTable", control, "for `duetime teams create` (DUETIME_CONTROL_TABLE)"),
        ):
            cdk.CfnOutput(self, name, value=value, description=description)


def check_with_cdk_nag(app: cdk.App) -> None:
    cdk.Aspects.of(app).add(AwsSolutionsChecks(verbose=True))


def duetime_app(app: cdk.App, environ: Mapping[str, str]) -> DuetimeStack:
    """The app's one stack, as the app's context configures it (``StackConfig.from_context``: raises
    ContextError naming a bad or unknown key), in the environment of the caller's credentials when there
    is one, checked with cdk-nag."""
    config = StackConfig.from_context(app.node)
    stack = DuetimeStack(app, config.stack_name, config=config, env=deployment_environment(environ))
    check_with_cdk_nag(app)
    return stack


def deployment_environment(environ: Mapping[str, str]) -> cdk.Environment | None:
    """The account and region of the caller's credentials, which the CDK CLI resolves and passes to the app
    as CDK_DEFAULT_ACCOUNT and CDK_DEFAULT_REGION: the stack is then bound to them. Without an account (no
    credentials, as in CI; the CLI names a region regardless), None: an environment-agnostic stack."""
    account = environ.get("CDK_DEFAULT_ACCOUNT")
    if not account:
        return None
    return cdk.Environment(account=account, region=environ.get("CDK_DEFAULT_REGION"))
