"""The pollers: one function and one EventBridge rule per partition group."""

from __future__ import annotations

import math
from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from duetime.adapters.dynamodb.tables import DUE_INDEX, REAP_INDEX
from duetime.capacity.plan import MEASURED_PRELOAD_BYTES_PER_JOB, preload_mb
from duetime.capacity.plan_midnight import TABLE_NAMES, claims_per_second_within
from duetime.capacity.warm_throughput import NEW_TABLE_WRITE_UNITS, TABLE_QUOTA_UNITS
from duetime.domain.ids import PARTITIONS
from duetime.domain.partitions import group_label
from duetime_cdk.functions import DuetimeFunction, LambdaCode, allow
from duetime_cdk.observability import Alerts
from duetime_cdk.queue import RunQueue
from duetime_cdk.storage import Storage

# Each invocation runs 135 s though its rule fires every 60 s, so two overlap at any moment: one holds the
# group's lease and claims, the other stands by with the next minute preloaded and takes over at an agreed
# whole second (or within ~6.5 s of a holder's death). The handler stops 10 s before the timeout at the
# latest. See duetime.scheduling.poller_lease and the README's "How it works".
POLLER_RUN_SECONDS = 135
POLLER_TIMEOUT_SECONDS = 150

# A poller's memory is sized for midnight: MIDNIGHT_JOBS due in one minute, spread over the partitions, so a
# group's poller preloads its share (125,000 jobs for the default 4 groups of 16) at
# MEASURED_PRELOAD_BYTES_PER_JOB (422 bytes a job, `duetime bench preload --jobs 125000`, BENCHMARKS.md
# "Preload memory"), PRELOAD_HEADROOM times over (the minute just fired stays indexed for a minute, for the
# sweep, while the next loads; the fire's chunks and the allocator's slack), on top of POLLER_BASE_MB, the
# process before it loads anything (the same bench's rss_before_load_mb: interpreter, boto3, pydantic,
# duetime; the bench's peak with 125,000 rows loaded was 129 MB). Never below POLLER_MIN_MEMORY_MB: Lambda's
# CPU share follows memory, and loading and firing a minute are CPU-bound (loading 125,000 rows took 7.9 s
# of CPU in the bench: more than 512 MB's share of a vCPU gives in the 10 s lead already). For the
# defaults: 73 + 2 x 50 = 174 MB needed, 512 configured (whole models, 5,003 bytes a job, needed 1,280).
MIDNIGHT_JOBS = 500_000
POLLER_BASE_MB = 73
PRELOAD_HEADROOM = 2.0
POLLER_MIN_MEMORY_MB = 512
# A busy minute's helpers (duetime.scheduling.fan_out) are started 30 s before it and serve it and up to 90 s
# after: their timeout leaves room past that (the handler's own end is the assignment's serve_until).
HELPER_TIMEOUT_SECONDS = 300
HELPER_MEMORY_MB = 1769  # Lambda: one vCPU at 1,769 MB; claiming is CPU-bound


def poller_memory_mb(partitions: int, bytes_per_job: float = MEASURED_PRELOAD_BYTES_PER_JOB) -> int:
    """The memory size (MB, a multiple of 64) of the poller of a group of ``partitions`` partitions."""
    preload = preload_mb(MIDNIGHT_JOBS * partitions / PARTITIONS, bytes_per_job) * PRELOAD_HEADROOM
    return max(POLLER_MIN_MEMORY_MB, 64 * math.ceil((POLLER_BASE_MB + preload) / 64))


