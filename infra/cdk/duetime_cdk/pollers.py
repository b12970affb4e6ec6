"""The pollers: one function and one EventBridge rule per partition group."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from duetime.adapters.dynamodb.tables import DUE_INDEX, REAP_INDEX
from duetime_cdk.config import group_label
from duetime_cdk.functions import DuetimeFunction, LambdaCode, allow
from duetime_cdk.observability import Alerts
from duetime_cdk.queue import RunQueue
from duetime_cdk.storage import Storage

POLLER_RUN_SECONDS = 55  # each EventBridge invocation ticks every second for the rest of its minute


class Pollers(Construct):
    """Each group's poller claims the due jobs of its partitions (the ``due`` index), writes and queues
    their runs, reaps runs nobody finished (the ``reap`` index) and keeps its partitions' low-water marks.
    Its rule invokes it every minute; the invocation ticks every second for 55 s."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        code: LambdaCode,
        partition_groups: list[list[int]],
        storage: Storage,
        queue: RunQueue,
        alerts: Alerts,
    ) -> None:
        super().__init__(scope, id)
        jobs, runs, control = (storage.table_arn(t) for t in ("jobs", "runs", "control"))
        statements = [
            allow(["dynamodb:Query"], [storage.index_arn("jobs", DUE_INDEX)]),
            allow(["dynamodb:UpdateItem"], [jobs]),  # claim: move the schedule
            allow(["dynamodb:PutItem", "dynamodb:UpdateItem"], [runs]),  # claim, reap
            allow(["dynamodb:Query"], [storage.index_arn("runs", REAP_INDEX)]),
            allow(["dynamodb:PutItem", "dynamodb:UpdateItem"], [control]),  # low-water marks
            allow(["dynamodb:BatchGetItem", "dynamodb:GetItem"], [control]),  # read the marks
            queue.allow_send(),
            alerts.allow_publish(),
        ]
        self.functions: list[lambda_.Function] = []
        for partitions in partition_groups:
            label = group_label(partitions)
            poller = DuetimeFunction(
                self,
                f"Poller{label.replace('-', 'to')}",
                code=code,
                handler="functions/poller/handler.handler",
                service="poller",
                environment={"DUETIME_PARTITIONS": label},
                timeout=cdk.Duration.seconds(POLLER_RUN_SECONDS + 15),
                statements=statements,
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
            self.functions.append(poller)
