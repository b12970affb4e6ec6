"""`duetime bench regions`: a region lost mid-minute and the warm standby promoted, simulated
(docs/regions.md).

Two regions, each with its own copy of the tables (the in-memory twin, ``adapters.memory``), on a manual
clock. Region A runs the engine: the real ``Poller.run_until`` under its group lease (``GroupLease``), and
the real ``Worker`` fed by its queue (``EventSourceMapping``), calling a target that records every call by
run id and lasts ``call_s`` on the worker's clock. Every item A writes is replicated to B as DynamoDB global
tables in multi-Region eventual consistency (MREC) replicate it: item by item, each after its own lag (drawn
from 0.5 to 1.5 times ``lag_s``), in order for one item but in no order across items, so the items of one
request or transaction can arrive apart (docs/regions.md cites AWS on each of these). At ``lost_at_s`` A is
lost: its writes not yet replicated are dropped, its queue with them, and the calls in flight are cut (the
target saw them; their results are never written). ``failover_s`` later B is promoted by the procedure of
docs/regions.md (``promote``) and runs the same engine on its copy until every due time of the window has
had its time.

The report: ``lost`` (due times of the window whose run id, ``make_run_id``, was never called), ``repeated``
(calls past a run's first), ``late_max_s`` (first call after the fire time), the lag and the failover time.
``PromotionSteps`` turns each step of the promotion off, to show what it is for.

What is not modelled: the API (no job is created, edited or paused during the run), target failures and
retries, SQS duplicates, the fan-out helpers and the prescaler, a poller's standby invocations (one
invocation holds each region's group), DynamoDB's latency and the due index's propagation delay inside a
region. Writes are captured when the code that made them yields (a poller's sleep, a worker's batch),
stamped with that instant; a batch's writes carry the instant its calls ended.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import random
import threading
from collections.abc import Callable, Hashable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from duetime.adapters.memory import InMemoryCatalog, MemoryAlerts, MemoryQueue, MemoryStore
from duetime.api.previews import upcoming_runs
from duetime.domain.claim_plan import DEFAULT_MISFIRE_GRACE, PlannedRun, initial_state, new_run
from duetime.domain.clock import ManualClock
from duetime.domain.ids import PARTITIONS, make_run_id
from duetime.domain.models import Job, JobSpec, RunStatus, Team
from duetime.domain.schedule import fire_time, nominals_between, rate_anchor
from duetime.domain.timeutil import minute_bucket, parse_minute_bucket
from duetime.execution.worker import Worker
from duetime.local.system import EventSourceMapping
from duetime.ports import RunMessage, TargetRequest, TargetResponse
from duetime.scheduling.poller import Poller, PollerConfig
from duetime.scheduling.poller_lease import GroupLease

T0 = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)
TEAM = Team(team_id="regions", max_concurrency=100, signing_secret="regions")
GROUP = "all"
WORKER_TICK_S = 0.5  # how often a region's workers receive (the event source's long polls)
FAR = timedelta(days=365)  # "every check has come": reads the whole reap index


# --- the tables as items, for replication -------------------------------------------------------------

ItemKey = tuple[str, Hashable]


def stored_items(store: MemoryStore) -> dict[ItemKey, Any]:
    """Every item of ``store``'s tables by (kind, key), as DynamoDB holds them: a run's reap-index check is an
    attribute of its item. The twin replaces a stored value on each write (never changes one in place), so
    an item changed since a snapshot is one whose value is another object."""
    with store.lock:
        items: dict[ItemKey, Any] = {("jobs", k): v for k, v in store._jobs.items()}
        items.update({("runs", k): (v, store._reap_at.get(k)) for k, v in store._runs.items()})
        for kind, table in (
            ("marks", store._marks),
            ("teams", store._teams),
            ("slots", store._slots),
            ("poller_leases", store._poller_leases),
            ("watches", store._watches),
            ("missing", store._missing),
            ("outbox", store._outbox),
        ):
            items.update({(kind, k): v for k, v in table.items()})
        return items


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a is b or (isinstance(a, str | datetime | None) and a == b)


def put_item(store: MemoryStore, key: ItemKey, value: Any) -> None:
    """Write one replicated item into ``store`` as DynamoDB's replication does: the whole item, no condition
    (``None``: the item was deleted)."""
    kind, k = key
    with store.lock:
        if kind == "jobs":
            if value is None:
                if k in store._jobs:
                    del store._jobs[str(k)]
            else:
                store._jobs[str(k)] = value
            return
        if kind == "runs":
            if value is None:
                store._runs.pop(str(k), None)
                store._reap_at.pop(str(k), None)
                return
            run, reap_at = value
            store._runs[str(k)] = run
            if reap_at is None:
                store._reap_at.pop(str(k), None)
            else:
                store._reap_at[str(k)] = reap_at
            return
        table: dict[Any, Any] = getattr(store, f"_{kind}")
        if value is None:
            table.pop(k, None)
        else:
            table[k] = value


@dataclass(order=True)
class _InFlight:
    arrives: datetime
    order: int
    written: datetime = field(compare=False)
    key: ItemKey = field(compare=False)
    value: Any = field(compare=False)


class Replication:
    """A queue of item writes from ``source`` to ``replica``: each write captured (``capture``) arrives
    after its own lag and is applied then (``deliver``); writes of one item arrive in the order written.
    ``lose_source(at)`` drops what had not arrived by ``at``."""

    def __init__(
        self,
        source: MemoryStore,
        replica: MemoryStore,
        lag_s: float,
        rng: random.Random,
        lag_by_kind: dict[str, float] | None = None,
    ) -> None:
        """``lag_by_kind``: the lag of one kind of item (``"jobs"``: the jobs table's) where it is not
        ``lag_s`` (a degraded table: its partitions replicate in parallel with every other table's)."""
        self.source = source
        self.replica = replica
        self.lag_s = lag_s
        self.lag_by_kind = lag_by_kind or {}
        self.rng = rng
        self._seen = stored_items(source)
        for key, value in self._seen.items():  # the replica was in step before the run began
            put_item(replica, key, value)
        self._in_flight: list[_InFlight] = []
        self._last_arrival: dict[ItemKey, datetime] = {}
        self._order = itertools.count()
        self.captured = 0
        self.applied = 0
        self.dropped = 0
        self.lags_s: list[float] = []

    def capture(self, written: datetime) -> None:
        """Queue every item ``source`` changed since the last capture, as written at ``written``."""
        now = stored_items(self.source)
        changed = [(k, v) for k, v in now.items() if k not in self._seen or not _same(self._seen[k], v)]
        changed += [(k, None) for k in self._seen if k not in now]
        for key, value in changed:
            lag = self.lag_by_kind.get(key[0], self.lag_s) * self.rng.uniform(0.5, 1.5)
            arrives = max(written + timedelta(seconds=lag), self._last_arrival.get(key, written))
            self._last_arrival[key] = arrives
            self.lags_s.append((arrives - written).total_seconds())
            heapq.heappush(self._in_flight, _InFlight(arrives, next(self._order), written, key, value))
        self.captured += len(changed)
        self._seen = now

    def deliver(self, until: datetime) -> None:
        while self._in_flight and self._in_flight[0].arrives <= until:
            write = heapq.heappop(self._in_flight)
            put_item(self.replica, write.key, write.value)
            self.applied += 1

    def lose_source(self, at: datetime) -> None:
        self.deliver(at)
        self.dropped = len(self._in_flight)
        self._in_flight.clear()


# --- the targets, outside both regions ----------------------------------------------------------------


@dataclass
class CallLog:
    """Every call the targets received, by run id (the ``Idempotency-Key`` header), when it arrived."""

    calls: dict[str, list[datetime]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, run_id: str, at: datetime) -> None:
        with self.lock:
            self.calls.setdefault(run_id, []).append(at)


class TimedTarget:
    """The target as one region's workers see it: each call of a batch arrives when the batch started
    (``started``), is recorded, and lasts ``call_s`` on the worker's clock (``clock``), so the results are
    written that much later."""

    def __init__(self, log: CallLog, call_s: float, clock: ManualClock) -> None:
        self.log = log
        self.call_s = call_s
        self.clock = clock
        self.started = clock.now()
        self._lock = threading.Lock()

    def call(self, request: TargetRequest) -> TargetResponse:
        self.log.record(request.headers["Idempotency-Key"], self.started)
        with self._lock:
            self.clock.set(max(self.clock.now(), self.started + timedelta(seconds=self.call_s)))
        return TargetResponse(200, "ok", None, duration_ms=round(self.call_s * 1000))


# --- a region -----------------------------------------------------------------------------------------


class Region:
    """One region's stack: its copy of the tables, its queue, its poller invocation and its workers, all on
    the region's clock (the store's: AWS keeps each region's within a few milliseconds of UTC, which the
    simulation takes as equal)."""

    def __init__(
        self, name: str, store: MemoryStore, now: datetime, log: CallLog, call_s: float, workers: int
    ) -> None:
        self.name = name
        self.busy_until = [now] * workers  # each worker's batch ends then
        self.store = store
        self.clock = ManualClock(now)
        self.queue = MemoryQueue(self.clock, visibility_timeout=90)
        self.alerts = MemoryAlerts()
        self.worker_clock = ManualClock(now)
        self.target = TimedTarget(log, call_s, self.worker_clock)
        self.worker = Worker(
            store, store, self.queue, self.alerts, self.target, self.worker_clock, owner=f"{name}-worker"
        )

    def poller(self, config: PollerConfig) -> tuple[Poller, GroupLease]:
        poller = Poller(self.store, self.store, self.queue, self.alerts, self.clock, config, self.store)
        return poller, GroupLease(self.store, GROUP, f"{self.name}-poller", ends_at=None)

    def work(self, after_batch: Callable[[datetime], None] | None = None) -> int:
        """Each free worker (one batch at a time, busy until its calls end) receives a batch visible now and
        works it, starting now on the worker's clock; ``after_batch(end)`` after each, with the instant its
        calls ended. The messages worked."""
        worked = 0
        now = self.clock.now()
        for index, busy_until in enumerate(self.busy_until):
            if busy_until > now:
                continue
            self.worker_clock.set(now)
            self.target.started = now
            mapping = EventSourceMapping(self.queue, self.worker)  # type: ignore[arg-type]  # the twin's consumer side
            got = mapping.poll_once(wait_seconds=0)
            if not got:
                break
            worked += got
            self.busy_until[index] = self.worker_clock.now()
            if after_batch is not None:
                after_batch(self.worker_clock.now())
        return worked

    def run(
        self,
        config: PollerConfig,
        until: datetime,
        after_writes: Callable[[datetime], None] | None = None,
    ) -> None:
        """The poller's loop (its lease, preload, sweeps and reap passes) until ``until``, the workers
        receiving every ``WORKER_TICK_S`` and whenever the poller yields; ``after_writes(at)`` whenever the
        region's code has written something as of ``at``."""
        poller, gate = self.poller(config)
        mark = after_writes or (lambda at: None)

        def sleep(seconds: float) -> None:
            now = self.clock.now()
            mark(now)
            self.work(mark)
            target = min(until, now + timedelta(seconds=seconds))
            tick = now + timedelta(seconds=WORKER_TICK_S)
            while tick < target:
                self.clock.set(tick)
                self.work(mark)
                tick += timedelta(seconds=WORKER_TICK_S)
            self.clock.set(max(now, target))

        poller.run_until(stop=lambda: self.clock.now() >= until, sleep=sleep, gate=gate)


# --- the promotion ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PromotionSteps:
    """What promoting the standby does to its copy of the tables before its pollers and workers start
    (docs/regions.md, "Promotion"). Each can be turned off to see what it is for."""

    # Every partition's low-water mark back to ``rewind`` before the loss: a mark replicated ahead of a job
    # row whose move out of an older bucket was not replicated would hide that row from every sweep.
    rewind_marks: bool = True
    rewind: timedelta = timedelta(hours=1)
    # Every nominal time whose fire time lies in the last ``reclaim`` before the loss and that the replica's
    # schedule has passed gets its run row if it has none (RUN_IS_NEW, the backfill's write): its job's
    # schedule move arrived, its run row did not.
    reclaim_window: bool = True
    reclaim: timedelta = timedelta(minutes=5)
    # A message for every run still queued or waiting to retry: their messages were in the lost region's
    # queue (else they wait for their queue deadline, 10 minutes).
    resend_waiting: bool = True
    # The standby's pollers catch up what fell due during the outage as late runs, not misfires: their
    # catch-up window (``DUETIME_MISFIRE_GRACE_SECONDS``) covers the outage and the reclaimed window.
    catch_up_grace: bool = True


@dataclass
class PromotionReport:
    marks_rewound: int = 0
    runs_reclaimed: int = 0
    messages_resent: int = 0
    misfire_grace_s: float = 0.0


def promote(
    region: Region, lost_at: datetime, steps: PromotionSteps, jobs: Iterable[str] | None = None
) -> tuple[PollerConfig, PromotionReport]:
    """Promote ``region`` (its copy of the tables as replication left it) at its clock's now, after the
    other region was lost at ``lost_at`` and fenced; the config its pollers then run with. ``jobs``: the
    job ids to reclaim (default: a Scan of the jobs table)."""
    store, now, report = region.store, region.clock.now(), PromotionReport()
    if steps.rewind_marks:
        back = minute_bucket(lost_at - steps.rewind)
        with store.lock:  # an operator's unconditional PutItem per mark: marks otherwise only move forward
            for partition in range(PARTITIONS):
                mark = store._marks.get(partition)
                if mark is None or parse_minute_bucket(mark) > parse_minute_bucket(back):
                    store._marks[partition] = back
                    report.marks_rewound += 1
    if steps.resend_waiting:
        waiting = [
            RunMessage(c.run_id, c.attempt)
            for partition in range(PARTITIONS)
            for c in store.runs_needing_attention(partition, now + FAR, 100_000)
            if c.status in (RunStatus.QUEUED, RunStatus.RETRY_WAIT)
        ]
        region.queue.send(waiting)
        report.messages_resent = len(waiting)
    if steps.reclaim_window:
        report.runs_reclaimed = _reclaim(region, lost_at, steps.reclaim, jobs)
    grace = DEFAULT_MISFIRE_GRACE
    if steps.catch_up_grace:
        grace = max(grace, (now - lost_at) + steps.reclaim + DEFAULT_MISFIRE_GRACE)
    report.misfire_grace_s = grace.total_seconds()
    return PollerConfig(partitions=list(range(PARTITIONS)), misfire_grace=grace), report


def _reclaim(region: Region, lost_at: datetime, reclaim: timedelta, jobs: Iterable[str] | None) -> int:
    """Run rows for the nominal times the replica's schedules passed in the last ``reclaim`` before the
    loss, where none is (the backfill's write, RUN_IS_NEW), sent at once; how many were created."""
    store, now = region.store, region.clock.now()
    start = lost_at - reclaim
    runs = []
    for job_id in list(jobs) if jobs is not None else list(store._jobs):
        job = store.get_job(job_id)
        if job is None:
            continue
        anchor = rate_anchor(job, job.created_at)
        passed = job.state.next_nominal_at  # None: the schedule has no time left (a one-time job claimed)
        nominals = nominals_between(job, anchor, start - timedelta(seconds=job.jitter_seconds), lost_at, 1000)
        for i, nominal in enumerate(nominals):
            following = nominals[i + 1] if i + 1 < len(nominals) else None
            fire = fire_time(job.id, job, nominal, following)
            # a time the schedule passed (claimed, unless a pause skipped it), from the job's first time on
            scheduled = nominal > job.created_at and (passed is None or nominal < passed)
            if start <= fire <= lost_at and scheduled:
                runs.append(new_run(job, PlannedRun(nominal, now), now, now + timedelta(minutes=10)))
    created = InMemoryCatalog(store).insert_runs(runs)
    region.queue.send([RunMessage(run.run_id, run.attempt) for run in created])
    return len(created)


# --- the jobs and the run -----------------------------------------------------------------------------


CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def job_id(rng: random.Random) -> str:
    """A job id in ULID form drawn from ``rng``, so a run's partitions and jitter offsets repeat."""
    return "01" + "".join(rng.choice(CROCKFORD) for _ in range(24))


def region_jobs(count: int, created: datetime, rng: random.Random) -> list[Job]:
    """``count`` jobs of one team: cron (every minute, every 2 minutes), rate (1 and 2 minutes) and one-time,
    exact and jittered, due from the first minute after ``created`` on."""
    kinds: list[dict[str, Any]] = [
        {"schedule": {"cron": "* * * * *", "timezone": "Europe/Berlin"}, "exact": True},
        {"schedule": {"cron": "* * * * *", "timezone": "Europe/Berlin"}, "jitter_seconds": 20},
        {"schedule": {"rate": "1 minute"}, "exact": True},
        {"schedule": {"rate": "2 minutes"}, "jitter_seconds": 30},
        {"schedule": {"cron": "*/2 * * * *", "timezone": "America/New_York"}, "jitter_seconds": 45},
        {"exact": True},  # one-time: ``at`` below
    ]
    jobs = []
    for i in range(count):
        extra = dict(kinds[i % len(kinds)])
        if "schedule" not in extra:  # one-time jobs spread over the next five minutes, on whole seconds
            extra["schedule"] = {"at": (created + timedelta(seconds=61 + (i * 7) % 300)).isoformat()}
        spec = JobSpec.model_validate(
            {"name": f"regions {i}", "target": {"url": "https://target.example/hook"}, **extra}
        )
        job = Job(
            **spec.model_dump(), id=job_id(rng), team=TEAM.team_id, created_at=created, updated_at=created
        )
        jobs.append(job.model_copy(update={"state": initial_state(job, created)}))
    return jobs


def due_in_window(jobs: Iterable[Job], start: datetime, end: datetime) -> dict[str, datetime]:
    """Each run id whose fire time lies in [start, end), with that fire time."""
    due: dict[str, datetime] = {}
    for job in jobs:
        for upcoming in upcoming_runs(job, job.id, job.created_at, job.created_at, 100):
            if upcoming.fire_at >= end:
                break
            if upcoming.fire_at >= start:
                due[make_run_id(job.id, upcoming.nominal_at)] = upcoming.fire_at
    return due


@dataclass(frozen=True)
class RegionsConfig:
    jobs: int = 300
    lag_s: float = 1.0  # each item's replication lag: 0.5 to 1.5 times this
    jobs_lag_s: float | None = None  # the jobs table's, if it lags behind the others (a degraded table)
    lost_at_s: float = 150.5  # A is lost this long after the start (10:02:30.5)
    failover_s: float = 60.0  # from the loss to B's promotion (detection, decision, the procedure)
    call_s: float = 1.5  # how long each target call takes
    workers: int = 4  # batches worked at once in each region: 40 runs a call_s, so the :00 burst queues
    window_s: float = 300.0  # the due times measured: fire times from a minute after the start, this long
    # How long B runs past the window (or its promotion): what promotion leaves to the reaper takes up to
    # a queue deadline (10 minutes).
    settle_s: float = 720.0
    seed: int = 7
    steps: PromotionSteps = field(default_factory=PromotionSteps)


def run_regions(config: RegionsConfig) -> dict[str, Any]:
    log = CallLog()
    store_a, store_b = MemoryStore(), MemoryStore()
    store_a.put_team(TEAM)
    jobs = region_jobs(config.jobs, T0, random.Random(config.seed))
    for job in jobs:
        store_a.put_job(job, T0)
    for partition in range(PARTITIONS):
        store_a.ensure_low_water_mark(partition, minute_bucket(T0))
    lag_by_kind = {"jobs": config.jobs_lag_s} if config.jobs_lag_s is not None else None
    replication = Replication(store_a, store_b, config.lag_s, random.Random(config.seed + 1), lag_by_kind)
    lost_at = T0 + timedelta(seconds=config.lost_at_s)
    a = Region("a", store_a, T0, log, config.call_s, config.workers)

    def replicate(written: datetime) -> None:
        if written < lost_at:  # what A wrote at or after the loss was never written
            replication.capture(written)
        replication.deliver(min(a.clock.now(), lost_at))

    a.run(PollerConfig(partitions=list(range(PARTITIONS))), lost_at, replicate)
    replication.lose_source(lost_at)
    calls_before_loss = sum(len(c) for c in log.calls.values())
    promoted_at = lost_at + timedelta(seconds=config.failover_s)
    b = Region("b", store_b, promoted_at, log, config.call_s, config.workers)
    poller_config, promotion = promote(b, lost_at, config.steps, [job.id for job in jobs])
    window_start = T0 + timedelta(minutes=1)
    window_end = window_start + timedelta(seconds=config.window_s)
    b.run(poller_config, max(window_end, promoted_at) + timedelta(seconds=config.settle_s))
    return report(
        config, jobs, log, window_start, window_end, lost_at, promoted_at, replication, promotion
    ) | {
        "calls_before_loss": calls_before_loss,
    }


def report(
    config: RegionsConfig,
    jobs: list[Job],
    log: CallLog,
    window_start: datetime,
    window_end: datetime,
    lost_at: datetime,
    promoted_at: datetime,
    replication: Replication,
    promotion: PromotionReport,
) -> dict[str, Any]:
    due = due_in_window(jobs, window_start, window_end)
    lost = sorted(run_id for run_id in due if not log.calls.get(run_id))
    late = {
        run_id: (min(log.calls[run_id]) - fire).total_seconds()
        for run_id, fire in due.items()
        if run_id in log.calls
    }
    repeats = {run_id: len(log.calls[run_id]) - 1 for run_id in due if len(log.calls.get(run_id, [])) > 1}
    before = [s for run_id, s in late.items() if due[run_id] < lost_at - timedelta(seconds=config.lag_s * 2)]
    return {
        "jobs": len(jobs),
        "due_in_window": len(due),
        "window": [window_start.isoformat(), window_end.isoformat()],
        "lost_at": lost_at.isoformat(),
        "promoted_at": promoted_at.isoformat(),
        "failover_s": (promoted_at - lost_at).total_seconds(),
        "replication_lag_s": config.lag_s,
        "jobs_table_lag_s": config.jobs_lag_s,
        "replication_lag_drawn_max_s": round(max(replication.lags_s, default=0.0), 3),
        "writes_replicated": replication.applied,
        "writes_lost_with_region": replication.dropped,
        "lost": len(lost),
        "lost_examples": lost[:5],
        "repeated": sum(repeats.values()),
        "runs_repeated": len(repeats),
        "late_max_s": round(max(late.values(), default=0.0), 3),
        "late_max_before_loss_s": round(max(before, default=0.0), 3),
        "steps": {k: v for k, v in asdict(config.steps).items() if isinstance(v, bool)},
        "promotion": asdict(promotion),
    }


def add_regions_flags(parser: argparse.ArgumentParser) -> None:
    defaults = RegionsConfig()
    parser.add_argument("--jobs", type=int, default=defaults.jobs)
    parser.add_argument("--lag", type=float, default=defaults.lag_s, help="replication lag, seconds")
    parser.add_argument(
        "--lost-at", type=float, default=defaults.lost_at_s, help="seconds after 10:00:00 region A is lost"
    )
    parser.add_argument(
        "--jobs-lag", type=float, help="the jobs table's replication lag, if it lags the others (seconds)"
    )
    parser.add_argument("--failover", type=float, default=defaults.failover_s, help="loss to promotion, s")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument(
        "--without",
        action="append",
        default=[],
        choices=["rewind_marks", "reclaim_window", "resend_waiting", "catch_up_grace"],
        help="leave a promotion step out (repeatable), to see what it is for",
    )
    parser.add_argument("--json", action="store_true")


def run_regions_args(args: argparse.Namespace) -> dict[str, Any]:
    steps = PromotionSteps(
        rewind_marks="rewind_marks" not in args.without,
        reclaim_window="reclaim_window" not in args.without,
        resend_waiting="resend_waiting" not in args.without,
        catch_up_grace="catch_up_grace" not in args.without,
    )
    return run_regions(
        RegionsConfig(
            jobs=args.jobs,
            lag_s=args.lag,
            jobs_lag_s=args.jobs_lag,
            lost_at_s=args.lost_at,
            failover_s=args.failover,
            seed=args.seed,
            steps=steps,
        )
    )
