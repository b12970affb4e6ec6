"""Provisioned workers from the forecast: raise the worker's provisioned concurrency ahead of a minute the due
index shows busy, and lower it once that minute's runs have started.

A spike (the seed's midnight: 500,000 runs in a minute) needs far more workers than the SQS event source
brings by itself: it starts with 5 and adds up to 300 a minute, and each new one pays a cold start. Lambda's
provisioned concurrency keeps environments ready, but it takes minutes to allocate and is billed every
second it is held. The stack used to hold ``peak_workers`` from 23:55 to 00:15 every day, whether anything
was due or not. The prescaler (``functions/prescaler``, every 5 minutes) instead asks the due index what
is coming:

* **forecast**: how many rows the due index holds for each minute from the current one to
  ``lookahead_minutes`` ahead, all 64 partitions (a ``Select=COUNT`` Query per partition and minute bucket:
  keys only, never items). The index holds each job's *next* due time, so a spike of daily or hourly jobs
  shows in full once their previous run is past; a job due every minute shows only in its next minute,
  which is steady load the event source follows by itself.
* **workers needed** for the busiest of those minutes: its runs spread over ``start_window_seconds`` at
  ``worker_starts_per_second`` a worker (the AWS model's worker rate, ``duetime plan``), with ``headroom``.
  A minute needing no more than the event source starts by itself (``on_demand_workers``) needs none
  provisioned. Never more than ``max_workers`` (the stack's ``peak_workers``), never fewer than
  ``baseline_workers``.
* **raise at once** when more are needed than are provisioned. A busy minute enters the look-ahead 10
  minutes before it and the prescaler looks every 5, so workers are asked for 5-10 minutes ahead.
* **lower only when the queue is drained**: once the busy minute is past, its rows have left the due index
  but its runs may still wait in the queue. Provisioned workers are kept while more runs wait (visible
  messages) than what would be left could start within ``start_window_seconds``.

What it cannot see: a job created or moved into a minute less than one look (5 minutes) before it, and the
ramp of provisioning itself (AWS allocates provisioned environments over minutes, and refuses a request over
the account's unreserved concurrency: the call fails, the prescaler logs it, and the next look asks again).
It owns the alias's provisioned concurrency: a value set by hand is replaced at its next look.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from duetime.clock import Clock
from duetime.ids import PARTITIONS
from duetime.ports import JobStore, ProvisionedWorkers, RunBacklog
from duetime.timeutil import minute_bucket

Action = Literal["raise", "keep", "hold", "lower"]


class PrescalePolicy(BaseModel):
    """How many workers a forecast minute needs, and how far ahead to look (module docstring)."""

    model_config = ConfigDict(frozen=True)

    lookahead_minutes: int = Field(default=10, ge=1, le=60)
    worker_starts_per_second: float = Field(default=30.0, gt=0)  # duetime plan's AWS-model worker rate
    start_window_seconds: float = Field(default=60.0, gt=0)  # a minute's runs should all start within it
    headroom: float = Field(default=1.1, ge=1)
    on_demand_workers: int = Field(default=5, ge=0)  # the SQS event source's first concurrency
    baseline_workers: int = Field(default=0, ge=0)
    max_workers: int = Field(default=90, ge=1)

    @model_validator(mode="after")
    def _baseline_within_max(self) -> PrescalePolicy:
        if self.baseline_workers > self.max_workers:
            raise ValueError("baseline_workers may not exceed max_workers")
        return self

    def workers_for(self, runs: int) -> int:
        """Workers to provision for a minute of ``runs`` due runs."""
        need = math.ceil(runs / self.start_window_seconds / self.worker_starts_per_second * self.headroom)
        wanted = need if need > self.on_demand_workers else 0
        return max(self.baseline_workers, min(self.max_workers, wanted))

    def startable(self, workers: int) -> float:
        """Runs ``workers`` (or the event source's own, if more) start within the start window."""
        per_worker = self.worker_starts_per_second * self.start_window_seconds
        return max(workers, self.on_demand_workers) * per_worker


@dataclass(frozen=True)
class PrescaleDecision:
    """One look of the prescaler: what it saw, and what it set."""

    at: datetime
    busiest_minute: str | None
    busiest_runs: int
    workers_needed: int
    waiting_runs: int
    provisioned_before: int
    provisioned_after: int
    action: Action

    def summary(self) -> dict[str, Any]:
        summary = asdict(self)
        summary["at"] = self.at.isoformat()
        return summary


def decide(
    policy: PrescalePolicy, forecast: Mapping[str, int], provisioned: int, waiting_runs: int
) -> tuple[int, Action]:
    """The workers to provision given the forecast (due rows per minute bucket), the workers provisioned
    now and the runs waiting in the queue; and what that is: ``raise``, ``keep``, ``hold`` (fewer are
    needed ahead, but the queue still holds more than the fewer could start in the window) or ``lower``."""
    needed = max((policy.workers_for(runs) for runs in forecast.values()), default=policy.workers_for(0))
    if needed > provisioned:
        return needed, "raise"
    if needed == provisioned:
        return provisioned, "keep"
    if waiting_runs > policy.startable(needed):
        return provisioned, "hold"
    return needed, "lower"


class Prescaler:
    """Looks at the due index, the queue and the provisioned workers, and sets the workers (``tick``)."""

    def __init__(
        self,
        store: JobStore,
        workers: ProvisionedWorkers,
        backlog: RunBacklog,
        clock: Clock,
        policy: PrescalePolicy | None = None,
        partitions: Iterable[int] = range(PARTITIONS),
        readers: int = 8,
    ) -> None:
        self.store = store
        self.workers = workers
        self.backlog = backlog
        self.clock = clock
        self.policy = policy or PrescalePolicy()
        self.partitions = list(partitions)
        self.readers = readers

    def forecast(self, now: datetime) -> dict[str, int]:
        """Due rows per minute bucket, from ``now``'s minute to ``lookahead_minutes`` ahead (every bucket,
        zeros included), summed over the partitions; ``readers`` Queries at a time."""
        minutes = range(self.policy.lookahead_minutes + 1)
        buckets = [minute_bucket(now + timedelta(minutes=m)) for m in minutes]
        keys = [(p, b) for b in buckets for p in self.partitions]
        with ThreadPoolExecutor(max_workers=self.readers) as pool:
            counts = pool.map(lambda key: self.store.count_due(*key), keys)
            forecast = dict.fromkeys(buckets, 0)
            for (_, bucket), count in zip(keys, counts, strict=True):
                forecast[bucket] += count
        return forecast

    def tick(self) -> PrescaleDecision:
        """One look: forecast, decide, and set the provisioned workers if they change."""
        now = self.clock.now()
        forecast = self.forecast(now)
        provisioned = self.workers.provisioned()
        waiting = self.backlog.waiting_runs()
        wanted, action = decide(self.policy, forecast, provisioned, waiting)
        if wanted != provisioned:
            self.workers.provision(wanted)
        busiest = max(forecast, key=lambda bucket: forecast[bucket]) if any(forecast.values()) else None
        return PrescaleDecision(
            at=now,
            busiest_minute=busiest,
            busiest_runs=forecast[busiest] if busiest else 0,
            workers_needed=max(self.policy.workers_for(runs) for runs in forecast.values()),
            waiting_runs=waiting,
            provisioned_before=provisioned,
            provisioned_after=wanted,
            action=action,
        )
