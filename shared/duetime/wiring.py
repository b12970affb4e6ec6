"""Assembling the parts from settings. Handlers call these once per process (lazily, not at import)."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from datetime import timedelta
from types import ModuleType
from typing import TYPE_CHECKING

from duetime import build_info
from duetime.adapters.aws.alerts import SnsAlerts, StoredAlerts
from duetime.adapters.aws.aws_target_caller import Boto3AwsTargetCaller
from duetime.adapters.aws.clients import client, new_client
from duetime.adapters.aws.cloudwatch_alarms import stack_alarm_readings
from duetime.adapters.aws.function_switch import (
    EngineFunctions,
    local_engine_functions,
    stack_engine_functions,
)
from duetime.adapters.aws.lambda_helpers import LambdaHelperLauncher
from duetime.adapters.aws.lambda_provisioning import LambdaEventPollers, LambdaProvisionedWorkers
from duetime.adapters.aws.lambda_starter import LambdaPollerStarter
from duetime.adapters.aws.lambda_warmer import LambdaWorkerWarmer
from duetime.adapters.aws.notify_channels import SnsTopics
from duetime.adapters.aws.role_trust_probe import Boto3RoleTrustProbe
from duetime.adapters.aws.sqs import SqsRunBacklog, SqsRunQueue
from duetime.adapters.aws.stack_outputs import stack_tables
from duetime.adapters.aws.store_clock import StoreClock
from duetime.adapters.dynamodb.catalog import DynamoCatalog
from duetime.adapters.dynamodb.installation import DynamoInstallation
from duetime.adapters.dynamodb.rate_limits import DynamoRateLimiter
from duetime.adapters.dynamodb.run_budgets import DynamoRunBudget
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.dynamodb.table_modes import DynamoTableModes
from duetime.adapters.dynamodb.tables import TableNames
from duetime.adapters.http_target import HttpTargetCaller
from duetime.api.service import JobService
from duetime.api.team_admin import TeamAdmin
from duetime.domain.alarms import RECONCILER_ALARMS, AlarmReading, Sample, evaluate
from duetime.domain.clock import SystemClock
from duetime.execution.notification_senders import ChannelSender, WebhookSender
from duetime.execution.notifications import BackgroundDelivery, JobNotifier
from duetime.execution.worker import Worker, WorkerConfig
from duetime.heap import settle_heap
from duetime.ports import AlertSink, RoleTrustProbe
from duetime.ports.functions import PollerStarter
from duetime.ports.metrics import installation_dimensions
from duetime.scheduling.fan_out import FanOutPolicy
from duetime.scheduling.poller import Poller, PollerConfig
from duetime.scheduling.poller_lease import LeaseTimings, PollerShift
from duetime.scheduling.prescale import PrescalePolicy, Prescaler
from duetime.scheduling.quiet import QuietTimings
from duetime.scheduling.reconcile import Reconciler, ReconcilerConfig
from duetime.scheduling.table_modes import TableModePolicy, TableModeSwitcher
from duetime.scheduling.wake import GroupWaker, partition_groups
from duetime.settings import Settings
from duetime.upgrades.written_format import WrittenFormat

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_sqs.client import SQSClient


@functools.cache
def settings() -> Settings:
    return Settings.from_env(dict(os.environ))


def metric_dimensions() -> dict[str, str]:
    """Every function's default metric dimensions (beside powertools' ``service``): the installation."""
    return installation_dimensions(settings().installation)


def make_store(s: Settings, dynamodb: DynamoDBClient | None = None) -> DynamoStore:
    """The store; it writes items in the installation's format (``written_format``)."""
    dynamodb = dynamodb or client("dynamodb")
    names = TableNames(s.jobs_table, s.runs_table, s.control_table)
    return DynamoStore(
        dynamodb,
        names,
        lease_check=timedelta(seconds=s.lease_seconds),
        write_format=written_format(dynamodb, names),
    )


def written_format(dynamodb: DynamoDBClient, names: TableNames) -> WrittenFormat:
    """The stored format this process writes, from the installation's record on ``names``' control table
    (which also learns that this release runs: ``duetime.upgrades.written_format``)."""
    return WrittenFormat(DynamoInstallation(dynamodb, names), build_info.version, SystemClock().now)


def operator_tables(s: Settings, stack: str | None = None) -> TableNames | None:
    """The tables an operator's command (``duetime system ...``) works on: the deployed ``stack``'s (None
    when there is no such stack yet), else the settings'."""
    if stack is None:
        return TableNames(s.jobs_table, s.runs_table, s.control_table)
    return stack_tables(new_client("cloudformation"), stack)


