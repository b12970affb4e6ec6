"""The reconciler: one function and one EventBridge rule that every minute check, from the tables, that what
was due got claimed and what was claimed got started (``duetime.scheduling.reconcile``), and publish the
figures the absence alarms watch (``observability.py``)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from constructs import Construct

from duetime.adapters.dynamodb.tables import DUE_INDEX, REAP_INDEX
from duetime_cdk.functions import DuetimeFunction, LambdaCode, allow
from duetime_cdk.storage import Storage

RECONCILER_INTERVAL = cdk.Duration.minutes(1)
RECONCILER_MEMORY_MB = 256
RECONCILER_TIMEOUT = cdk.Duration.seconds(50)  # under the interval: two ticks never overlap for long


class Reconciler(Construct):
    """Every minute, for each of the 64 partitions: a Query (Limit) of the ``due`` index from the partition's
    low-water mark (BatchGetItem on the control table), a Query (Limit) of the runs table's ``reap`` index
    and a BatchGetItem of the runs it names; its report kept in the control table (PutItem; ``duetime
    system alarms --local`` reads them with Query). Nothing else: it never writes a job or a run."""

    def __init__(self, scope: Construct, id: str, *, code: LambdaCode, storage: Storage) -> None:
        super().__init__(scope, id)
        control = storage.table_arn("control")
        self.function = DuetimeFunction(
            self,
            "Reconciler",
            code=code,
            handler="functions/reconciler/handler.handler",
            service="reconciler",
            timeout=RECONCILER_TIMEOUT,
            memory_mb=RECONCILER_MEMORY_MB,
            statements=[
                allow(["dynamodb:Query"], [storage.index_arn("jobs", DUE_INDEX)]),
                allow(["dynamodb:Query"], [storage.index_arn("runs", REAP_INDEX)]),
                allow(["dynamodb:BatchGetItem"], [storage.table_arn("runs"), control]),
                allow(["dynamodb:PutItem", "dynamodb:Query"], [control]),
            ],
        ).function
        self.rule = events.Rule(
            self,
            "Tick",
            schedule=events.Schedule.rate(RECONCILER_INTERVAL),
            description="duetime reconciler tick: what was due got claimed, what was claimed got started",
        )
        # A tick is never retried: the next is a minute away and looks afresh. A missing tick is what the
        # heartbeat alarm (EngineHeartbeat) is for.
        self.rule.add_target(
            targets.LambdaFunction(self.function, retry_attempts=0, max_event_age=cdk.Duration.seconds(60))
        )
        self.function.configure_async_invoke(max_event_age=RECONCILER_INTERVAL, retry_attempts=0)
