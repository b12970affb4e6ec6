"""One error must not end a loop: the worker's heartbeat, the poller's loop and its Lambda handler carry on
through a failed store call, and every run claimed is counted once, whichever path claimed it.

On the in-memory twin with a manual clock: the heartbeat's and the poller's waits move the clock instead of
sleeping."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.exceptions import ClientError

from duetime import wiring
from duetime.adapters.memory import MemoryStore
from duetime.domain.claim_plan import Claim
from duetime.domain.clock import ManualClock
from duetime.domain.ids import make_run_id, partition_of
from duetime.domain.models import Job, RunStatus, Team
from duetime.execution.worker import Worker, WorkerConfig, WorkOutcome, WorkReport
from duetime.execution.worker_metrics import record_work
from duetime.ports import Alert, ClaimOutcome, DueRow, RunMessage, TargetRequest, TargetResponse
from duetime.scheduling.fan_out import FanOutSetting
from duetime.scheduling.poller import Poller, PollerConfig, recover_runs
from duetime.scheduling.poller_lease import PollerShift
from duetime.scheduling.poller_metrics import record_fire, record_poll
from duetime.scheduling.preload import FireFailed

from ..job_support import create_job
from ..lambda_support import LambdaContext, load_handler

NOW = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)
HEARTBEAT = timedelta(seconds=20)


def throttled(operation: str) -> ClientError:
    """What boto3 raises once its own retries of a throttled call are spent."""
    error = {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}
    return ClientError({"Error": error}, operation)


class FlakyStore:
    """The store, except that the next ``extend_failures`` lease extensions, ``due_failures`` due-index
    reads (the sweep's and the preload's) and ``claim_failures`` claims raise instead of reaching it.
    Records the ``now`` of every lease extension tried."""

    def __init__(
        self, store: MemoryStore, extend_failures: int = 0, due_failures: int = 0, claim_failures: int = 0
    ) -> None:
        self.store = store
        self.extend_failures = extend_failures
        self.due_failures = due_failures
        self.claim_failures = claim_failures
        self.extends_tried: list[datetime] = []
        self.extends_done = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def extend_leases(
        self, attempts: Sequence[tuple[str, int]], owner: str, now: datetime, until: datetime
    ) -> set[str]:
        self.extends_tried.append(now)
        if self.extend_failures:
            self.extend_failures -= 1
            raise throttled("UpdateItem")
        held = self.store.extend_leases(attempts, owner, now, until)
        self.extends_done += len(held)
        return held

    def due_jobs(self, *args: Any, **kwargs: Any) -> list[Job]:
        if self.due_failures:
            self.due_failures -= 1
            raise throttled("Query")
        return self.store.due_jobs(*args, **kwargs)

    def due_rows(self, *args: Any, **kwargs: Any) -> list[DueRow]:  # the minute preload's reads
        if self.due_failures:
            self.due_failures -= 1
            raise throttled("Query")
        return list(self.store.due_rows(*args, **kwargs))

    def claim(self, claims: Sequence[Claim], now: datetime) -> ClaimOutcome:
        if self.claim_failures:
            self.claim_failures -= 1
            raise throttled("BatchExecuteStatement")
        return self.store.claim(claims, now)


@dataclass
class Queue:
    sent: list[RunMessage] = field(default_factory=list)
    failures: int = 0  # the next sends that fail (a reset connection)

    def send(self, messages: Sequence[RunMessage], delay_seconds: int = 0) -> None:
        if self.failures:
            self.failures -= 1
            raise ConnectionResetError("connection reset by peer")
        self.sent.extend(messages)


@dataclass
class Alerts:
    published: list[Alert] = field(default_factory=list)

    def publish(self, alert: Alert) -> None:
        self.published.append(alert)


@dataclass
class Metrics:
    values: dict[str, list[float]] = field(default_factory=dict)

    def add_metric(self, name: str, unit: str, value: float) -> None:
        self.values.setdefault(name, []).append(value)


def poll(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Wait (real time) for ``condition``; False when it did not come."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


@pytest.fixture
def store() -> Iterator[MemoryStore]:
    """The in-memory twin (moto's PartiQL cannot parse the claim's batched writes)."""
    store = MemoryStore()
    store.put_team(Team(team_id="team-a", max_concurrency=5))
    yield store


def job_due_at(store: MemoryStore, at: datetime) -> Job:
    """An exact 1-minute job whose first run is due at ``at``."""
    spec = {
        "name": "every minute",
        "schedule": {"rate": "1 minute"},
        "target": {"url": "https://example.com/x"},
    }
    job = create_job(store, "team-a", {**spec, "exact": True}, at - timedelta(minutes=1))
    assert job.state.next_fire_at == at, job.state
    return job


def poller_on(store: Any, clock: ManualClock, job: Job, queue: Queue, **config: Any) -> Poller:
    config = {"partitions": [partition_of(job.id)], **config}
    return Poller(store, store, queue, Alerts(), clock, PollerConfig(**config))


# --- the heartbeat ---------------------------------------------------------------------------------------


class SlowTarget:
    """A target that answers after ``seconds`` of the store's clock. Meanwhile the reaper runs, as other
    pollers do every few seconds: it must find nothing to take back while the worker still holds the lease."""

    def __init__(self, store: Any, clock: ManualClock, seconds: float) -> None:
        self.store, self.clock, self.seconds = store, clock, seconds
        self.calls: list[TargetRequest] = []
        self.reaped: list[RunMessage] = []

    def call(self, request: TargetRequest) -> TargetResponse:
        self.calls.append(request)
        answer_at = self.clock.now() + timedelta(seconds=self.seconds)
        # The heartbeat's waits move the clock; once the heartbeat stops, time passes all the same.
        poll(lambda: self.clock.now() >= answer_at or not beating())
        self.clock.set(max(answer_at, self.clock.now()))
        queue = Queue()
        config = PollerConfig(partitions=list(range(64)))
        recover_runs(self.store, queue, Alerts(), config, self.clock.now())
        self.reaped.extend(queue.sent)
        return TargetResponse(status_code=200, body="ok", error=None, duration_ms=5)


def beating() -> bool:
    return any(t.name.startswith("heartbeat-") for t in threading.enumerate())


def heartbeat_waits(
    clock: ManualClock, waits: list[float], called: Callable[[], bool]
) -> Callable[[threading.Event, float], bool]:
    """The heartbeat's waits move the clock, once the target has been called: on a real clock the call
    starts at once, but here the heartbeat's thread could move time by whole heartbeats before the calling
    thread reached its pre-call lease check (``LeaseLapsedBeforeCall``), on a slow machine."""

    def wait(done: threading.Event, seconds: float) -> bool:
        waits.append(seconds)
        assert poll(called), "the target was never called"
        clock.advance(seconds)
        return done.wait(0.001)

    return wait


@dataclass
class Worked:
    message: RunMessage
    report: WorkReport
    target: SlowTarget
    waits: list[float]  # every wait of the heartbeat, in seconds
    queue: Queue  # what the worker queued


def work(store: MemoryStore, runs: FlakyStore, seconds: float = 150) -> Worked:
    """Claim a run and have a worker whose run store is ``runs`` process it; its target takes ``seconds``
    (150: longer than two leases)."""
    clock = ManualClock(NOW)
    job = job_due_at(store, NOW)
    claimed = Queue()
    assert poller_on(store, clock, job, claimed, preload_lead=None).claim().runs_created == 1
    message, target, waits, queue = claimed.sent[0], SlowTarget(store, clock, seconds), [], Queue()
    config = WorkerConfig(lease=LEASE, heartbeat=HEARTBEAT)
    waiting = heartbeat_waits(clock, waits, called=lambda: bool(target.calls))
    worker = Worker(runs, store, queue, Alerts(), target, clock, config, wait=waiting)
    return Worked(message, worker.process(message), target, waits, queue)


def test_a_heartbeat_that_fails_twice_keeps_the_lease_and_the_run_is_not_repeated(
    store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="duetime.execution.worker"):
        worked = work(store, FlakyStore(store, extend_failures=2))

    report = worked.report
    assert worked.target.reaped == []  # the reaper never found the lease lapsed...
    assert report.outcome is WorkOutcome.SUCCEEDED  # ...and the worker's result was accepted
    assert len(worked.target.calls) == 1 and worked.queue.sent == []  # no second attempt anywhere
    run = store.get_run(worked.message.run_id)
    assert run is not None and run.status is RunStatus.SUCCEEDED and run.attempt == 1
    assert report.heartbeat_errors == 2 and report.heartbeats >= 1
    retries = worked.waits[1:3]  # after each failure the next try comes sooner than a heartbeat would
    assert all(0 < w < HEARTBEAT.total_seconds() for w in retries), worked.waits
    failures = [r for r in caplog.records if r.message.startswith("heartbeat failed")]
    assert len(failures) == 2 and all(r.exc_info for r in failures)
    metrics = Metrics()
    record_work(metrics, report)
    assert metrics.values["HeartbeatErrors"] == [2]


def test_a_heartbeat_that_keeps_failing_stops_once_the_lease_has_expired(
    store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    flaky = FlakyStore(store, extend_failures=1_000_000)
    with caplog.at_level(logging.WARNING, logger="duetime.execution.worker"):
        worked = work(store, flaky)

    expiry = NOW + LEASE
    assert flaky.extends_tried and all(at < expiry for at in flaky.extends_tried)  # never a pointless try
    assert len(flaky.extends_tried) >= 3 and worked.report.heartbeat_errors == len(flaky.extends_tried)
    assert any(r.message.startswith("lease expired") for r in caplog.records)
    # The lease lapsed: the reaper took the run back for attempt 2 and this worker's result was refused.
    assert [m.attempt for m in worked.target.reaped] == [2]
    assert worked.report.outcome is WorkOutcome.STALE


class StolenLease(FlakyStore):
    def extend_leases(
        self, attempts: Sequence[tuple[str, int]], owner: str, now: datetime, until: datetime
    ) -> set[str]:
        self.extends_tried.append(now)
        return set()  # someone else holds the run now


def test_a_lease_the_store_says_is_lost_ends_the_heartbeat_at_once(store: MemoryStore) -> None:
    stolen = StolenLease(store)
    report = work(store, stolen, seconds=30).report
    assert len(stolen.extends_tried) == 1 and report.heartbeats == 0 and report.heartbeat_errors == 0


# --- the poller loop -------------------------------------------------------------------------------------


@dataclass
class Loop:
    """What a poller's loop did, counted as the Lambda handler counts it."""

    metrics: Metrics = field(default_factory=Metrics)
    errors: list[Exception] = field(default_factory=list)
    slept: list[float] = field(default_factory=list)
    sweeps: int = 0

    def claimed(self) -> float:
        return sum(self.metrics.values.get("RunsClaimed", []))