def installation_record(s: Settings, stack: str | None = None) -> DynamoInstallation | None:
    """The installation's record (``duetime system installation``, ``finalize``, ``deploy-check``)."""
    names = operator_tables(s, stack)
    return DynamoInstallation(client("dynamodb"), names) if names is not None else None


def deploy_gate_record() -> DynamoInstallation:
    """The record the deploy check reads (``functions/deploy_gate``): the stack's own tables."""
    record = installation_record(settings())
    assert record is not None  # named by the settings, never by a stack
    return record


def cfn_respond(event: dict[str, object], physical_id: str, succeeded: bool, reason: str) -> int:
    """Answer a CloudFormation custom resource request (``adapters.aws.cfn_response``)."""
    from duetime.adapters.aws.cfn_response import respond

    return respond(event, physical_id, succeeded, reason)


def alarm_readings(s: Settings, stack: str | None = None) -> list[AlarmReading]:
    """The alarms' states now (``duetime system alarms``): CloudWatch's for a deployed ``stack``; else the
    reconciler's alarms evaluated over its reports kept in the settings' tables (``duetime local``)."""
    if stack is not None:
        return stack_alarm_readings(new_client("cloudformation"), None, stack)
    store = DynamoStore(client("dynamodb"), TableNames(s.jobs_table, s.runs_table, s.control_table))
    reports = store.recent_reconciliations(REPORTS_EVALUATED)
    samples = [Sample(r.at, dict(r.values)) for r in reports]
    return evaluate(RECONCILER_ALARMS, samples, SystemClock().now())


def engine_functions(part: str, stack: str | None, local_url: str | None) -> EngineFunctions:
    """The functions of an engine ``part`` (``duetime system pollers|workers|reconciler``): the deployed
    ``stack``'s, else those of the ``duetime local`` answering at ``local_url``."""
    if stack is not None:
        return stack_engine_functions(new_client("lambda"), new_client("cloudformation"), stack, part)
    return local_engine_functions(new_client("lambda", local_url), part)


def quarantine_record(s: Settings, stack: str | None = None) -> DynamoStore | None:
    """The unreadable rows pollers have kept for the operator (``duetime system quarantine``)."""
    names = operator_tables(s, stack)
    return DynamoStore(client("dynamodb"), names) if names is not None else None


def restore_store(names: TableNames) -> tuple[DynamoStore, StoreClock]:
    """The tables ``duetime restore`` rebuilds the marks of, and their store's clock (one sync, no thread)."""
    store = DynamoStore(client("dynamodb"), names)
    return store, StoreClock(store.client, sync=lambda: store.low_water_marks([0]))


_REFINING: list[StoreClock] = []  # the clocks ``make_store_clock`` keeps refined, until ``forget``


def make_store_clock(store: DynamoStore) -> StoreClock:
    """The store's clock, kept refined to a few milliseconds by probes in the background."""
    clock = StoreClock(store.client, sync=lambda: store.low_water_marks([0]))
    clock.start_refining()
    _REFINING.append(clock)
    return clock


def clear_caches(module: ModuleType) -> None:
    """Clear every ``functools`` cache that ``module`` defines (the objects it made once and kept)."""
    for value in list(vars(module).values()):
        defined_here = getattr(value, "__module__", "") == module.__name__
        if defined_here and callable(getattr(value, "cache_clear", None)):
            value.cache_clear()


def forget() -> None:
    """Drop every object this module made and kept (settings, services, stores), and stop the probes of
    the clocks it made, so the next call wires itself to the environment as it is now. For tests: a
    process that runs handlers never needs it."""
    clear_caches(sys.modules[__name__])
    while _REFINING:
        _REFINING.pop().stop_refining()


def make_alerts(s: Settings, store: DynamoStore) -> AlertSink:
    if s.alerts_topic_arn:
        return SnsAlerts(client("sns"), s.alerts_topic_arn)
    return StoredAlerts(store)


def poller_config(s: Settings) -> PollerConfig:
    return PollerConfig(
        partitions=s.partitions,
        misfire_grace=timedelta(seconds=s.misfire_grace_seconds),
        queue_deadline=timedelta(seconds=s.queue_deadline_seconds),
        claims_per_second=s.claims_per_second,
    )


def worker_config(s: Settings) -> WorkerConfig:
    return WorkerConfig(
        lease=timedelta(seconds=s.lease_seconds),
        heartbeat=timedelta(seconds=s.heartbeat_seconds),
        queue_deadline=timedelta(seconds=s.queue_deadline_seconds),
    )


