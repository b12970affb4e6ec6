"""The worker: an SQS event source on an alias whose provisioned concurrency the prescaler sets from the
forecast, or a daily schedule raises for the peak."""

from __future__ import annotations

from aws_cdk import Aws, Fn
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from constructs import Construct

from duetime.domain.aws_targets import ROLE_NAME_PREFIX
from duetime_cdk.config import StackConfig
from duetime_cdk.functions import DuetimeFunction, LambdaCode, allow
from duetime_cdk.observability import Alerts
from duetime_cdk.queue import WORKER_TIMEOUT, RunQueue
from duetime_cdk.storage import Storage


class Workers(Construct):
    """The worker leases a run, takes a concurrency slot of its team, calls the target and records the
    result; it re-queues retries and publishes failed and dead runs. SQS feeds the alias ``live`` (partial
    batch failures, a concurrency cap). Its provisioned concurrency is set in one of two ways, never both:
    with ``forecast_scaling`` (the default) the prescaler (``prescaling.Prescaler``) sets it with the Lambda
    API ahead of minutes the due index shows busy, and nothing here scales the alias; with
    ``scheduled_scaling`` an Application Auto Scaling target raises it to ``peak_workers`` before the midnight
    peak and lowers it to ``baseline_workers`` after it, every day."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        code: LambdaCode,
        storage: Storage,
        queue: RunQueue,
        alerts: Alerts,
        config: StackConfig,
    ) -> None:
        super().__init__(scope, id)
        worker = DuetimeFunction(
            self,
            "Worker",
            code=code,
            handler="functions/worker/handler.handler",
            service="worker",
            timeout=WORKER_TIMEOUT,
            memory_mb=config.worker_memory_mb,
            statements=worker_statements(storage, queue, alerts),
        )
        self.role = worker.role  # the principal customers' trust policies name (the API probes as it too)
        self.function = worker.function
        self.alias = lambda_.Alias(
            self, "Live", alias_name=self._alias_name(config), version=self.function.current_version
        )
        self.event_source = self._event_source(queue, config)
        if config.scheduled_scaling:
            self._scale_on_schedule(config)

    def _alias_name(self, config: StackConfig) -> str:
        """``live``; on LocalStack ``live-<the worker's version>``, a name that changes with the version.

        LocalStack (2026.3) cannot move an alias to a new version in place, so an update that changes the
        worker would fail there and its rollback would delete the alias (what the event source invokes):
        its CloudFormation takes a Ref to a modified resource for a modified value
        (``change_set_model._resolve_intrinsic_function_ref``: "TODO: this should check the replacement
        flag"), so the alias's ``FunctionName``, a create-only property, reads as changed and the alias is
        replaced: a ``CreateAlias`` of the name that exists (ResourceConflictException "Alias already
        exists"); its alias provider has no update either (``lambda_alias.py``: NotImplementedError). With a
        name of its own per version, the replacement creates the new alias beside the old one and then
        deletes the old one, on every update, from or back to a release whose alias is ``live`` too. On AWS
        the alias is updated in place (its name and function unchanged), so it stays ``live`` there: its
        provisioned concurrency must survive a deploy."""
        if not config.localstack:
            return "live"
        return Fn.join("-", ["live", self.function.current_version.version])

    def _event_source(self, queue: RunQueue, config: StackConfig) -> sources.SqsEventSource:
        """The run queue feeding the alias, in standard mode or (``worker_min_pollers``) provisioned mode."""
        # Standard mode: Lambda's pollers ramp from 5 concurrent batches by up to 300 a minute, capped by
        # MaximumConcurrency. With worker_min_pollers, provisioned mode: that many pollers kept ready (billed
        # per poller-hour), scaling by up to 1,000 a minute; AWS refuses MaximumConcurrency with it, so
        # worker_max_pollers is the cap. LocalStack (2026.3) creates and keeps the setting, so it stays on
        # LocalStack too; its polling honours neither setting.
        pollers = (
            None
            if config.worker_min_pollers is None
            else lambda_.ProvisionedPollerConfig(
                minimum_pollers=config.worker_min_pollers, maximum_pollers=config.worker_max_pollers
            )
        )
        # With forecast_pollers the prescaler switches this mapping's mode by its UUID (Prescaler): the
        # template's MaximumConcurrency is what it restores, and the deployed mapping differs from the
        # template while a spike is served (deploy outside those minutes).
        event_source = sources.SqsEventSource(
            queue.queue,
            batch_size=config.worker_batch_size,
            report_batch_item_failures=True,
            max_concurrency=config.worker_max_concurrency if pollers is None else None,
            provisioned_poller_config=pollers,
        )
        self.alias.add_event_source(event_source)
        return event_source

    def _scale_on_schedule(self, config: StackConfig) -> None:
        """``peak_workers`` provisioned from ``peak_scale_up`` to ``peak_scale_down`` every day."""
        # Lambda's provisioned concurrency may scale to 0 (Application Auto Scaling's floor is 1 for
        # every other resource): outside the peak nothing stays provisioned unless baseline_workers says.
        scaling = self.alias.add_auto_scaling(
            min_capacity=config.baseline_workers, max_capacity=config.peak_workers
        )
        # A scheduled action scales out to its minimum and scales in only to its maximum ("if current
        # capacity is greater than the specified maximum capacity, Application Auto Scaling scales in"):
        # lowering only the minimum after the peak would leave all peak_workers provisioned all day.
        # So each action sets both, and the day's maximum is baseline_workers outside the peak.
        scaling.scale_on_schedule(
            "RaiseBeforePeak",
            schedule=appscaling.Schedule.expression(config.peak_scale_up),
            min_capacity=config.peak_workers,
            max_capacity=config.peak_workers,
        )
        scaling.scale_on_schedule(
            "LowerAfterPeak",
            schedule=appscaling.Schedule.expression(config.peak_scale_down),
            min_capacity=config.baseline_workers,
            max_capacity=config.baseline_workers,
        )


def worker_statements(storage: Storage, queue: RunQueue, alerts: Alerts) -> list[iam.PolicyStatement]:
    """What the worker may do: its runs, its team's slots, a job's notify channels, queue retries, publish
    failed and dead runs, and act under the roles of AWS targets."""
    jobs, runs, control = (storage.table_arn(t) for t in ("jobs", "runs", "control"))
    return [
        # A batch of one: single-item writes. A batch: the runs read in one BatchGetItem, and the
        # leases, results, slots written by PartiQL BatchExecuteStatement, which IAM authorizes per
        # statement as PartiQLUpdate / PartiQLInsert (adapters/dynamodb/worker_batches.py).
        allow(
            [
                "dynamodb:GetItem",
                "dynamodb:UpdateItem",
                "dynamodb:BatchGetItem",
                "dynamodb:PartiQLUpdate",
                "dynamodb:DeleteItem",
            ],
            [runs],
        ),  # lease, result; a met success deadline's watch and missing flag (deadline_watches.py)
        allow(
            [
                "dynamodb:GetItem",
                "dynamodb:UpdateItem",
                "dynamodb:Query",
                "dynamodb:BatchGetItem",
                "dynamodb:PartiQLUpdate",
                "dynamodb:PartiQLInsert",
            ],
            [control],
        ),  # team, slots, store clock
        # A job's notify channels, read when one of its runs fails or dies (duetime.execution.notifications);
        # the notice goes to the runs table's outbox (UpdateItem, above).
        allow(["dynamodb:GetItem"], [jobs]),
        queue.allow_send(),
        alerts.allow_publish(),
        # AWS targets (duetime.domain.aws_targets): the worker has no right to any team's resources; it
        # acts under the team's role, and may assume only roles that opt in by their name, in any
        # account. Each role's trust policy requires the team's external id, so no team can have
        # duetime act under another team's role (README, "AWS targets"). TagSession: the session
        # carries the team's tag (duetime:team), on those roles only.
        allow(
            ["sts:AssumeRole", "sts:TagSession"],
            [f"arn:{Aws.PARTITION}:iam::*:role/{ROLE_NAME_PREFIX}*"],
        ),
    ]