def run_loop(poller: Poller, clock: ManualClock, stop: Callable[[], bool], most: int = 20) -> Loop:
    """``poller.run_until`` with its sleeps on the manual clock, until ``stop()`` (or ``most`` sleeps)."""
    loop = Loop()

    def sleep(seconds: float) -> None:
        loop.slept.append(seconds)
        clock.advance(seconds)

    loop.sweeps = poller.run_until(
        stop=lambda: stop() or len(loop.slept) >= most,
        sleep=sleep,
        on_report=lambda claimed, recovered: record_poll(loop.metrics, claimed, recovered),
        on_fire=lambda fired: record_fire(loop.metrics, fired),
        on_error=loop.errors.append,
    )
    return loop


def test_a_poller_tick_that_raises_is_logged_counted_and_the_loop_claims_on_the_next_tick(
    store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    job = job_due_at(store, NOW)
    clock = ManualClock(NOW + timedelta(seconds=1))
    queue = Queue()
    poller = poller_on(FlakyStore(store, due_failures=1), clock, job, queue, preload_lead=None)
    with caplog.at_level(logging.ERROR, logger="duetime.scheduling.poller"):
        loop = run_loop(poller, clock, stop=lambda: bool(queue.sent))
    assert [m.run_id for m in queue.sent] == [make_run_id(job.id, NOW)]  # claimed on the next tick
    assert loop.sweeps == 1 and len(loop.errors) == 1 and isinstance(loop.errors[0], ClientError)
    assert loop.slept and loop.slept[0] > 0  # it backed off before trying again
    assert loop.claimed() == 1
    failed = [r for r in caplog.records if r.message.startswith("poller tick failed")]
    assert len(failed) == 1 and failed[0].exc_info is not None


def test_rows_the_preload_failed_to_claim_are_left_to_the_sweep(store: MemoryStore) -> None:
    job = job_due_at(store, NOW)
    clock = ManualClock(NOW)
    queue = Queue()
    flaky = FlakyStore(store, claim_failures=1)
    poller = poller_on(flaky, clock, job, queue, preload_lead=timedelta(seconds=10))
    loop = run_loop(poller, clock, stop=lambda: bool(queue.sent))
    assert [m.run_id for m in queue.sent] == [make_run_id(job.id, NOW)]
    assert [type(e) for e in loop.errors] == [FireFailed]
    assert isinstance(loop.errors[0].__cause__, ClientError)
    assert loop.claimed() == 1


@pytest.mark.parametrize("preload", [True, False], ids=["by-the-preload", "by-the-sweep"])
def test_runs_claimed_before_their_send_failed_are_counted_once(store: MemoryStore, preload: bool) -> None:
    job = job_due_at(store, NOW)
    clock = ManualClock(NOW)
    queue = Queue(failures=1)
    poller = poller_on(store, clock, job, queue, preload_lead=timedelta(seconds=10) if preload else None)
    # until the failed tick (the preload first reads the minute, a page a tick)
    loop = run_loop(poller, clock, stop=lambda: queue.failures == 0)
    assert len(loop.errors) == 1 and isinstance(loop.errors[0].__cause__, ConnectionResetError)
    assert loop.claimed() == 1 and queue.sent == []  # the run's queue deadline will bring it back
    run = store.get_run(make_run_id(job.id, NOW))
    assert run is not None and run.status is RunStatus.QUEUED


# --- the poller Lambda handler ---------------------------------------------------------------------------


def emf_values(out: str, name: str) -> list[float]:
    """Every value the handler's EMF documents give metric ``name``."""
    values: list[float] = []
    for line in out.splitlines():
        if '"_aws"' not in line:
            continue
        doc = json.loads(line)
        if name in doc:
            value = doc[name]
            values.extend(value if isinstance(value, list) else [value])
    return values


@pytest.fixture
def poller_handler(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> Callable[[Poller, ManualClock, float], dict[str, Any]]:
    """Invoke the poller handler on the given poller (its group's lease in ``store``), with time (its waits
    too) on the manual clock."""

    def invoke(poller: Poller, clock: ManualClock, run_seconds: float) -> dict[str, Any]:
        module = load_handler("poller")
        monkeypatch.setattr(module, "time", SimpleNamespace(sleep=clock.advance))
        monkeypatch.setattr(wiring, "poller_shift", lambda: PollerShift(poller, store))
        event = {"detail-type": "Scheduled Event", "detail": {"run_seconds": run_seconds}}
        result: dict[str, Any] = module.handler(event, LambdaContext())
        return result

    return invoke


def test_runs_the_minute_preload_claims_are_counted_in_runs_claimed_once(
    store: MemoryStore, poller_handler: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    job = job_due_at(store, NOW)
    clock = ManualClock(NOW)
    queue = Queue()
    poller = poller_on(store, clock, job, queue, preload_lead=timedelta(seconds=10))
    result = poller_handler(poller, clock, 5)
    assert result["ticks"] >= 1 and len(queue.sent) == 1  # claimed by the preload, at its second
    assert sum(emf_values(capsys.readouterr().out, "RunsClaimed")) == 1


def test_a_tick_that_raises_in_the_lambda_handler_is_counted_and_the_invocation_goes_on(
    store: MemoryStore,
    poller_handler: Any,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    job = job_due_at(store, NOW)
    clock = ManualClock(NOW)
    queue = Queue()
    flaky = FlakyStore(store, due_failures=1)
    poller = poller_on(flaky, clock, job, queue, preload_lead=timedelta(seconds=10))
    with caplog.at_level(logging.ERROR, logger="duetime.scheduling.poller"):
        result = poller_handler(poller, clock, 5)
    assert result["errors"] == 1 and result["ticks"] >= 1
    assert len(queue.sent) == 1  # claimed after the failed tick, in the same invocation
    out = capsys.readouterr().out
    assert sum(emf_values(out, "PollerErrors")) == 1 and sum(emf_values(out, "RunsClaimed")) == 1
    assert any(r.message.startswith("poller tick failed") and r.exc_info for r in caplog.records)


def test_an_invocation_whose_every_tick_fails_fails(store: MemoryStore, poller_handler: Any) -> None:
    """A poller that got nothing done all invocation is reported as a failed invocation too (Lambda's
    Errors metric, which the PollerErrors alarm watches); single failed ticks are not."""
    job = job_due_at(store, NOW)
    clock = ManualClock(NOW)
    poller = poller_on(FlakyStore(store, due_failures=1_000), clock, job, Queue(), preload_lead=None)
    with pytest.raises(RuntimeError, match="every poller tick of the invocation failed") as failed:
        poller_handler(poller, clock, 5)
    assert isinstance(failed.value.__cause__, ClientError)


def test_an_event_delivered_twice_is_two_invocations_under_two_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """Async events can arrive more than once with one request id (on AWS; LocalStack's retried client did
    it nine times): each delivery must serve under a name of its own, or both would hold the lease."""
    names: list[str] = []

    class Shift:
        def fan_out_setting(self) -> FanOutSetting:
            return FanOutSetting(helpers=False)

        def serve(self, invocation: str, *args: Any, **kwargs: Any) -> Any:
            names.append(invocation)
            return SimpleNamespace(summary=lambda: {})

    module = load_handler("poller")
    monkeypatch.setattr(wiring, "poller_shift", lambda: Shift())
    event = {"detail": {"run_seconds": 1}}
    module.handler(event, LambdaContext())
    module.handler(event, LambdaContext())  # the same aws_request_id
    assert len(set(names)) == 2 and all(name.startswith(LambdaContext().aws_request_id) for name in names)
