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

**The event source's provisioned mode** (``ProvisionedEventPollers``, when the stack gives it one). Workers
provisioned are not workers invoked: in standard mode the SQS event source starts a spike with 5 concurrent
batches and adds up to 300 a minute, capped by its MaximumConcurrency, however many environments are ready.
Provisioned mode keeps ``MinimumPollers`` event pollers (each up to 10 concurrent invokes) and adds up to
1,000 concurrency a minute; it is billed per event poller-hour, so it is bought for the spike only:

* **pollers needed** for a minute: none if standard mode starts its runs within the window by itself
  (``standard_startable``: 5 concurrent, ramping by 300 a minute up to the cap, each worker at
  ``worker_starts_per_second``); otherwise its runs a second over ``worker_starts_per_second`` a worker,
  with ``headroom``, over ``invocations_per_poller`` (10), at least 2 (AWS's minimum for SQS), never more
  than ``max_pollers`` (nor 200, AWS's largest MinimumPollers).
* **on at once** when more are needed than are provisioned (the same 5-10 minutes ahead as the workers).
* **off only when the queue is drained**: kept while more runs wait than standard mode would start in the
  window (``pollers_startable``), as provisioned workers are.
* a failed Get or Update is logged and reported in the decision (``pollers_error``); the provisioned workers
  are still set, and the next look asks again.

Sources (what AWS documents, and what it does not):

* "Configuring scaling behavior for SQS event source mappings", AWS Lambda Developer Guide,
  https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html: standard mode starts 5 batches
  and adds up to 300 concurrent invokes a minute (at most 1,250); a provisioned event poller handles up to
  1 MB/s, 10 concurrent invokes or 10 polling calls a second; up to 1,000 concurrency added a minute;
  maximum concurrency and provisioned mode cannot be used together; the pollers' long polls are SQS requests.
* "How Lambda processes records from stream and queue-based event sources", AWS Lambda Developer Guide,
  https://docs.aws.amazon.com/lambda/latest/dg/invocation-eventsourcemapping.html#invocation-eventsourcemapping-provisioned-mode:
  SQS minimum pollers 2-200 (default 2), maximum 2-2,000 (default 200); the ``ProvisionedPollers`` metric.
* "AWS Lambda enhances event processing with provisioned mode for SQS event-source mapping", AWS News Blog,
  https://aws.amazon.com/blogs/aws/aws-lambda-enhances-sqs-processing-with-new-provisioned-mode-3x-faster-scaling-16x-higher-capacity/:
  billed by Event Poller Units (pollers provisioned x duration), at least 2 pollers per mapping; the
  backlog is detected "within seconds". The price ($0.00925 a poller-hour, us-east-1) is the stack's
  figure from https://aws.amazon.com/lambda/pricing/.
* Not documented: how long after UpdateEventSourceMapping the minimum pollers are up (the call returns
  with the mapping ``Updating``), the billing granularity of an EPU, and whether one Update may both turn
  provisioned mode off and set MaximumConcurrency (LocalStack takes it; see the adapter).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from duetime.domain.clock import Clock
from duetime.domain.ids import PARTITIONS
from duetime.domain.timeutil import minute_bucket
from duetime.ports import JobStore, ProvisionedEventPollers, ProvisionedWorkers, RunBacklog
from duetime.ports.capacity import SQS_MAX_MINIMUM_POLLERS, SQS_MIN_POLLERS
from duetime.scheduling.table_modes import TableModeSwitcher

log = logging.getLogger(__name__)

Action = Literal["raise", "keep", "hold", "lower"]
PollerAction = Literal["on", "raise", "keep", "hold", "lower", "off"]


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
    # The event source's provisioned mode (module docstring): AWS's figures, and the stack's caps.
    invocations_per_poller: int = Field(default=10, ge=1)  # AWS: an SQS event poller, 10 concurrent invokes
    standard_ramp_per_minute: float = Field(default=300, gt=0)  # AWS: standard mode, +300 invokes a minute
    standard_max_concurrency: int = Field(default=100, ge=2)  # MaximumConcurrency (worker_max_concurrency)
    max_pollers: int = Field(default=200, ge=SQS_MIN_POLLERS, le=2000)  # MaximumPollers (worker_max_pollers)

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

    def standard_startable(self) -> float:
        """Runs the event source starts within the start window in standard mode, by itself: from
        ``on_demand_workers`` concurrent batches, adding ``standard_ramp_per_minute`` a minute (taken as a
        steady ramp), never more than ``standard_max_concurrency``; each at ``worker_starts_per_second``.
        The defaults: 5 -> 100 in 19 s, 5,097.5 worker-seconds in a minute, 152,925 runs."""
        window, cap = self.start_window_seconds, self.standard_max_concurrency
        first = min(self.on_demand_workers, cap)
        ramp = self.standard_ramp_per_minute / 60  # concurrency added a second
        capped_after = min(window, (cap - first) / ramp)
        worker_seconds = first * capped_after + ramp * capped_after**2 / 2 + cap * (window - capped_after)
        return worker_seconds * self.worker_starts_per_second

    def pollers_for(self, runs: int) -> int:
        """Minimum pollers to provision for a minute of ``runs`` due runs: 0 (standard mode) when standard
        mode starts them in the window by itself; otherwise the concurrency its runs need (as
        ``workers_for``, unbounded by ``max_workers``: environments beyond those provisioned start cold) over
        ``invocations_per_poller``, within AWS's 2-200 and ``max_pollers``."""
        if runs <= self.standard_startable():
            return 0
        concurrency = runs / self.start_window_seconds / self.worker_starts_per_second * self.headroom
        pollers = math.ceil(concurrency / self.invocations_per_poller)
        return max(SQS_MIN_POLLERS, min(self.max_pollers, SQS_MAX_MINIMUM_POLLERS, pollers))

    def pollers_startable(self, pollers: int) -> float:
        """Runs the event source starts within the start window with ``pollers`` minimum pollers (standard
        mode's own for 0, or if more)."""
        per_worker = self.worker_starts_per_second * self.start_window_seconds
        return max(pollers * self.invocations_per_poller * per_worker, self.standard_startable())


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
    # The event source's provisioned mode (minimum pollers, 0 in standard mode); all None when the prescaler
    # does not switch it (the stack pins provisioned mode, or switching is off); an error leaves it as it was.
    pollers_needed: int | None = None
    pollers_before: int | None = None
    pollers_after: int | None = None
    pollers_action: PollerAction | None = None
    pollers_error: str | None = None
    # The tables' capacity mode (``duetime.scheduling.table_modes``); None when the stack's tables are on
    # demand (nothing to switch).
    tables: dict[str, Any] | None = None

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


def decide_pollers(
    policy: PrescalePolicy, forecast: Mapping[str, int], pollers: int, waiting_runs: int
) -> tuple[int, PollerAction]:
    """The minimum pollers of the event source given the forecast, the pollers now (0: standard mode) and
    the runs waiting in the queue; and what that is: ``on`` (from standard mode), ``raise``, ``keep``,
    ``hold`` (fewer are needed ahead, but more runs wait than the fewer would start in the window),
    ``lower``, or ``off`` (back to standard mode)."""
    needed = max((policy.pollers_for(runs) for runs in forecast.values()), default=0)
    if needed > pollers:
        return needed, "on" if pollers == 0 else "raise"
    if needed == pollers:
        return pollers, "keep"
    if waiting_runs > policy.pollers_startable(needed):
        return pollers, "hold"
    return needed, "off" if needed == 0 else "lower"


@dataclass(frozen=True)
class PollersLook:
    needed: int
    before: int | None = None
    after: int | None = None
    action: PollerAction | None = None
    error: str | None = None


class TableModeNotSwitched(RuntimeError):
    """The tables' capacity mode could not be read or switched at this look (``decision.tables["error"]``);
    the rest of the look was done. Raised so the prescaler's invocation fails and its ``PrescalerErrors``
    alarm shows it: a spike the tables meet in provisioned mode starts late."""

    def __init__(self, decision: PrescaleDecision) -> None:
        super().__init__(
            f"the tables' capacity mode was not switched: {(decision.tables or {}).get('error')}"
        )
        self.decision = decision


class Prescaler:
    """Looks at the due index, the queue and the provisioned workers, and sets the workers (``tick``); with
    ``pollers``, switches the event source's provisioned mode as well."""

    def __init__(
        self,
        store: JobStore,
        workers: ProvisionedWorkers,
        backlog: RunBacklog,
        clock: Clock,
        policy: PrescalePolicy | None = None,
        partitions: Iterable[int] = range(PARTITIONS),
        readers: int = 8,
        pollers: ProvisionedEventPollers | None = None,
        tables: TableModeSwitcher | None = None,
    ) -> None:
        self.store = store
        self.pollers = pollers
        self.tables = tables
        self.workers = workers
        self.backlog = backlog
        self.clock = clock
        self.policy = policy or PrescalePolicy()
        self.partitions = list(partitions)
        self.readers = readers

    def horizon_minutes(self) -> int:
        """How far ahead a look counts: the workers' look-ahead, or the tables' switch lead if further."""
        tables = self.tables.policy.horizon_minutes if self.tables else 0
        return max(self.policy.lookahead_minutes, tables)

    def forecast(self, now: datetime, minutes_ahead: int | None = None) -> dict[str, int]:
        """Due rows per minute bucket, from ``now``'s minute to ``minutes_ahead`` (by default
        ``lookahead_minutes``) ahead (every bucket, zeros included), summed over the partitions;
        ``readers`` Queries at a time."""
        ahead = self.policy.lookahead_minutes if minutes_ahead is None else minutes_ahead
        minutes = range(ahead + 1)
        buckets = [minute_bucket(now + timedelta(minutes=m)) for m in minutes]
        keys = [(p, b) for b in buckets for p in self.partitions]
        with ThreadPoolExecutor(max_workers=self.readers) as pool:
            counts = pool.map(lambda key: self.store.count_due(*key), keys)
            forecast = dict.fromkeys(buckets, 0)
            for (_, bucket), count in zip(keys, counts, strict=True):
                forecast[bucket] += count
        return forecast

    def tick(self) -> PrescaleDecision:
        """One look: forecast, decide, and set the event source's pollers and the provisioned workers if
        they change, and the tables' capacity mode with ``tables``. A failure of the pollers is logged and
        reported; the workers are set all the same (a failure of theirs raises, as before); a failure of the
        tables' raises ``TableModeNotSwitched`` once everything else is set."""
        now = self.clock.now()
        counted = self.forecast(now, self.horizon_minutes())
        # the workers and the event source look ``lookahead_minutes`` ahead; the tables, their lead
        nearest = {
            minute_bucket(now + timedelta(minutes=m)) for m in range(self.policy.lookahead_minutes + 1)
        }
        forecast = {bucket: runs for bucket, runs in counted.items() if bucket in nearest}
        waiting = self.backlog.waiting_runs()
        tables = self.tables.look(counted, waiting, now).summary() if self.tables else None
        pollers = self.switch_pollers(forecast, waiting)
        provisioned = self.workers.provisioned()
        wanted, action = decide(self.policy, forecast, provisioned, waiting)
        if wanted != provisioned:
            self.workers.provision(wanted)
        busiest = max(forecast, key=lambda bucket: forecast[bucket]) if any(forecast.values()) else None
        decision = PrescaleDecision(
            at=now,
            busiest_minute=busiest,
            busiest_runs=forecast[busiest] if busiest else 0,
            workers_needed=max(self.policy.workers_for(runs) for runs in forecast.values()),
            waiting_runs=waiting,
            provisioned_before=provisioned,
            provisioned_after=wanted,
            action=action,
            pollers_needed=pollers.needed if pollers else None,
            pollers_before=pollers.before if pollers else None,
            pollers_after=pollers.after if pollers else None,
            pollers_action=pollers.action if pollers else None,
            pollers_error=pollers.error if pollers else None,
            tables=tables,
        )
        if tables and tables["error"]:  # the workers and pollers are set; the invocation fails (its alarm)
            raise TableModeNotSwitched(decision)
        return decision

    def switch_pollers(self, forecast: Mapping[str, int], waiting: int) -> PollersLook | None:
        """Read the event source's pollers, decide, and switch them if they change (None: not ours to
        switch). Never raises: a refused Get or Update is logged and returned as ``error``, with the
        pollers as they were read (or None, unread)."""
        if self.pollers is None:
            return None
        needed = max((self.policy.pollers_for(runs) for runs in forecast.values()), default=0)
        before: int | None = None
        try:
            before = self.pollers.minimum_pollers()
            wanted, action = decide_pollers(self.policy, forecast, before, waiting)
            if wanted != before:
                self.pollers.provision_pollers(wanted)
        except Exception as exc:  # any refusal: the next look (5 minutes) asks again
            error = f"{type(exc).__name__}: {exc}"
            log.warning("event source pollers not switched (%s); the next look asks again", error)
            return PollersLook(needed, before, before, None, error)
        return PollersLook(needed, before, wanted, action)
