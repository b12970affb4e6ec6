"""Deployment settings, read from the environment (the CDK app and ``make run`` set them)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field, field_validator

from duetime.ids import PARTITIONS


def parse_partitions(text: str) -> list[int]:
    """``"0-15"``, ``"0,1,2"``, ``"0-7,32-39"`` or ``"all"`` -> partition numbers."""
    if text.strip() == "all":
        return list(range(PARTITIONS))
    partitions: list[int] = []
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        partitions.extend(range(int(low), int(high or low) + 1))
    if not partitions or any(not 0 <= p < PARTITIONS for p in partitions):
        raise ValueError(f"partitions must lie in 0..{PARTITIONS - 1}")
    return sorted(set(partitions))


def group_label(partitions: Sequence[int]) -> str:
    """A partition group's name in its lease key: its ranges, e.g. ``"0-15"`` or ``"0-7,32-39"``."""
    ranges: list[str] = []
    ordered = sorted(set(partitions))
    start = previous = ordered[0]
    for partition in [*ordered[1:], None]:
        if partition is not None and partition == previous + 1:
            previous = partition
            continue
        ranges.append(f"{start}-{previous}" if previous != start else f"{start}")
        if partition is not None:
            start = previous = partition
    return ",".join(ranges)


class Settings(BaseModel):
    jobs_table: str = "duetime-jobs"
    runs_table: str = "duetime-runs"
    control_table: str = "duetime-control"
    run_queue_url: str = ""
    worker_function_arn: str = ""  # the worker alias pollers warm before loaded minutes; empty: no warm-up
    run_queue_name: str = "duetime-runs"  # local mode creates the queue by this name when no URL is set
    alerts_topic_arn: str = ""  # empty: alerts are logged and kept in the control table
    partitions: list[int] = Field(default_factory=lambda: list(range(PARTITIONS)))
    lease_seconds: int = Field(default=60, ge=2)
    heartbeat_seconds: float = Field(default=20, gt=0)
    queue_deadline_seconds: int = Field(default=600, ge=1)
    misfire_grace_seconds: int = Field(default=60, ge=0)
    poll_interval_seconds: float = Field(default=1.0, gt=0)
    # The poller lease (duetime.poller_lease): renewed every third of it; a dead holder is replaced about
    # this long after its last renewal. The holder starts handing over this long before its run ends.
    poller_lease_seconds: float = Field(default=6.0, ge=3.5)
    poller_retire_before_seconds: float = Field(default=12.0, ge=4)
    # Keep the next poller invocation waiting as a hot standby for most of the holder's run (a dead holder
    # replaced within seconds, at twice the pollers' Lambda time); off, the holder hands over as soon as
    # the next invocation is ready, except in busy minutes (duetime.poller_lease).
    poller_hot_standby: bool = False
    # A quiet group's holder gives the lease back until the next tick (duetime.quiet); the API wakes a
    # group when a job written falls due before then (duetime.wake): it invokes this function (empty: no
    # wakes; "local:<name>" is duetime local's in-process function) for the group among these labels
    # (";"-separated, as the stack's rules name them, e.g. "0-15;16-31;32-47;48-63").
    poller_rest_when_quiet: bool = True
    poller_function_name: str = ""
    poller_groups: str = ""
    poller_run_seconds: float = Field(default=135, ge=0, le=840)  # what a woken invocation serves
    # Claims that scale out (duetime.fan_out): the function a busy minute's helpers run in (empty: none, every
    # holder claims alone), the rows of a minute a holder claims by itself, and the partitions a helper takes.
    poller_helper_function: str = ""
    fan_out_holder_rows: int = Field(default=5_000, ge=1)
    fan_out_partitions_per_helper: int = Field(default=2, ge=1, le=64)
    # The group's claims a second (duetime.claim_pace): its share of what the tables take of claims and
    # starts, set by the stack from their warm throughput; empty: unpaced.
    claims_per_second: float | None = Field(default=None, gt=0)
    # Provisioned workers from the forecast (duetime.prescale): never more than this many, never fewer than
    # the baseline; the due index is read this many minutes ahead. The rest of the policy (the worker rate,
    # the event source's own workers) by DUETIME_PRESCALE_POLICY, a JSON object of PrescalePolicy's fields.
    prescale_max_workers: int = Field(default=90, ge=1, le=10_000)
    prescale_baseline_workers: int = Field(default=0, ge=0, le=10_000)
    prescale_lookahead_minutes: int = Field(default=10, ge=1, le=60)
    prescale_policy: str = ""
    # The worker's SQS event source mapping (its UUID), whose provisioned mode the prescaler switches ahead of
    # a spike (duetime.prescale); empty: left alone (standard mode, or the stack pins provisioned mode). In
    # provisioned mode it keeps at most this many pollers; back in standard mode, this MaximumConcurrency.
    worker_event_source_uuid: str = ""
    prescale_max_pollers: int = Field(default=200, ge=2, le=2000)
    worker_max_concurrency: int = Field(default=100, ge=2, le=1000)
    allow_private_targets: bool = False  # SSRF guard: permit loopback/private targets (local use only)
    # AWS targets need no IAM role and are called with the worker's own credentials (a local stack only: on
    # AWS that would let any team act with the worker's rights)
    aws_targets_without_role: bool = False
    # Roles are registered without asking STS whether they require the team's external id (TeamAdmin.
    # check_role_trust): only where the stack is LocalStack, which lets any external id in. And the role the
    # API takes to ask as the worker (the principal trust policies name); empty: its own credentials.
    aws_role_trust_unchecked: bool = False
    worker_role_arn: str = ""

    @field_validator("partitions", mode="before")
    @classmethod
    def _partitions(cls, value: object) -> object:
        return parse_partitions(value) if isinstance(value, str) else value

    @classmethod
    def from_env(cls, environ: dict[str, str]) -> Settings:
        """Each field from ``DUETIME_<FIELD>`` when present."""
        values = {
            name: environ[f"DUETIME_{name.upper()}"]
            for name in cls.model_fields
            if f"DUETIME_{name.upper()}" in environ
        }
        return cls.model_validate(values)
