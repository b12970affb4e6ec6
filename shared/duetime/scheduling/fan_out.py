"""Claims that scale out for the minute that needs it: a group's holder hands partitions to helpers.

One poller invocation claims a few thousand runs a second at most (its CPU: ``duetime bench runcpu``), so a
group whose coming minute holds more than its holder can claim in time (the seed's midnight: 125,000 rows in
each of 4 groups) would start that minute late. Pollers are sized for the idle day; a minute's extra claims
are bought for that minute only:

* **count**: ``launch_lead`` before each minute M, the holder counts M's rows in each of its partitions (a
  ``Select=COUNT`` Query per partition: keys only). A minute of fewer than ``holder_rows`` rows is the
  holder's alone: nothing more happens (the idle cost of fan-out is these Queries).
* **delegate**: otherwise the holder hands slices of its partitions (``partitions_per_helper`` consecutive
  partitions each, fixed by the group) to helpers, the biggest first, until what is left fits
  ``holder_rows``, and starts one helper invocation per slice (``HelperLauncher``: on AWS an asynchronous
  invoke of the helper function, sized for CPU). A helper is a poller invocation that serves only its slice,
  under a lease of its own (``helper_lease_name``): it preloads M's rows of the slice, fires them at their
  second, sweeps, and gives the lease back once M is over and nothing of its slice is due.
* **leave alone**: while a slice's lease is held and not expired (the store's clock), every holder of the
  group leaves the slice's partitions alone: no sweep, preloaded fire or reap of them. A holder reads the
  slices' leases at most every ``refresh_seconds``, only while it knows of a helper or its own minute is
  busy, and once at the start of each reign (a holder that took over from the one that delegated finds the
  helpers: the slices are fixed, so it knows which leases to read).
* **take back**: a slice whose lease is free or expired is the holder's again. A helper that dies stops
  renewing: its lease expires within the poller lease's ``lease_seconds`` and the holder's sweep claims
  what it left (late, never lost). A helper that never starts (an invoke refused or lost) never takes its
  lease, so the holder never left the slice.

Overlap is harmless: in the second between a helper taking its lease and the holder seeing it, both may try
the same rows, and a claim writes only if the job's version is the one it read (JOB_UNCHANGED_SINCE_READ)
and the run row is new (RUN_IS_NEW): the loser's write is a lost race. Idle, no helper runs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from duetime.domain.partitions import group_label
from duetime.domain.timeutil import minute_bucket
from duetime.ports import JobStore, PollerLeaseStore
from duetime.ports.functions import HelperAssignment, HelperLauncher, helper_lease_name

log = logging.getLogger(__name__)
MINUTE = timedelta(minutes=1)


class FanOutPolicy(BaseModel):
    """When a holder delegates, and how much (the module's docstring)."""

    model_config = ConfigDict(frozen=True)

    # Rows of one minute a holder claims by itself: the default pollers (512 MB, 0.29 vCPU) claim about
    # 550 runs a second at the calibrated 0.525 ms a run, so about 10 s of claiming.
    holder_rows: int = Field(default=5_000, ge=1)
    # A helper fires its slice as fast as its pace lets it (a share of its group's, by its rows); each claim
    # writes a unit on its partition's due-bucket key, which takes 1,000 a second: 2 partitions a helper keep
    # each key under half of that at the seed's midnight (32 helpers), and a helper's requests' latency
    # (not its CPU) is what bounds it (BENCHMARKS.md, "Midnight at full scale, simulated").
    partitions_per_helper: int = Field(default=2, ge=1, le=64)
    # Helpers are started this long before their minute: a cold start (~1-2 s), the lease, and the preload of
    # the slice's rows (a Query page of 250 rows each ~10 ms) fit with room.
    launch_lead_seconds: float = Field(default=30.0, gt=0, le=50)
    # A helper serves its minute and at most this long after it (its run's end; it returns sooner once
    # nothing of its slice is due).
    serve_after_seconds: float = Field(default=90.0, gt=0, le=600)
    refresh_seconds: float = Field(default=1.0, gt=0)


# One structured line at the start of each invocation, so what ran can be told from the logs alone (the
# deployed spike bench refuses a mode whose invocations logged another setting): a poller's carries its
# ``FanOutSetting`` as the field ``fan_out``, a helper's the partitions and minute it serves as ``helper``.
POLLER_INVOCATION_LOG = "poller invocation"
HELPER_INVOCATION_LOG = "poller helper invocation"


class FanOutSetting(BaseModel):
    """The fan-out a poller invocation runs with: whether a busy minute's holder starts helpers, and the
    rows of a minute it claims alone before it does (None when it starts none)."""

    model_config = ConfigDict(frozen=True)

    helpers: bool
    holder_rows: int | None = None


def slices_of(partitions: Sequence[int], size: int) -> list[list[int]]:
    """The group's slices: consecutive runs of ``size`` of its partitions, in order (the last may be
    shorter). Fixed by the group and ``size``, so every holder of the group names the same leases."""
    ordered = sorted(partitions)
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


def plan_helpers(
    counts: Mapping[int, int], slices: Sequence[Sequence[int]], holder_rows: int
) -> list[list[int]]:
    """The slices to hand to helpers for a minute of ``counts`` rows per partition: none when the whole
    minute fits ``holder_rows``; else the biggest slices first until what is left fits (a slice with no
    rows is never delegated)."""
    total = sum(counts.values())
    sized = sorted(((sum(counts.get(p, 0) for p in s), list(s)) for s in slices), key=lambda x: -x[0])
    delegated: list[list[int]] = []
    for rows, partitions in sized:
        if total <= holder_rows or rows == 0:
            break
        delegated.append(partitions)
        total -= rows
    return sorted(delegated)


class FanOut:
    """The holder's side: ``step(now, busy)`` before each tick; the partitions it must leave alone."""

    def __init__(
        self,
        jobs: JobStore,
        leases: PollerLeaseStore,
        launcher: HelperLauncher,
        partitions: Sequence[int],
        policy: FanOutPolicy | None = None,
        claims_per_second: float | None = None,
    ) -> None:
        """``claims_per_second``: the group's claims a second (``duetime.scheduling.claim_pace``), shared by
        its holder and helpers in proportion to the rows each claims; None: unpaced."""
        self.jobs = jobs
        self.claims_per_second = claims_per_second
        self.leases = leases
        self.launcher = launcher
        self.policy = policy or FanOutPolicy()
        self.group = group_label(partitions)
        self.slices = slices_of(partitions, self.policy.partitions_per_helper)
        self.helpers_launched = 0
        self.launch_failures = 0
        self._planned: set[str] = set()  # minute buckets counted (and delegated, if busy)
        self._watching: set[str] = set()  # lease names of slices a helper may hold
        self._launched: dict[str, datetime] = {}  # lease name -> the end of its helper's run
        self._excluded: frozenset[int] = frozenset()
        self._next_refresh: datetime | None = None  # None: read every slice's lease at the next step
        self._counts: dict[int, int] = {}  # the last delegated minute's rows per partition
        self._counts_until: datetime | None = None  # ... until its helpers' runs end

    def new_reign(self) -> None:
        """The holder (re)starts claiming: read every slice's lease at the next step."""
        self._next_refresh = None
        self._watching = {helper_lease_name(self.group, s) for s in self.slices}

    def step(self, now: datetime, busy: bool) -> frozenset[int]:
        """Start the coming minute's helpers when it is ``launch_lead`` away and busy; read the leases of
        the slices a helper may hold (at most every ``refresh_seconds``, only while there are some or the
        minute is ``busy``); the partitions held by live helpers, which the holder leaves alone."""
        coming = now.replace(second=0, microsecond=0) + MINUTE
        if coming - now <= timedelta(seconds=self.policy.launch_lead_seconds):
            self._plan(coming, now)
        if busy and not self._watching:
            self._watching = {helper_lease_name(self.group, s) for s in self.slices}
        if self._watching and (self._next_refresh is None or now >= self._next_refresh):
            self._refresh(now)
        return self._excluded

    def _plan(self, minute: datetime, now: datetime) -> None:
        bucket = minute_bucket(minute)
        if bucket in self._planned:
            return
        counts = {p: self.jobs.count_due(p, bucket) for s in self.slices for p in s}  # a raise: counted again
        self._planned = {b for b in self._planned if b >= minute_bucket(now)} | {bucket}
        delegated = plan_helpers(counts, self.slices, self.policy.holder_rows)
        until = minute + MINUTE + timedelta(seconds=self.policy.serve_after_seconds)
        total = max(1, sum(counts.values()))
        if delegated:
            self._counts, self._counts_until = counts, until
        for partitions in delegated:
            share = sum(counts[p] for p in partitions) / total
            rate = self.claims_per_second * share if self.claims_per_second else None
            assignment = HelperAssignment(
                group=self.group,
                partitions=partitions,
                minute=minute,
                serve_until=until,
                claims_per_second=rate,
            )
            try:
                self.launcher.launch(assignment)
            except Exception:
                self.launch_failures += 1
                log.warning("starting a helper failed; its slice stays the holder's", exc_info=True)
                continue
            self.helpers_launched += 1
            self._watching.add(assignment.lease_name)
            self._launched[assignment.lease_name] = until
        if delegated:
            self._next_refresh = now  # look for them at once, and every refresh after
            log.info(
                "minute delegated to helpers",
                extra={
                    "group": self.group,
                    "minute": bucket,
                    "rows": sum(counts.values()),
                    "helpers": len(delegated),
                },
            )

    def holder_claims_per_second(self, now: datetime) -> float | None:
        """The holder's share of the group's claims a second: while a delegated minute's helpers run, by the
        rows of the partitions it serves itself (a dead helper's come back with their share), never under a
        twentieth (it still sweeps for rows written late); otherwise all of it."""
        if self.claims_per_second is None:
            return None
        if self._counts_until is None or now >= self._counts_until:
            return self.claims_per_second
        total = max(1, sum(self._counts.values()))
        own = sum(rows for partition, rows in self._counts.items() if partition not in self._excluded)
        return self.claims_per_second * max(0.05, own / total)

    def _refresh(self, now: datetime) -> None:
        excluded: set[int] = set()
        alive: set[str] = set()
        names = {helper_lease_name(self.group, partitions): partitions for partitions in self.slices}
        leases = self.leases.read_poller_leases([name for name in names if name in self._watching])
        for name, lease in leases.items():
            if not lease.free_at(now):
                excluded.update(names[name])
                alive.add(name)
        self._excluded = frozenset(excluded)
        # Watched from here on: the slices held, and those launched whose helper's run has not ended (it may
        # not have taken its lease yet).
        self._launched = {name: until for name, until in self._launched.items() if now < until}
        self._watching = alive | set(self._launched)
        self._next_refresh = now + timedelta(seconds=self.policy.refresh_seconds)
