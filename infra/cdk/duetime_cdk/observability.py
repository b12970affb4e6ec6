"""The alerts topic, and the alarms and dashboard that watch the other capabilities."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from duetime.domain.alarms import RECONCILER_ALARMS, RECONCILER_SERVICE, Comparison, Missing
from duetime_cdk.queue import RunQueue

MINUTE = cdk.Duration.minutes(1)
_COMPARISONS = {
    Comparison.GREATER: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
    Comparison.LESS: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
}
_MISSING = {
    Missing.BREACHING: cloudwatch.TreatMissingData.BREACHING,
    Missing.NOT_BREACHING: cloudwatch.TreatMissingData.NOT_BREACHING,
}


class Alerts(Construct):
    """The SNS topic dead and failed runs (from the functions) and every alarm publish to: SSE with the
    AWS managed key, TLS only, optionally an e-mail subscription."""

    def __init__(self, scope: Construct, id: str, *, email: str | None) -> None:
        super().__init__(scope, id)
        self.topic = sns.Topic(
            self,
            "Topic",
            display_name="duetime alerts",
            enforce_ssl=True,
            master_key=kms.Alias.from_alias_name(self, "SnsKey", "alias/aws/sns"),
        )
        if email:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))

    def allow_publish(self) -> iam.PolicyStatement:
        return iam.PolicyStatement(actions=["sns:Publish"], resources=[self.topic.topic_arn])


def _metric(name: str, service: str, statistic: str = "Sum") -> cloudwatch.Metric:
    """One of duetime's own metrics (powertools, namespace duetime), per minute, of this installation: every
    function publishes with the ``installation`` dimension (its stack's name, ``DUETIME_INSTALLATION``), so
    two stacks in one region share no metric and no alarm."""
    return cloudwatch.Metric(
        namespace="duetime",
        metric_name=name,
        dimensions_map={"service": service, "installation": cdk.Aws.STACK_NAME},
        statistic=statistic,
        period=MINUTE,
    )


# CloudWatch: an alarm on a metric math expression references at most 10 metrics, a hard limit
# (AmazonCloudWatch/latest/monitoring/alarm-limits.md, "Limits that apply to alarms based on metric math
# expressions"). A total over more metrics (a stack of many partition groups has a poller function each) is
# watched by one alarm per 10 of them.
ALARM_METRICS_MAX = 10


def _totals(label: str, metrics: Sequence[cloudwatch.IMetric]) -> list[cloudwatch.MathExpression]:
    """``_total`` of ``metrics``, in parts of at most ``ALARM_METRICS_MAX`` (one part when they fit)."""
    parts = [metrics[i : i + ALARM_METRICS_MAX] for i in range(0, len(metrics), ALARM_METRICS_MAX)]
    if len(parts) == 1:
        return [_total(label, metrics)]
    return [_total(f"{label} ({n} of {len(parts)})", part) for n, part in enumerate(parts, start=1)]


def _total(label: str, metrics: Sequence[cloudwatch.IMetric]) -> cloudwatch.MathExpression:
    """The sum of ``metrics``, a missing datapoint counting as zero."""
    using = {f"m{i}": m for i, m in enumerate(metrics)}
    return cloudwatch.MathExpression(
        expression=" + ".join(f"FILL({k}, 0)" for k in using), using_metrics=using, label=label, period=MINUTE
    )


class Observability(Construct):
    """Alarms (to the alerts topic) on start lateness p99 > 5 s, dead runs, dead letters, poller errors,
    prescaler errors (when there is one), poller takeovers (a holder died), unreadable job rows (quarantined)
    and Lambda and DynamoDB throttles; a dashboard of runs, lateness, failures and queues, unless left out."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        alerts: Alerts,
        queue: RunQueue,
        tables: list[dynamodb.ITableV2],
        pollers: list[lambda_.Function],
        functions: list[lambda_.Function],
        prescaler: lambda_.Function | None = None,
        dashboard: bool = True,
        indexes: Mapping[str, Sequence[str]] | None = None,
        reconciler: lambda_.Function | None = None,
        worker: lambda_.Function | None = None,
        api: Sequence[lambda_.Function] = (),
        rest_api: apigateway.RestApi | None = None,
    ) -> None:
        """``indexes``: the global secondary indexes of each of ``tables`` by the table's construct id
        (their throttles are watched too); ``reconciler``, ``worker``, ``api`` and ``rest_api``: what the
        absence and error alarms watch (``_absence_alarms``, ``_error_alarms``)."""
        super().__init__(scope, id)
        lateness_p99 = _metric("StartLateness", "worker", "p99")
        dead = _total("dead runs", [_metric("RunsDead", "worker"), _metric("RunsDead", "poller")])
        self.alarms = [
            *self._run_alarms(queue, lateness_p99, dead),
            *self._poller_alarms(pollers, prescaler),
            *self._throttle_alarms(functions, tables, indexes or {}),
            *(self._absence_alarms() if reconciler else []),
            *self._error_alarms(reconciler, worker, api, rest_api),
        ]
        action = cloudwatch_actions.SnsAction(alerts.topic)
        for alarm in self.alarms:
            alarm.add_alarm_action(action)
        if dashboard:
            self._dashboard(queue, lateness_p99, dead)

    def _run_alarms(
        self, queue: RunQueue, lateness_p99: cloudwatch.IMetric, dead: cloudwatch.IMetric
    ) -> list[cloudwatch.Alarm]:
        """Runs started late, runs gone dead, run messages dead-lettered."""
        return [
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
            self._any_in("DeadRuns", dead, "runs went dead (out of attempts)"),
            self._any_in(
                "DeadLetterDepth",
                queue.dead_letters.metric_approximate_number_of_messages_visible(period=MINUTE),
                "run messages reached the dead-letter queue",
            ),
        ]

    def _poller_alarms(
        self, pollers: list[lambda_.Function], prescaler: lambda_.Function | None
    ) -> list[cloudwatch.Alarm]:
        """Poller errors, prescaler errors (when there is one), poller takeovers, unreadable job rows."""
        poller_errors = _totals(
            "poller errors", [*(p.metric_errors() for p in pollers), _metric("PollerErrors", "poller")]
        )
        return [
            *self._any_in_each(
                "PollerErrors", poller_errors, "a poller invocation or tick failed", periods=2
            ),
            *(
                [
                    self._any_in(
                        "PrescalerErrors",
                        prescaler.metric_errors(period=MINUTE, statistic="Sum"),
                        "the prescaler failed: a busy minute may find no workers provisioned ahead",
                    )
                ]
                if prescaler
                else []
            ),
            self._any_in(
                "PollerTakeovers",
                _metric("PollerTakeovers", "poller"),
                "a poller died and a standby took its partitions over",
            ),
            self._any_in(
                "UnreadableRows",
                _metric("UnreadableRows", "poller"),
                "a due job row could not be read: quarantined, that job does not run, the others do",
            ),
        ]

    def _throttle_alarms(
        self,
        functions: list[lambda_.Function],
        tables: list[dynamodb.ITableV2],
        indexes: Mapping[str, Sequence[str]],
    ) -> list[cloudwatch.Alarm]:
        """Lambda throttling any of ``functions``, DynamoDB throttling any of ``tables`` or their indexes."""
        dynamodb_throttles: list[cloudwatch.IMetric] = [
            t.metric(name, statistic="Sum", period=MINUTE)
            for t in tables
            for name in ("ReadThrottleEvents", "WriteThrottleEvents")
        ]
        # A GSI's throttles are its own metric: the TableName dimension alone counts the table's, not its
        # indexes'; an index's need TableName and GlobalSecondaryIndexName (DynamoDB developer guide,
        # "DynamoDB Metrics and dimensions", ReadThrottleEvents / WriteThrottleEvents).
        dynamodb_throttles += [
            cloudwatch.Metric(
                namespace="AWS/DynamoDB",
                metric_name=name,
                dimensions_map={"TableName": t.table_name, "GlobalSecondaryIndexName": index},
                statistic="Sum",
                period=MINUTE,
            )
            for t in tables
            for index in indexes.get(t.node.id, ())
            for name in ("ReadThrottleEvents", "WriteThrottleEvents")
        ]
        return [
            *self._any_in_each(
                "LambdaThrottles",
                _totals("Lambda throttles", [f.metric_throttles() for f in functions]),
                "Lambda throttled a duetime function",
                periods=2,
            ),
            *self._any_in_each(
                "DynamoDbThrottles",
                _totals("DynamoDB throttles", dynamodb_throttles),
                "DynamoDB throttled duetime's tables",
                periods=2,
            ),
        ]

    def _absence_alarms(self) -> list[cloudwatch.Alarm]:
        """The reconciler's alarms (``duetime.domain.alarms.RECONCILER_ALARMS``, the list ``duetime system
        alarms --local`` evaluates too): due jobs unclaimed, fires missed, runs not started, and the heartbeat
        whose missing data breaches. Each definition says why it treats missing data as it does."""
        return [
            cloudwatch.Alarm(
                self,
                definition.name,
                metric=_metric(definition.metric, RECONCILER_SERVICE, definition.statistic),
                threshold=definition.threshold,
                comparison_operator=_COMPARISONS[definition.comparison],
                evaluation_periods=definition.evaluation_periods,
                datapoints_to_alarm=definition.datapoints_to_alarm,
                alarm_description=definition.description,
                treat_missing_data=_MISSING[definition.missing],
            )
            for definition in RECONCILER_ALARMS
        ]

    def _error_alarms(
        self,
        reconciler: lambda_.Function | None,
        worker: lambda_.Function | None,
        api: Sequence[lambda_.Function],
        rest_api: apigateway.RestApi | None,
    ) -> list[cloudwatch.Alarm]:
        """Lambda errors of the worker, the api functions and the reconciler; the API's 5xx answers. Missing
        data is not breaching: Lambda and API Gateway publish no data point in a minute without invocations
        or requests, and a quiet minute is no failure (the heartbeat watches the engine's absence)."""
        alarms: list[cloudwatch.Alarm] = []
        if worker is not None:
            errors = worker.metric_errors(period=MINUTE, statistic="Sum")
            alarms.append(self._any_in("WorkerErrors", errors, "a worker invocation failed", periods=2))
        if api:
            errors_of = _totals("api errors", [f.metric_errors() for f in api])
            alarms += self._any_in_each("ApiErrors", errors_of, "an api or authorizer invocation failed")
        if rest_api is not None:
            server_errors = rest_api.metric_server_error(period=MINUTE, statistic="Sum")
            alarms.append(self._any_in("Api5xx", server_errors, "the API answered 5xx", periods=2))
        if reconciler is not None:
            failed = reconciler.metric_errors(period=MINUTE, statistic="Sum")
            alarms.append(self._any_in("ReconcilerErrors", failed, "a reconciler tick failed", periods=2))
        return alarms

    def _any_in_each(
        self, id: str, totals: list[cloudwatch.MathExpression], description: str, periods: int = 1
    ) -> list[cloudwatch.Alarm]:
        """``_any_in`` on each part of a total: the first keeps ``id``, the next are ``id`` + 2, 3, ..."""
        return [
            self._any_in(id if n == 1 else f"{id}{n}", total, description, periods)
            for n, total in enumerate(totals, start=1)
        ]

    def _any_in(
        self, id: str, value: cloudwatch.IMetric, description: str, periods: int = 1
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

    def _dashboard(self, queue: RunQueue, lateness_p99: cloudwatch.IMetric, dead: cloudwatch.IMetric) -> None:
        dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=f"duetime-{cdk.Aws.STACK_NAME}")
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="runs per minute",
                left=[
                    _metric("RunsClaimed", "poller"),
                    _metric("RunsStarted", "worker"),
                    _metric("RunsSucceeded", "worker"),
                ],
            ),
            cloudwatch.GraphWidget(
                title="start lateness (s)", left=[_metric("StartLateness", "worker", "p50"), lateness_p99]
            ),
            cloudwatch.GraphWidget(
                title="failures",
                left=[
                    dead,
                    _metric("RunsFailed", "worker"),
                    _metric("StaleWritesRejected", "worker"),
                    _metric("LeasesExpired", "poller"),
                    _metric("UnreadableRows", "poller"),  # `duetime system quarantine` lists them
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
        dashboard.add_widgets(cloudwatch.AlarmStatusWidget(title="alarms", alarms=self.alarms, width=24))
