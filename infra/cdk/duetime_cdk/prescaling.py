"""The prescaler: one function and one EventBridge rule that set the worker alias's provisioned concurrency
from the due index's forecast (``forecast_scaling``), and switch the worker's SQS event source to provisioned
mode ahead of a spike (``forecast_pollers``)."""

from __future__ import annotations

import json

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from constructs import Construct

from duetime.adapters.dynamodb.tables import DUE_INDEX
from duetime_cdk.config import StackConfig
from duetime_cdk.functions import DuetimeFunction, LambdaCode, allow
from duetime_cdk.queue import RunQueue
from duetime_cdk.storage import Storage

PRESCALER_INTERVAL = cdk.Duration.minutes(5)
PRESCALER_MEMORY_MB = 256
PRESCALER_TIMEOUT = cdk.Duration.seconds(60)
INVOCATIONS_PER_SQS_POLLER = 10  # Lambda docs: an SQS event poller in provisioned mode runs up to 10 at once

# Lambda API calls on provisioned concurrency: on the alias, whose configuration they set. IAM may evaluate
# such a call against the function's unqualified ARN as well, so the role names both.
PROVISIONED_CONCURRENCY_ACTIONS = [
    "lambda:GetProvisionedConcurrencyConfig",
    "lambda:PutProvisionedConcurrencyConfig",
    "lambda:DeleteProvisionedConcurrencyConfig",
]
# ...and on the worker's event source mapping (...:event-source-mapping:<UUID>): its provisioned mode.
EVENT_SOURCE_ACTIONS = ["lambda:GetEventSourceMapping", "lambda:UpdateEventSourceMapping"]


class Prescaler(Construct):
    """Every 5 minutes the prescaler counts the ``due`` index's rows for the next 10 minutes (a
    ``Select=COUNT`` Query per partition and minute bucket: keys only), and sets the worker alias's
    provisioned concurrency with the Lambda API (Get/Put/DeleteProvisionedConcurrencyConfig on ``live``):
    raised at once ahead of a busy minute, up to ``peak_workers``; lowered, down to ``baseline_workers``, only
    once the run queue's depth (``sqs:GetQueueAttributes``) says the fewer workers can start what waits
    (``duetime.scheduling.prescale``). It owns the alias's provisioned concurrency: no Application Auto
    Scaling target (``scheduled_scaling``) may set it as well. With ``forecast_pollers`` (the default, unless
    ``worker_min_pollers`` pins provisioned mode) it also switches the worker's SQS event source mapping,
    named by ``DUETIME_WORKER_EVENT_SOURCE_UUID``, to provisioned mode ahead of a minute standard mode would
    not start in time, and back to standard mode with ``worker_max_concurrency`` once the queue has drained
    (``lambda:Get/UpdateEventSourceMapping`` on that mapping's ARN only). A tick is never retried, and a
    late one is dropped once the next is due: each look starts from what it reads."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        code: LambdaCode,
        storage: Storage,
        queue: RunQueue,
        worker: lambda_.Alias,
        event_source: sources.SqsEventSource,
        config: StackConfig,
    ) -> None:
        """``worker``: the worker alias (``live``) the SQS event source invokes, whose provisioned
        concurrency the prescaler sets; ``event_source``: that source (bound), whose provisioned mode it
        switches with ``forecast_pollers``."""
        super().__init__(scope, id)
        environment = {
            "DUETIME_WORKER_FUNCTION_ARN": worker.function_arn,  # qualified: ...:function:<name>:live
            "DUETIME_PRESCALE_MAX_WORKERS": str(config.peak_workers),
            "DUETIME_PRESCALE_BASELINE_WORKERS": str(config.baseline_workers),
        }
        if config.worker_min_pollers is not None:  # provisioned mode starts a spike with its pollers' workers
            on_demand = config.worker_min_pollers * INVOCATIONS_PER_SQS_POLLER
            environment["DUETIME_PRESCALE_POLICY"] = json.dumps({"on_demand_workers": on_demand})
        statements = [
            allow(["dynamodb:Query"], [storage.index_arn("jobs", DUE_INDEX)]),  # Select=COUNT
            allow(PROVISIONED_CONCURRENCY_ACTIONS, [worker.function_arn, worker.lambda_.function_arn]),
            allow(["sqs:GetQueueAttributes"], [queue.queue.queue_arn]),  # the runs waiting
        ]
        if config.capacity_mode == "provisioned":  # the tables: on demand around a spike, back after
            environment |= {
                "DUETIME_TABLE_CAPACITY_MODE": "provisioned",
                "DUETIME_TABLE_MODE_POLICY": json.dumps(
                    {"busy_runs_per_minute": config.table_busy_runs_per_minute}
                ),
            }
            tables = [storage.table_arn(role) for role in ("jobs", "runs", "control")]
            statements += [
                allow(["dynamodb:DescribeTable", "dynamodb:UpdateTable"], tables),
                # the switch log, one item of the control table (adapters/dynamodb/table_modes.py)
                allow(["dynamodb:GetItem", "dynamodb:PutItem"], [storage.table_arn("control")]),
            ]
        if config.prescaler_switches_pollers:  # its event source: on ahead of a spike, off when drained
            environment |= {
                "DUETIME_WORKER_EVENT_SOURCE_UUID": event_source.event_source_mapping_id,
                "DUETIME_PRESCALE_MAX_POLLERS": str(config.worker_max_pollers),
                "DUETIME_WORKER_MAX_CONCURRENCY": str(config.worker_max_concurrency),
            }
            statements.append(allow(EVENT_SOURCE_ACTIONS, [event_source.event_source_mapping_arn]))
        self.function = DuetimeFunction(
            self,
            "Prescaler",
            code=code,
            handler="functions/prescaler/handler.handler",
            service="prescaler",
            timeout=PRESCALER_TIMEOUT,
            memory_mb=PRESCALER_MEMORY_MB,
            environment=environment,
            statements=statements,
        ).function
        self.rule = events.Rule(
            self,
            "Tick",
            schedule=events.Schedule.rate(PRESCALER_INTERVAL),
            description="duetime prescaler tick: provisioned workers from the due index's forecast",
        )
        # Neither EventBridge nor Lambda's async queue retries a tick: each look starts from what it reads,
        # and the next is at most 5 minutes away. EventBridge keeps an undelivered one 60 s (the smallest
        # maximum event age it takes); Lambda's queue drops one that waited as long as the interval.
        self.rule.add_target(
            targets.LambdaFunction(self.function, retry_attempts=0, max_event_age=cdk.Duration.seconds(60))
        )
        self.function.configure_async_invoke(max_event_age=PRESCALER_INTERVAL, retry_attempts=0)