class Pollers(Construct):
    """Each group's poller claims the due jobs of its partitions (the ``due`` index), writes and queues
    their runs, reaps runs nobody finished (the ``reap`` index) and keeps its partitions' low-water marks.
    Its rule invokes it every minute; each invocation may run 135 s, so one is always there to take the
    group's lease over. It hands the lease to the next invocation as soon as that one is ready and returns,
    unless ``hot_standby`` (or a busy minute) keeps the next one waiting to the end of the run
    (``duetime.scheduling.poller_lease``). A quiet group's holder gives the lease back and returns early
    (``duetime.scheduling.quiet``); the API wakes the group when a job is written due before the next tick
    (``duetime.scheduling.wake``): ``wake_environment`` and ``allow_wake`` are what it needs for that."""

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
        worker: lambda_.IFunction,
        hot_standby: bool = False,
        rest_when_quiet: bool = True,
        fan_out: bool = True,
        helper_memory_mb: int = HELPER_MEMORY_MB,
        warm_write_units: Mapping[str, int] | None = None,
    ) -> None:
        """``worker``: the worker alias the SQS event source invokes; pollers warm it before each minute
        that holds runs (``duetime.scheduling.warmup``)."""
        super().__init__(scope, id)
        statements = self._statements(storage, queue, alerts, worker)
        # The helpers of busy minutes (duetime.scheduling.fan_out): the pollers' code and rights, sized for
        # CPU, invoked by a group's holder only (asynchronously, its event naming the slice and minute). Idle,
        # it costs nothing: no rule invokes it.
        self.helper: lambda_.Function | None = None
        helper_environment: dict[str, str] = {}
        if fan_out:
            self.helper = self._helper(code, worker, helper_memory_mb, statements)
            statements = [*statements, allow(["lambda:InvokeFunction"], [self.helper.function_arn])]
            helper_environment = {"DUETIME_POLLER_HELPER_FUNCTION": self.helper.function_name}
        # Each group's share of the claims a second the tables take with their starts
        # (duetime.scheduling.claim_pace), from their warm throughput: a busy minute's claimers together never
        # ask a table more than it takes. None (unpaced) on LocalStack, whose tables take anything.
        self.claims_per_second = (
            claims_per_second_for(warm_write_units) / len(partition_groups)
            if warm_write_units is not None
            else None
        )
        every_group = {
            "DUETIME_WORKER_FUNCTION_ARN": worker.function_arn,
            "DUETIME_POLLER_HOT_STANDBY": "true" if hot_standby else "false",
            "DUETIME_POLLER_REST_WHEN_QUIET": "true" if rest_when_quiet else "false",
            **helper_environment,
            **self._pace_environment(),
        }
        self.labels = [group_label(p) for p in partition_groups]  # as each group's rule's input names it
        memory = [poller_memory_mb(len(p)) for p in partition_groups]
        self.functions = [
            self._group_poller(code, label, memory_mb, every_group, statements)
            for label, memory_mb in zip(self.labels, memory, strict=True)
        ]
        # The function a wake invokes, whatever the group: the event names the group (its rule's input plus
        # ``wake``; the handler serves the event's partitions, not DUETIME_PARTITIONS), and the API takes one
        # function name. The one sized for the largest group (the first of equals: the first group's), so
        # that it can preload any group's minute; like the rules, the function itself, not an alias.
        self.waker = self.functions[memory.index(max(memory))]
        self.rest_when_quiet = rest_when_quiet

    def _pace_environment(self) -> dict[str, str]:
        """The group's share of the claims a second, which its claims are paced to (none: unpaced)."""
        if not self.claims_per_second:
            return {}
        return {"DUETIME_CLAIMS_PER_SECOND": f"{self.claims_per_second:.1f}"}

    def _statements(
        self, storage: Storage, queue: RunQueue, alerts: Alerts, worker: lambda_.IFunction
    ) -> list[iam.PolicyStatement]:
        """What a poller (and a helper) may do: claim, reap, watch deadlines, notify, keep the marks, queue
        runs, alert, warm the worker."""
        jobs, runs, control = (storage.table_arn(t) for t in ("jobs", "runs", "control"))
        return [
            allow(["dynamodb:Query"], [storage.index_arn("jobs", DUE_INDEX)]),
            # A claim reads its jobs' versions (BatchGetItem), then writes the run rows and their reap
            # tickets (PartiQL INSERT) and moves the schedules (PartiQL UPDATE), in BatchExecuteStatements,
            # which IAM authorizes per statement (store.claim, reap_tickets.py).
            allow(["dynamodb:BatchGetItem", "dynamodb:UpdateItem", "dynamodb:PartiQLUpdate"], [jobs]),
            allow(["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:PartiQLInsert"], [runs]),
            # The reaper reads each run at its check and moves live runs' checks by PartiQL
            # BatchExecuteStatement, which IAM authorizes per statement as PartiQLUpdate (reap_checks.py);
            # at a reap ticket's check it deletes the ticket (BatchWriteItem).
            allow(["dynamodb:BatchGetItem", "dynamodb:PartiQLUpdate", "dynamodb:BatchWriteItem"], [runs]),
            allow(["dynamodb:Query"], [storage.index_arn("runs", REAP_INDEX)]),
            # Success deadlines (deadline_watches.py): a due watch's run and job read, the job's missing
            # flag read, set (PutItem) and cleared, the watch deleted.
            allow(["dynamodb:GetItem", "dynamodb:DeleteItem"], [runs]),
            allow(["dynamodb:GetItem"], [jobs]),
            # Job notifications (adapters/dynamodb/outbox.py, notify_channels.py): groups leased and settled
            # by UpdateItem (above); SNS channels are topics of this account and region, published to only
            # when the topic's tag duetime:team names the job's team, checked in code (ListTagsForResource)
            # before each publish.
            allow(
                ["sns:Publish", "sns:ListTagsForResource"],
                [cdk.Stack.of(self).format_arn(service="sns", resource="*")],
            ),
            # Low-water marks: a minute's marks move in one PartiQL BatchExecuteStatement (authorized
            # per statement as PartiQLUpdate: DynamoStore.advance_low_water_marks); PutItem, UpdateItem too.
            allow(["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:PartiQLUpdate"], [control]),
            allow(["dynamodb:BatchGetItem", "dynamodb:GetItem"], [control]),  # read the marks
            queue.allow_send(),
            alerts.allow_publish(),
            allow(["lambda:InvokeFunction"], [worker.function_arn]),  # warm-ups (asynchronous)
        ]

    def _helper(
        self,
        code: LambdaCode,
        worker: lambda_.IFunction,
        memory_mb: int,
        statements: list[iam.PolicyStatement],
    ) -> lambda_.Function:
        """The function a group's holder starts for a busy minute's slices (``poller_fan_out``)."""
        helper = DuetimeFunction(
            self,
            "PollerHelper",
            code=code,
            handler="functions/poller/helper.handler",
            service="poller-helper",
            environment={"DUETIME_WORKER_FUNCTION_ARN": worker.function_arn},
            timeout=cdk.Duration.seconds(HELPER_TIMEOUT_SECONDS),
            memory_mb=memory_mb,
            statements=statements,
        ).function
        # A helper event that waited a minute in Lambda's queue is past its minute; one that failed is
        # not retried (its slice never left the holder, or comes back to it when the lease expires).
        helper.configure_async_invoke(max_event_age=cdk.Duration.seconds(60), retry_attempts=0)
        return helper

    def _group_poller(
        self,
        code: LambdaCode,
        label: str,
        memory_mb: int,
        every_group: dict[str, str],
        statements: list[iam.PolicyStatement],
    ) -> lambda_.Function:
        """The poller of the partitions ``label`` names, and the rule that ticks it every minute."""
        poller = DuetimeFunction(
            self,
            f"Poller{construct_name(label)}",
            code=code,
            handler="functions/poller/handler.handler",
            service="poller",
            environment={"DUETIME_PARTITIONS": label, **every_group},
            timeout=cdk.Duration.seconds(POLLER_TIMEOUT_SECONDS),
            memory_mb=memory_mb,
            statements=statements,
        ).function
        rule = events.Rule(
            self,
            f"Tick{construct_name(label)}",
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
        # A tick that waited in Lambda's async queue for a minute is dropped, not run late (the next
        # one is already there); none is retried (one that failed was a whole invocation's worth).
        poller.configure_async_invoke(max_event_age=cdk.Duration.seconds(60), retry_attempts=0)
        return poller

    def wake_environment(self) -> dict[str, str]:
        """The settings the API's waker reads (``duetime.wiring.make_waker``): the function to invoke, the
        deployed groups' labels (";"-separated: a label may hold a ",") and the run the rules ask for."""
        return {
            "DUETIME_POLLER_FUNCTION_NAME": self.waker.function_name,
            "DUETIME_POLLER_GROUPS": ";".join(self.labels),
            "DUETIME_POLLER_RUN_SECONDS": str(POLLER_RUN_SECONDS),
            "DUETIME_POLLER_REST_WHEN_QUIET": "true" if self.rest_when_quiet else "false",  # else no wakes
        }

    def allow_wake(self) -> iam.PolicyStatement:
        """Invoking the wakes' function (asynchronously), and no other."""
        return allow(["lambda:InvokeFunction"], [self.waker.function_arn])


def claims_per_second_for(warm_write_units: Mapping[str, int]) -> float:
    """The claims a second the tables and indexes take, each at its warm throughput (or a new table's
    4,000), when every claim's run starts as fast (``duetime.capacity.plan_midnight``)."""
    capacity = {
        name: float(max(NEW_TABLE_WRITE_UNITS, min(TABLE_QUOTA_UNITS, warm_write_units.get(name, 0))))
        for name in TABLE_NAMES
    }
    return claims_per_second_within(capacity)


def construct_name(label: str) -> str:
    """``"0-15"`` -> ``"0to15"``, ``"0-7,32-39"`` -> ``"0to7and32to39"``."""
    return label.replace("-", "to").replace(",", "and")
