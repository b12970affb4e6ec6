"""Deployment settings, read from the environment (the CDK app and ``make run`` set them)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from duetime.domain.ids import PARTITIONS
from duetime.domain.partitions import parse_partitions
from duetime.domain.target_guard import parse_ports


class Settings(BaseModel):
    """What the functions, ``duetime local`` and the CLI's operator commands read from the environment: each
    field from ``DUETIME_<FIELD>`` (``from_env``). The stack sets them for its functions from its CDK context
    (infra/cdk); docs/configuration.md lists them, rendered from the descriptions below
    (``duetime.settings_reference``)."""

    installation: str = Field(
        default="local",
        description="The installation's name (the stack sets its stack name): every metric duetime publishes "
        "carries it as the `installation` dimension, so two installations in one account and region "
        "share no metric or alarm.",
    )
    jobs_table: str = Field(
        default="duetime-jobs", description="The DynamoDB table of jobs and their due index."
    )
    runs_table: str = Field(
        default="duetime-runs", description="The DynamoDB table of runs, their reap index and reap tickets."
    )
    control_table: str = Field(
        default="duetime-control",
        description="The DynamoDB table of teams, tokens, poller leases, team slots and low-water marks.",
    )
    run_queue_url: str = Field(
        default="",
        description="The SQS queue pollers send runs to and workers receive them from. Empty: `duetime "
        "local` creates (or finds) the queue named by `run_queue_name`.",
    )
    worker_function_arn: str = Field(
        default="",
        description="The worker function (its alias) a poller warms before a minute that holds runs, so the "
        "first run after a quiet spell does not wait for a cold start; also the alias whose provisioned "
        "concurrency the prescaler sets. Empty: no warm-up.",
    )
    run_queue_name: str = Field(
        default="duetime-runs",
        description="The queue `duetime local` creates when no `run_queue_url` is set.",
    )
    alerts_topic_arn: str = Field(
        default="",
        description="The SNS topic operators' alerts go to (dead and failed runs, missed deadlines). Empty: "
        "alerts are logged and kept in the control table.",
    )
    partitions: list[int] = Field(
        default_factory=lambda: list(range(PARTITIONS)),
        description='The due-index partitions this poller serves: `"0-15"`, `"0,1,2"`, `"0-7,32-39"` or '
        '`"all"` (the default).',
    )
    lease_seconds: int = Field(
        default=60,
        ge=2,
        description="A worker's lease on a run: a run whose worker stops heartbeating is taken back by the "
        "reaper this long after its last extension, and retried.",
    )
    heartbeat_seconds: float = Field(
        default=20,
        gt=0,
        description="How often a worker extends the leases and team slots of the calls it has in flight; "
        "well under `lease_seconds`, so a live call keeps its lease through a failed extension or two.",
    )
    queue_deadline_seconds: int = Field(
        default=600,
        ge=1,
        description="How long a queued run may wait for a worker before the reaper sends it again (a lost "
        "message is found this way, without a scan).",
    )
    misfire_grace_seconds: int = Field(
        default=60,
        ge=0,
        description="The installation's catch-up window: a due time claimed later than this after its fire "
        "time is a misfire, handled by the job's `misfire` policy. A job's own `catchup_window_seconds` "
        "overrides it.",
    )
    poll_interval_seconds: float = Field(
        default=1.0,
        gt=0,
        description="How often a poller sweeps its partitions' due index (the minute preload fires exact "
        "jobs at their second between sweeps).",
    )
    poller_lease_seconds: float = Field(
        default=6.0,
        ge=3.5,
        description="A partition group's poller lease (`duetime.scheduling.poller_lease`): renewed every "
        "third of it, "
        "so a dead holder is replaced by a standby about this long after its last renewal.",
    )
    poller_retire_before_seconds: float = Field(
        default=12.0,
        ge=4,
        description="With a hot standby, how long before its run ends the holder starts handing the lease "
        "over, so the handover falls inside the run rather than at its timeout.",
    )
    poller_hot_standby: bool = Field(
        default=False,
        description="Keep the next poller invocation waiting as a hot standby for most of the holder's run: "
        "a dead holder is replaced within seconds, at twice the pollers' Lambda time. Off, the holder hands "
        "over as soon as the next invocation is ready, except in busy minutes, which keep a standby anyway.",
    )
    poller_rest_when_quiet: bool = Field(
        default=True,
        description="A holder whose group has nothing due in the next 90 s gives the lease back until the "
        "next tick (`duetime.scheduling.quiet`), so an idle installation pays for seconds of poller time a "
        "minute, not "
        "a whole minute; a job written due sooner wakes the group (`poller_function_name`).",
    )
    poller_function_name: str = Field(
        default="",
        description="The poller function the API invokes to wake a resting group when a job it writes falls "
        'due before the next tick (`duetime.scheduling.wake`). Empty: no wakes; `"local:<name>"` is '
        "`duetime local`'s "
        "in-process function.",
    )
    poller_groups: str = Field(
        default="",
        description="The partition groups the API may wake, `;`-separated labels as the stack's rules name "
        'them, e.g. `"0-15;16-31;32-47;48-63"`.',
    )
    poller_run_seconds: float = Field(
        default=135,
        ge=0,
        le=840,
        description="How long a woken poller invocation serves, as the stack's scheduled ones do.",
    )
    poller_helper_function: str = Field(
        default="",
        description="The function a busy minute's helpers run in (`duetime.scheduling.fan_out`): a holder "
        "whose coming "
        "minute holds more rows than it claims alone starts helpers so the minute is claimed within it. "
        "Empty: every holder claims alone.",
    )
    fan_out_holder_rows: int = Field(
        default=5_000,
        ge=1,
        description="The rows of a coming minute a holder claims by itself; past that it starts helpers.",
    )
    fan_out_partitions_per_helper: int = Field(
        default=2,
        ge=1,
        le=64,
        description="The partitions each helper takes over for the minute (the biggest slices first).",
    )
    claims_per_second: float | None = Field(
        default=None,
        gt=0,
        description="The group's claims a second (`duetime.scheduling.claim_pace`): its share of what the "
        "tables take "
        "of claims and their starts, set by the stack from their warm throughput so a spike's claims are not "
        "throttled. Unset: unpaced (LocalStack, `duetime local`).",
    )
    prescale_max_workers: int = Field(
        default=90,
        ge=1,
        le=10_000,
        description="The most workers the prescaler (`duetime.scheduling.prescale`) provisions ahead of a "
        "busy minute.",
    )
    prescale_baseline_workers: int = Field(
        default=0,
        ge=0,
        le=10_000,
        description="The workers the prescaler keeps provisioned when nothing busy is forecast (0: pollers "
        "warm a worker before each minute with runs instead).",
    )
    prescale_lookahead_minutes: int = Field(
        default=10,
        ge=1,
        le=60,
        description="How many minutes of the due index the prescaler counts ahead: AWS takes minutes to "
        "provision, so the workers must be asked for before the minute comes.",
    )
    prescale_policy: str = Field(
        default="",
        description="The rest of the prescaler's policy (the worker rate, the event source's own workers), "
        "as a JSON object of `PrescalePolicy`'s fields. Empty: its defaults.",
    )
    table_capacity_mode: Literal["on_demand", "provisioned"] = Field(
        default="on_demand",
        description="The tables' capacity mode as the stack creates them (its `capacity_mode`). "
        "`provisioned`: the prescaler switches them to on demand ahead of a forecast spike and back after "
        "(`duetime.scheduling.table_modes`); `on_demand`: nothing to switch.",
    )
    table_mode_policy: str = Field(
        default="",
        description="When the prescaler switches the tables (`busy_runs_per_minute`, `lead_minutes`, "
        "`hold_minutes`, `drained_runs`), as a JSON object of `TableModePolicy`'s fields. Empty: its "
        "defaults.",
    )
    worker_event_source_uuid: str = Field(
        default="",
        description="The worker's SQS event source mapping, which the prescaler switches to provisioned mode "
        "ahead of a spike standard mode would not start within a minute, and back once the queue has "
        "drained. Empty: left alone (standard mode, or the stack pins provisioned mode).",
    )
    prescale_max_pollers: int = Field(
        default=200,
        ge=2,
        le=2000,
        description="In provisioned mode, the most event pollers the prescaler lets the mapping keep.",
    )
    worker_max_concurrency: int = Field(
        default=100,
        ge=2,
        le=1000,
        description="The event source's `MaximumConcurrency` the prescaler restores when it switches back to "
        "standard mode.",
    )
    allow_private_targets: bool = Field(
        default=False,
        description="Turns the SSRF guard off: jobs may call loopback and private addresses. For a local "
        "stack only: on AWS every team could then reach the functions' network and the Lambda runtime API.",
    )
    allowed_target_ports: list[int] = Field(
        default_factory=list,
        description="Ports HTTP targets and notification webhooks may use besides 80, 443 and 1024-65535, "
        'e.g. `"8,25"` or `"20-23"`: the others are refused when a job is written (422 naming the URL\'s '
        "field) and at each call, so no team can make duetime probe a host's privileged ports (SSH, mail, "
        "DNS, ...).",
    )
    aws_targets_without_role: bool = Field(
        default=False,
        description="AWS targets need no IAM role and are called with the worker's own credentials. For a "
        "local stack only: on AWS that would let any team act with the worker's rights.",
    )
    aws_role_trust_unchecked: bool = Field(
        default=False,
        description="Register a team's role without asking STS whether its trust policy requires the team's "
        "external id (`TeamAdmin.check_role_trust`). Only where the stack is LocalStack, whose STS lets any "
        "external id in.",
    )
    worker_role_arn: str = Field(
        default="",
        description="The role the API takes to ask STS as the worker (the principal teams' trust policies "
        "name) when it checks a team's role. Empty: its own credentials.",
    )

    @field_validator("partitions", mode="before")
    @classmethod
    def _partitions(cls, value: object) -> object:
        return parse_partitions(value) if isinstance(value, str) else value

    @field_validator("allowed_target_ports", mode="before")
    @classmethod
    def _ports(cls, value: object) -> object:
        return parse_ports(value) if isinstance(value, str) else value

    @classmethod
    def from_env(cls, environ: dict[str, str]) -> Settings:
        """Each field from ``DUETIME_<FIELD>`` when present."""
        values = {
            name: environ[f"DUETIME_{name.upper()}"]
            for name in cls.model_fields
            if f"DUETIME_{name.upper()}" in environ
        }
        return cls.model_validate(values)
