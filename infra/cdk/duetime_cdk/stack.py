"""The duetime stack: storage, queue, pollers, workers, API and observability, each a construct."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from cdk_nag import AwsSolutionsChecks, NagSuppressions
from constructs import Construct

from duetime_cdk.config import StackConfig, group_label
from duetime_cdk.functions import DuetimeFunction
from duetime_cdk.queue import WORKER_TIMEOUT, RunQueue
from duetime_cdk.storage import Storage

POLLER_RUN_SECONDS = 55  # each EventBridge invocation ticks every second for the rest of its minute


def _allow(actions: list[str], resources: list[str]) -> iam.PolicyStatement:
    return iam.PolicyStatement(actions=actions, resources=resources)


class DuetimeStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, *, config: StackConfig, **kwargs: Any) -> None:
        super().__init__(scope, id, description="duetime: a distributed job scheduler", **kwargs)
        self.config = config
        storage = Storage(self, "Storage", deletion_protection=config.deletion_protection)
        queue = RunQueue(self, "Queue")
        jobs, runs, control = (storage.tables[t] for t in ("jobs", "runs", "control"))
        self.alerts = sns.Topic(
            self,
            "Alerts",
            display_name="duetime alerts",
            enforce_ssl=True,
            master_key=kms.Alias.from_alias_name(self, "SnsKey", "alias/aws/sns"),
        )
        if config.alert_email:
            self.alerts.add_subscription(subscriptions.EmailSubscription(config.alert_email))
        environment = {
            "DUETIME_JOBS_TABLE": jobs.table_name,
            "DUETIME_RUNS_TABLE": runs.table_name,
            "DUETIME_CONTROL_TABLE": control.table_name,
            "DUETIME_RUN_QUEUE_URL": queue.queue.queue_url,
            "DUETIME_ALERTS_TOPIC_ARN": self.alerts.topic_arn,
            "DUETIME_ALLOW_PRIVATE_TARGETS": "true" if config.allow_private_targets else "false",
        }
        send = _allow(["sqs:SendMessage"], [queue.queue.queue_arn])
        publish = _allow(["sns:Publish"], [self.alerts.topic_arn])
        read_marks = _allow(["dynamodb:BatchGetItem", "dynamodb:GetItem"], [control.table_arn])

        # --- pollers: one function and one EventBridge rule per partition group --------------------------
        self.pollers: list[lambda_.Function] = []
        for partitions in config.partition_groups:
            label = group_label(partitions)
            poller = DuetimeFunction(
                self,
                f"Poller{label.replace('-', 'to')}",
                asset=config.lambda_asset,
                handler="functions/poller/handler.handler",
                service="poller",
                environment={**environment, "DUETIME_PARTITIONS": label},
                timeout=cdk.Duration.seconds(POLLER_RUN_SECONDS + 15),
                statements=[
                    _allow(["dynamodb:Query"], storage.index_arns("jobs")[:1]),  # the due index
                    _allow(["dynamodb:UpdateItem"], [jobs.table_arn]),  # claim: move the schedule
                    _allow(["dynamodb:PutItem", "dynamodb:UpdateItem"], [runs.table_arn]),  # claim, reap
                    _allow(["dynamodb:Query"], [storage.index_arns("runs")[0]]),  # the reap index
                    _allow(["dynamodb:PutItem", "dynamodb:UpdateItem"], [control.table_arn]),  # marks
                    read_marks,
                    send,
                    publish,
                ],
            ).function
            rule = events.Rule(
                self,
                f"Tick{label.replace('-', 'to')}",
                schedule=events.Schedule.rate(cdk.Duration.minutes(1)),
                description=f"duetime poller tick, partitions {label}",
            )
            rule.add_target(
                targets.LambdaFunction(
                    poller,
                    retry_attempts=0,
                    event=events.RuleTargetInput.from_object(
                        {"partitions": label, "run_seconds": POLLER_RUN_SECONDS}
                    ),
                )
            )
            self.pollers.append(poller)

        # --- workers: SQS event source on an alias whose provisioned concurrency follows the peak ------
        worker = DuetimeFunction(
            self,
            "Worker",
            asset=config.lambda_asset,
            handler="functions/worker/handler.handler",
            service="worker",
            environment=environment,
            timeout=WORKER_TIMEOUT,
            memory_mb=1024,
            statements=[
                _allow(["dynamodb:GetItem", "dynamodb:UpdateItem"], [runs.table_arn]),  # lease, result
                _allow(
                    ["dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:Query", "dynamodb:BatchGetItem"],
                    [control.table_arn],
                ),  # team, slots, store clock
                send,
                publish,
            ],
        ).function
        self.worker = worker
        self.worker_alias = lambda_.Alias(
            self, "WorkerLive", alias_name="live", version=worker.current_version
        )
        self.worker_alias.add_event_source(
            sources.SqsEventSource(
                queue.queue,
                batch_size=config.worker_batch_size,
                report_batch_item_failures=True,
                max_concurrency=config.worker_max_concurrency,
            )
        )
        if config.scheduled_scaling:
            scaling = self.worker_alias.add_auto_scaling(min_capacity=1, max_capacity=config.peak_workers)
            scaling.scale_on_schedule(
                "RaiseBeforePeak",
                schedule=appscaling.Schedule.expression(config.peak_scale_up),
                min_capacity=config.peak_workers,
            )
            scaling.scale_on_schedule(
                "LowerAfterPeak",
                schedule=appscaling.Schedule.expression(config.peak_scale_down),
                min_capacity=1,
            )

        # --- API ----------------------------------------------------------------------------------------
        api_statements = [
            _allow(
                ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:BatchGetItem"],
                [jobs.table_arn],
            ),
            _allow(["dynamodb:Query"], storage.index_arns("jobs")[1:2]),  # team-jobs
            _allow(  # Query: a job's runs are one partition of the runs table
                ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"],
                [runs.table_arn],
            ),
            _allow(
                ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:BatchGetItem"],
                [control.table_arn],
            ),
            send,
        ]
        api_function = DuetimeFunction(
            self,
            "ApiHandler",
            asset=config.lambda_asset,
            handler="functions/api/handler.handler",
            service="api",
            environment=environment,
            timeout=cdk.Duration.seconds(29),
            statements=api_statements,
        ).function
        authorizer_function = DuetimeFunction(
            self,
            "Authorizer",
            asset=config.lambda_asset,
            handler="functions/authorizer/handler.handler",
            service="authorizer",
            environment=environment,
            timeout=cdk.Duration.seconds(10),
            statements=[_allow(["dynamodb:GetItem", "dynamodb:BatchGetItem"], [control.table_arn])],
        ).function
        self.api = self._rest_api(api_function, authorizer_function)

        self._observability(queue, [jobs, runs], authorizer_function, api_function)
        cdk.CfnOutput(self, "ApiUrl", value=self.api.url, description="duetime REST API")
        cdk.CfnOutput(self, "AlertsTopic", value=self.alerts.topic_arn)
        cdk.CfnOutput(self, "JobsTable", value=jobs.table_name)
        cdk.CfnOutput(self, "RunsTable", value=runs.table_name)
        cdk.CfnOutput(self, "RunQueueUrl", value=queue.queue.queue_url)
        cdk.CfnOutput(
            self,
            "ControlTable",
            value=control.table_name,
            description="for `duetime teams create` (DUETIME_CONTROL_TABLE)",
        )
        self._suppress_with_reasons()

    def _rest_api(self, handler: lambda_.IFunction, authorizer_fn: lambda_.IFunction) -> apigateway.RestApi:
        access_logs = logs.LogGroup(
            self,
            "ApiAccessLogs",
            retention=logs.RetentionDays.THREE_MONTHS,
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        api = apigateway.RestApi(
            self,
            "Api",
            rest_api_name="duetime",
            cloud_watch_role=True,
            cloud_watch_role_removal_policy=cdk.RemovalPolicy.DESTROY,
            deploy_options=apigateway.StageOptions(
                stage_name="v1-stage",
                throttling_rate_limit=self.config.api_rate_limit,
                throttling_burst_limit=self.config.api_burst_limit,
                tracing_enabled=True,
                logging_level=apigateway.MethodLoggingLevel.ERROR,
                access_log_destination=apigateway.LogGroupLogDestination(access_logs),
                access_log_format=apigateway.AccessLogFormat.json_with_standard_fields(
                    caller=False,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
            ),
        )
        integration = apigateway.LambdaIntegration(handler)
        validator = api.add_request_validator(
            "Validator", validate_request_parameters=True, validate_request_body=True
        )
        authorizer = apigateway.TokenAuthorizer(
            self, "TeamAuthorizer", handler=authorizer_fn, results_cache_ttl=cdk.Duration.minutes(5)
        )
        # The two public paths take ANY method, like the proxy: the API function answers what it does not
        # serve with 405 and an Allow header (API Gateway alone would answer 403 "Missing Authentication").
        api.root.add_resource("healthz").add_method("ANY", integration, request_validator=validator)
        v1 = api.root.add_resource("v1")
        v1.add_resource("openapi.json").add_method("ANY", integration, request_validator=validator)
        v1.add_proxy(
            default_integration=integration,
            any_method=True,
            default_method_options=apigateway.MethodOptions(
                authorizer=authorizer,
                authorization_type=apigateway.AuthorizationType.CUSTOM,
                request_validator=validator,
            ),
        )
        return api

    def _observability(self, queue: RunQueue, tables: list[Any], *functions: lambda_.IFunction) -> None:
        def metric(name: str, service: str, statistic: str = "Sum") -> cloudwatch.Metric:
            return cloudwatch.Metric(
                namespace="duetime",
                metric_name=name,
                dimensions_map={"service": service},
                statistic=statistic,
                period=cdk.Duration.minutes(1),
            )

        def total(label: str, metrics: list[cloudwatch.IMetric]) -> cloudwatch.MathExpression:
            using = {f"m{i}": m for i, m in enumerate(metrics)}
            return cloudwatch.MathExpression(
                expression=" + ".join(f"FILL({k}, 0)" for k in using),
                using_metrics=using,
                label=label,
                period=cdk.Duration.minutes(1),
            )

        action = cloudwatch_actions.SnsAction(self.alerts)
        lateness_p99 = metric("StartLateness", "worker", "p99")
        dead = total("dead runs", [metric("RunsDead", "worker"), metric("RunsDead", "poller")])
        all_functions = [*self.pollers, self.worker, *functions]

        def any_in(
            id: str, value: cloudwatch.IMetric, description: str, periods: int = 1
        ) -> cloudwatch.Alarm:
            """Alarm when the metric is above zero in ``periods`` consecutive minutes."""
            return cloudwatch.Alarm(
                self,
                id,
                metric=value,
                threshold=0,
                evaluation_periods=periods,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                alarm_description=description,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )

        dynamodb_throttles = [
            t.metric(name, statistic="Sum", period=cdk.Duration.minutes(1))
            for t in tables
            for name in ("ReadThrottleEvents", "WriteThrottleEvents")
        ]
        alarms = [
            cloudwatch.Alarm(
                self,
                "StartLatenessP99",
                metric=lateness_p99,
                threshold=5,
                evaluation_periods=3,
                datapoints_to_alarm=2,
                alarm_description="start lateness p99 over 5 s",
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            ),
            any_in("DeadRuns", dead, "runs went dead (out of attempts)"),
            any_in(
                "DeadLetterDepth",
                queue.dead_letters.metric_approximate_number_of_messages_visible(
                    period=cdk.Duration.minutes(1)
                ),
                "run messages reached the dead-letter queue",
            ),
            any_in(
                "PollerErrors",
                total(
                    "poller errors",
                    [*(p.metric_errors() for p in self.pollers), metric("PollerErrors", "poller")],
                ),
                "a poller invocation or tick failed",
                periods=2,
            ),
            any_in(
                "LambdaThrottles",
                total("Lambda throttles", [f.metric_throttles() for f in all_functions]),
                "Lambda throttled a duetime function",
                periods=2,
            ),
            any_in(
                "DynamoDbThrottles",
                total("DynamoDB throttles", dynamodb_throttles),
                "DynamoDB throttled duetime's tables",
                periods=2,
            ),
        ]
        for alarm in alarms:
            alarm.add_alarm_action(action)
        dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=f"duetime-{cdk.Aws.STACK_NAME}")
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="runs per minute",
                left=[
                    metric("RunsClaimed", "poller"),
                    metric("RunsStarted", "worker"),
                    metric("RunsSucceeded", "worker"),
                ],
            ),
            cloudwatch.GraphWidget(
                title="start lateness (s)", left=[metric("StartLateness", "worker", "p50"), lateness_p99]
            ),
            cloudwatch.GraphWidget(
                title="failures",
                left=[
                    dead,
                    metric("RunsFailed", "worker"),
                    metric("StaleWritesRejected", "worker"),
                    metric("LeasesExpired", "poller"),
                ],
            ),
            cloudwatch.GraphWidget(
                title="queues",
                left=[
                    queue.queue.metric_approximate_number_of_messages_visible(),
                    queue.queue.metric_approximate_age_of_oldest_message(),
                    queue.dead_letters.metric_approximate_number_of_messages_visible(),
                ],
            ),
        )
        dashboard.add_widgets(cloudwatch.AlarmStatusWidget(title="alarms", alarms=alarms, width=24))

    def _suppress_with_reasons(self) -> None:
        """Each suppression is as narrow as it can be and says why."""
        names = [
            *(f"Poller{group_label(g).replace('-', 'to')}" for g in self.config.partition_groups),
            "Worker",
            "ApiHandler",
            "Authorizer",
        ]
        roles = [f"/{self.stack_name}/{name}/Role/DefaultPolicy/Resource" for name in names]
        NagSuppressions.add_resource_suppressions_by_path(
            self,
            roles,
            [
                {
                    "id": "AwsSolutions-IAM5",
                    "applies_to": ["Resource::*"],
                    "reason": "X-Ray PutTraceSegments/PutTelemetryRecords support no resource-level "
                    "permissions; every other statement names its table, index, queue or topic.",
                }
            ],
        )
        NagSuppressions.add_resource_suppressions_by_path(
            self,
            [f"/{self.stack_name}/Api/CloudWatchRole/Resource"],
            [
                {
                    "id": "AwsSolutions-IAM4",
                    "reason": "API Gateway's account-level logging role uses the AWS managed "
                    "AmazonAPIGatewayPushToCloudWatchLogs policy, which exists for exactly this.",
                }
            ],
        )
        NagSuppressions.add_resource_suppressions_by_path(
            self,
            [f"/{self.stack_name}/Queue/DeadLetters/Resource"],
            [
                {
                    "id": "AwsSolutions-SQS3",
                    "reason": "This is the dead-letter queue: the end of the line. Any message "
                    "in it raises the DeadLetterDepth alarm.",
                }
            ],
        )
        NagSuppressions.add_resource_suppressions_by_path(
            self,
            [f"/{self.stack_name}/Api/DeploymentStage.v1-stage/Resource"],
            [
                {
                    "id": "AwsSolutions-APIG3",
                    "reason": "WAF is the operator's choice (cost, rule sets); throttling and the team "
                    "authorizer are in place. Attach a web ACL to the stage where policy requires one.",
                }
            ],
        )
        functions = [f"/{self.stack_name}/{name}/Function/Resource" for name in names]
        NagSuppressions.add_resource_suppressions_by_path(
            self,
            functions,
            [
                {
                    "id": "AwsSolutions-L1",
                    "reason": "python3.13 is the runtime the code asset is built and tested for "
                    "(scripts/build_lambda.sh); moving to a newer runtime is a deliberate, tested change.",
                }
            ],
        )
        public = [
            f"/{self.stack_name}/Api/Default/healthz/ANY/Resource",
            f"/{self.stack_name}/Api/Default/v1/openapi.json/ANY/Resource",
        ]
        NagSuppressions.add_resource_suppressions_by_path(
            self,
            public,
            [
                {
                    "id": "AwsSolutions-APIG4",
                    "reason": "The health check and the OpenAPI document are public by design.",
                },
                {"id": "AwsSolutions-COG4", "reason": "Public routes: no authorizer of any kind."},
            ],
        )
        NagSuppressions.add_resource_suppressions_by_path(
            self,
            [f"/{self.stack_name}/Api/Default/v1/{{proxy+}}/ANY/Resource"],
            [
                {
                    "id": "AwsSolutions-COG4",
                    "reason": "Teams authenticate with bearer tokens checked by the "
                    "TeamAuthorizer Lambda (a TOKEN authorizer), not Cognito.",
                }
            ],
        )


def check_with_cdk_nag(app: cdk.App) -> None:
    cdk.Aspects.of(app).add(AwsSolutionsChecks(verbose=True))