def lease_timings(s: Settings) -> LeaseTimings:
    return LeaseTimings(
        lease_seconds=s.poller_lease_seconds,
        renew_every=s.poller_lease_seconds / 3,
        retire_before=s.poller_retire_before_seconds,
        hot_standby=s.poller_hot_standby,
    )


def http_caller(s: Settings) -> HttpTargetCaller:
    """The caller of HTTP targets and notification webhooks, held to the installation's target rules."""
    return HttpTargetCaller(allow_private=s.allow_private_targets, extra_ports=s.allowed_target_ports)


@functools.cache
def poller_shift() -> PollerShift:
    """The poller and its group lease (each invocation serves one group: ``PollerShift.serve``)."""
    s = settings()
    store = make_store(s)
    queue = SqsRunQueue(client("sqs"), s.run_queue_url, write_format=store.write_format)
    clock = make_store_clock(store)
    alerts = JobNotifier(make_alerts(s, store), store, store)
    caller = http_caller(s)
    sender = ChannelSender(WebhookSender(caller, store), SnsTopics(client("sns")))
    notifications = BackgroundDelivery(store, sender, clock)
    poller = Poller(
        store,
        store,
        queue,
        alerts,
        clock,
        poller_config(s),
        store,
        deadlines=store,
        notifications=notifications,
        leases=store,
        helpers=LambdaHelperLauncher(client("lambda"), s.poller_helper_function)
        if s.poller_helper_function
        else None,
        fan_out=FanOutPolicy(
            holder_rows=s.fan_out_holder_rows, partitions_per_helper=s.fan_out_partitions_per_helper
        ),
        calendars=make_catalog(store),
        quarantine_record=store,
    )
    warmer = LambdaWorkerWarmer(client("lambda"), s.worker_function_arn) if s.worker_function_arn else None
    quiet = QuietTimings() if s.poller_rest_when_quiet else None
    shift = PollerShift(poller, store, lease_timings(s), s.poll_interval_seconds, warmer, quiet)
    settle_heap()  # the wired parts and the SDK's models: out of the collector's full passes
    return shift


@functools.cache
def worker() -> Worker:
    s = settings()
    store = make_store(s)
    queue = SqsRunQueue(client("sqs"), s.run_queue_url, write_format=store.write_format)
    made = Worker(
        store,
        store,
        queue,
        JobNotifier(make_alerts(s, store), store, store),
        http_caller(s),
        make_store_clock(store),
        worker_config(s),
        deadlines=store,
        aws_caller=Boto3AwsTargetCaller(require_role=not s.aws_targets_without_role),
    )
    settle_heap()
    return made


def prescale_policy(s: Settings) -> PrescalePolicy:
    """The prescaler's policy: the stack's bounds and look-ahead, the rest from ``prescale_policy`` (JSON)."""
    fields = json.loads(s.prescale_policy) if s.prescale_policy else {}
    fields.update(
        max_workers=s.prescale_max_workers,
        baseline_workers=s.prescale_baseline_workers,
        lookahead_minutes=s.prescale_lookahead_minutes,
        max_pollers=s.prescale_max_pollers,
        standard_max_concurrency=s.worker_max_concurrency,
    )
    return PrescalePolicy.model_validate(fields)


@functools.cache
def prescaler() -> Prescaler:
    """The prescaler of the worker alias ``worker_function_arn`` (``duetime.scheduling.prescale``), and of its
    event source's provisioned mode when ``worker_event_source_uuid`` names the mapping."""
    s = settings()
    lambda_ = client("lambda")
    pollers = (
        LambdaEventPollers(
            lambda_, s.worker_event_source_uuid, s.prescale_max_pollers, s.worker_max_concurrency
        )
        if s.worker_event_source_uuid
        else None
    )
    store = make_store(s)
    return Prescaler(
        store,
        LambdaProvisionedWorkers(lambda_, s.worker_function_arn),
        SqsRunBacklog(client("sqs"), s.run_queue_url),
        SystemClock(),
        prescale_policy(s),
        pollers=pollers,
        tables=table_mode_switcher(s, store),
    )


def table_mode_switcher(s: Settings, store: DynamoStore) -> TableModeSwitcher | None:
    """The switcher of the tables' capacity mode (``duetime.scheduling.table_modes``) when the stack made
    them provisioned; None on demand."""
    if s.table_capacity_mode != "provisioned":
        return None
    policy = TableModePolicy.model_validate(json.loads(s.table_mode_policy) if s.table_mode_policy else {})
    return TableModeSwitcher(DynamoTableModes(store.client, store.names, store.write_format), policy)


REPORTS_EVALUATED = 30  # the reconciler's reports `duetime system alarms` reads: half an hour


@functools.cache
def reconciler() -> Reconciler:
    """The reconciler (``duetime.scheduling.reconcile``) on the store's clock, with the installation's
    catch-up window."""
    s = settings()
    store = make_store(s)
    config = ReconcilerConfig(misfire_grace=timedelta(seconds=s.misfire_grace_seconds))
    return Reconciler(store, make_store_clock(store), config)


def make_catalog(store: DynamoStore) -> DynamoCatalog:
    """The API's catalog (``duetime.ports.Catalog``) on the store's tables and client."""
    return DynamoCatalog(store.client, store.names, store.lease_check, store.write_format)


def run_budget(catalog: DynamoCatalog) -> DynamoRunBudget:
    """The teams' budgets of runs made on request (``duetime.domain.run_budget``) in the catalog's control
    table, as every API Lambda sees them."""
    return DynamoRunBudget(catalog.client, catalog.names.control)


def make_job_service(s: Settings, store: DynamoStore, sqs: SQSClient | None = None) -> JobService:
    catalog = make_catalog(store)
    return JobService(
        catalog,
        store,
        SqsRunQueue(sqs or client("sqs"), s.run_queue_url, write_format=store.write_format),
        make_store_clock(store),
        allow_private_targets=s.allow_private_targets,
        allowed_target_ports=s.allowed_target_ports,
        aws_targets_without_role=s.aws_targets_without_role,
        role_trust=make_role_trust(s),
        queue_deadline=timedelta(seconds=s.queue_deadline_seconds),
        misfire_grace=timedelta(seconds=s.misfire_grace_seconds),
        waker=make_waker(s, store),
        run_budget=run_budget(catalog),
    )


# ``duetime local`` runs the functions in its own process: it gives how to start one of them by name
# (``use_in_process_starter``), which a poller function named ``local:<name>`` is started with.
_in_process_starter: Callable[[str, float], PollerStarter] | None = None


def use_in_process_starter(factory: Callable[[str, float], PollerStarter]) -> None:
    """How to start this process's function ``name`` with a run of ``seconds`` (``duetime local``'s)."""
    global _in_process_starter
    _in_process_starter = factory


def make_waker(s: Settings, store: DynamoStore) -> GroupWaker | None:
    """The API's side of resting groups (``duetime.scheduling.wake``): None when the pollers never rest or
    nothing says how to start one. ``local:<name>`` is ``duetime local``'s in-process function of that
    name."""
    if not (s.poller_rest_when_quiet and s.poller_function_name and s.poller_groups):
        return None
    starter: PollerStarter
    if s.poller_function_name.startswith("local:"):
        if _in_process_starter is None:
            raise RuntimeError(f"{s.poller_function_name}: no function of duetime local's runs here")
        starter = _in_process_starter(s.poller_function_name.removeprefix("local:"), s.poller_run_seconds)
    else:
        starter = LambdaPollerStarter(client("lambda"), s.poller_function_name, s.poller_run_seconds)
    return GroupWaker(store, partition_groups(s.poller_groups.split(";")), starter)


def make_role_trust(s: Settings) -> RoleTrustProbe | None:
    """STS's answer to whether a role requires the team's external id, asked as the worker's role; None
    (roles registered unchecked) only where the stack says it is LocalStack (``aws_role_trust_unchecked``),
    which lets any external id in. The client is made on the first registration, not here."""
    if s.aws_role_trust_unchecked:
        return None
    return Boto3RoleTrustProbe(as_role_arn=s.worker_role_arn or None)


def make_team_admin(s: Settings, actor: str) -> TeamAdmin:
    """The operator's team commands against the tables of ``s`` (audit events name ``actor``)."""
    store = make_store(s)
    clock = StoreClock(store.client, sync=lambda: store.low_water_marks([0]))  # one sync, no refining thread
    return TeamAdmin(make_catalog(store), clock, actor, role_trust=make_role_trust(s))


@functools.cache
def job_service() -> JobService:
    s = settings()
    return make_job_service(s, make_store(s))


@functools.cache
def api_rate_limiter() -> DynamoRateLimiter:
    """Each team's API rate (``duetime.domain.rate_limit``): a bucket per team in the control table, decided
    by conditional writes on the same DynamoDB client as the job service (whose store clock dates them)."""
    return DynamoRateLimiter(client("dynamodb"), settings().control_table)
