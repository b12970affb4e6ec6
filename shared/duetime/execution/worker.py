"""The worker: take a batch's leases, call its targets at once, record each result while it owns the lease.

One message = one attempt; an SQS batch (up to 10 messages) is worked as a batch. The flow:

1. acquire the leases (queued|retry_wait -> running, owner, lease 60 s ahead by the store's clock), all in
   one request; a run whose lease is not taken was a duplicate or stale message: dropped;
2. take a team concurrency slot per run, one request per team; a run whose team is at its cap gives its
   lease back and is re-queued a few seconds later (the attempt is not used);
3. call the targets concurrently (``parallel_calls``), each with its run id as idempotency key, if its
   lease still has a heartbeat left (a worker held up since step 1 does not call: ``LeaseLapsedBeforeCall``),
   while one heartbeat extends every lease and slot still in flight every 20 s (a failed heartbeat is
   retried sooner, with backoff, for as long as the leases may still be held);
4. as calls end, record their results only where this worker still owns the attempt, and free their slots,
   together (one request per wave of calls that ended); retry with backoff, or end as succeeded / failed /
   dead (with an alert).

A slow target delays no other run of its batch: the others are called at once and recorded as they end.
"""

from __future__ import annotations

import logging
import random
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from duetime.domain.aws_targets import AwsTarget, RunEnvelope, session_name
from duetime.domain.clock import Clock
from duetime.domain.models import HttpTarget, Run, RunResult, RunStatus, Team
from duetime.domain.signing import signed_headers, with_signed_headers
from duetime.domain.timeutil import iso_z
from duetime.execution.deadlines import settle_succeeded
from duetime.execution.outcomes import Verdict, judge, retry_time
from duetime.execution.team_cache import TeamCache
from duetime.ports import (
    Alert,
    AlertSink,
    AwsRole,
    AwsTargetCall,
    AwsTargetCaller,
    DeadlineStore,
    ResultWrite,
    RunMessage,
    RunQueue,
    RunStore,
    TargetCaller,
    TargetRequest,
    TargetResponse,
    TeamStore,
)

log = logging.getLogger(__name__)
USER_AGENT = "duetime/0.1"


class LeaseLapsedBeforeCall(Exception):
    """The worker was held up between taking a run's lease and slot and calling its target (a paused
    process, a slow store) until its lease had less than a heartbeat left, or none: it does not call. By
    then the slot may be another run's and the reaper may hand the run to another worker, so the call could
    break the team's cap or overlap the same attempt elsewhere. The message comes back, and the reaper takes
    the run back when its lease expires."""


class WorkOutcome(StrEnum):
    SUCCEEDED = "succeeded"
    RETRY_SCHEDULED = "retry_scheduled"
    FAILED = "failed"
    DEAD = "dead"
    DUPLICATE = "duplicate"  # lease not acquired: another worker has (or had) this attempt
    DEFERRED = "deferred"  # team at its concurrency cap; re-queued without using the attempt
    STALE = "stale"  # the call happened but the lease was lost: the result write was rejected
    CANCELLED = "cancelled"  # cancelled while called (``POST /v1/runs/{id}/cancel``): given up, not recorded


@dataclass(frozen=True)
class WorkerConfig:
    lease: timedelta = timedelta(seconds=60)
    heartbeat: timedelta = timedelta(seconds=20)
    heartbeat_retry: timedelta = timedelta(seconds=1)  # a failed heartbeat's first retry; then doubling
    queue_deadline: timedelta = timedelta(minutes=10)
    defer_seconds: int = 5
    parallel_calls: int = 10  # a batch's targets called at once (an SQS batch holds up to 10 runs)
    # Once a call of a batch ends, its result waits this long for the others still running, so calls that
    # end together are recorded (and their slots freed) in one request instead of one each.
    gather: timedelta = timedelta(milliseconds=50)


@dataclass(frozen=True)
class WorkReport:
    outcome: WorkOutcome
    run_id: str
    attempt: int
    start_lateness_seconds: float | None = None  # first attempts only: start minus fire time
    started_at: datetime | None = None  # when the lease was taken (store clock)
    status_code: int | None = None
    duration_ms: int | None = None
    heartbeats: int = 0
    heartbeat_errors: int = 0  # failed lease extensions (each retried while the lease may still hold)


@dataclass
class TargetCall:
    """A run leased, with its slot, being called; ``heartbeats``: lease extensions made while in flight.
    What ``Worker.call_targets`` is given, one per run of the batch."""

    run: Run
    team: Team
    slot: int
    heartbeats: int = 0


@dataclass
class Flight:
    """The calls in flight, shared by the callers and the heartbeat (under ``lock``); ``land`` takes the
    calls that ended out of it before ``Worker.land_wave`` records them."""

    calls: dict[str, TargetCall]
    lock: threading.Lock = field(default_factory=threading.Lock)
    heartbeat_errors: int = 0
    cancelled: set[str] = field(default_factory=set)  # runs cancelled while called: given up

    def snapshot(self) -> list[TargetCall]:
        with self.lock:
            return list(self.calls.values())

    def land(self, run_ids: list[str]) -> None:
        with self.lock:
            for run_id in run_ids:
                self.calls.pop(run_id, None)


class Worker:
    def __init__(
        self,
        runs: RunStore,
        teams: TeamStore,
        queue: RunQueue,
        alerts: AlertSink,
        caller: TargetCaller,
        clock: Clock,
        config: WorkerConfig | None = None,
        owner: str | None = None,
        rng: random.Random | None = None,
        wait: Callable[[threading.Event, float], bool] | None = None,
        deadlines: DeadlineStore | None = None,
        aws_caller: AwsTargetCaller | None = None,
    ) -> None:
        """``caller`` calls HTTP targets, ``aws_caller`` AWS ones (none: their runs fail, not retried).
        ``clock`` must be the store's clock: every lease instant is compared by DynamoDB. ``wait(done,
        seconds)`` is how the heartbeat waits for its next beat: True when ``done`` was set meanwhile (tests
        pass one that moves a manual clock instead of sleeping). ``deadlines``: where the success-deadline
        watches of the runs it finishes are settled at once (none: the pollers settle them at their
        deadlines, and ``recovered`` comes then)."""
        self.runs = runs
        self.teams = TeamCache(teams, clock)
        self.team_store = teams
        self.queue = queue
        self.alerts = alerts
        self.caller = caller
        self.aws_caller = aws_caller
        self.clock = clock
        self.config = config or WorkerConfig()
        self.owner = owner or f"worker-{uuid.uuid4().hex[:12]}"
        self.rng = rng or random.Random()
        self.wait = wait or threading.Event.wait
        self._call_pools = threading.local()
        self.deadlines = deadlines

    def process(self, message: RunMessage) -> WorkReport:
        """Work one message (a batch of one); raises what working it raised."""
        (outcome,) = self.process_batch([message])
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def process_batch(self, messages: Sequence[RunMessage]) -> list[WorkReport | Exception]:
        """Work a batch of messages; per message, in order, its report, or the exception that stopped its
        run (that message should come back: a partial batch failure). Of several messages for one run,
        the one with the highest attempt is worked and the others are duplicates."""
        now = self.clock.now()
        lease_until = now + self.config.lease
        chosen: dict[str, int] = {}  # run id -> the index of the message worked for it
        for index, message in enumerate(messages):
            if message.run_id not in chosen or message.attempt > messages[chosen[message.run_id]].attempt:
                chosen[message.run_id] = index
        worked = [messages[i] for i in chosen.values()]
        leased = self.runs.acquire_leases(
            [(m.run_id, m.attempt) for m in worked],
            self.owner,
            now,
            lease_until,
            carried={m.run_id: m.run for m in worked if m.run is not None},
        )
        outcomes: dict[str, WorkReport | Exception] = self._hold_buffered(leased, now)
        calls: list[TargetCall] = []
        by_team: dict[str, list[Run]] = {}
        for run in leased.values():
            by_team.setdefault(run.team, []).append(run)
        for team_id, runs in by_team.items():
            try:  # a failure here is this team's runs' alone: their messages come back, the others go on
                team = self.teams.get(team_id)
                slots = self.team_store.acquire_slots(team, [run.run_id for run in runs], now, lease_until)
            except Exception as exc:
                log.exception("taking slots failed", extra={"team": team_id})
                outcomes.update({run.run_id: exc for run in runs})
                continue
            for run in runs:
                if run.run_id in slots:
                    calls.append(TargetCall(run, team, slots[run.run_id]))
                    continue
                try:
                    outcomes[run.run_id] = self._defer(run, now)
                except Exception as exc:
                    log.exception("deferring a run failed", extra={"run_id": run.run_id})
                    outcomes[run.run_id] = exc
        outcomes.update(self.call_targets(calls, now, lease_until))
        return [
            outcomes[m.run_id]
            if chosen[m.run_id] == index and m.run_id in outcomes
            else WorkReport(WorkOutcome.DUPLICATE, m.run_id, m.attempt)
            for index, m in enumerate(messages)
        ]

    def _hold_buffered(self, leased: dict[str, Run], now: datetime) -> dict[str, WorkReport | Exception]:
        """Runs of a buffer_one job wait for the run they name (``Run.waits_for``): one whose previous run is
        unfinished gives its lease back and comes back ``defer_seconds`` later, without using its attempt
        (taken out of ``leased``). A finished run never runs again (but by a retry by hand), so a run that
        found it finished may start whatever happens next."""
        waiting = [run for run in leased.values() if run.waits_for is not None]
        if not waiting:
            return {}
        outcomes: dict[str, WorkReport | Exception] = {}
        try:
            previous = self.runs.get_runs([run.waits_for for run in waiting if run.waits_for is not None])
        except Exception as exc:  # their messages come back; the leases lapse and the reaper re-queues them
            log.exception("reading the runs buffered runs wait for failed")
            for run in waiting:
                outcomes[run.run_id] = exc
                del leased[run.run_id]
            return outcomes
        for run in waiting:
            before = previous.get(run.waits_for or "")
            if before is not None and not before.status.terminal:
                del leased[run.run_id]
                try:
                    outcomes[run.run_id] = self._defer(run, now)
                except Exception as exc:
                    log.exception("deferring a buffered run failed", extra={"run_id": run.run_id})
                    outcomes[run.run_id] = exc
        return outcomes

    def call_targets(
        self, calls: list[TargetCall], started: datetime, lease_until: datetime
    ) -> dict[str, WorkReport | Exception]:
        """Call every target at once under one heartbeat; record results in waves, as calls end.

        The seam where a batch's calls are made: ``process_batch`` calls it with the batch's leased runs
        (``started``: when the batch began; ``lease_until``: their leases' end) and takes its result, each
        run's report or error by run id. An override (the midnight simulation's, which makes the calls in
        its own thread in virtual time) must make each call with ``call_target``, take the ended calls out
        of their ``Flight`` and record them with ``land_wave``, so the results, slots, retries and alerts
        stay this class's."""
        if not calls:
            return {}
        flight = Flight({call.run.run_id: call for call in calls})
        done = threading.Event()
        beat = threading.Thread(
            target=self._heartbeat,
            args=(flight, lease_until, done),
            name=f"heartbeat-{len(calls)}-runs",
            daemon=True,
        )
        beat.start()
        outcomes: dict[str, WorkReport | Exception] = {}
        futures: dict[Future[TargetResponse], TargetCall] = {}
        try:
            pool = self._call_pool()
            futures = {pool.submit(self.call_target, call, lease_until): call for call in calls}
            pending = set(futures)
            while pending:
                ended, pending = wait(pending, return_when=FIRST_COMPLETED)
                if pending:
                    more, pending = wait(pending, timeout=self.config.gather.total_seconds())
                    ended |= more
                wave = [(futures[future], future) for future in ended]
                flight.land([call.run.run_id for call, _ in wave])
                outcomes.update(self.land_wave(wave, started, flight))
        finally:
            wait(futures)  # a batch that stops early still ends with no call of its own in flight
            done.set()
            beat.join()
        return outcomes

    def _call_pool(self) -> ThreadPoolExecutor:
        """The calling thread's pool for its batches' target calls, kept from batch to batch (starting ten
        threads for every batch cost about a tenth of a worker's CPU). One per thread that works batches, so
        batches worked at once never queue behind each other's calls; a pool's threads end with the pool
        (when its thread or this worker is gone)."""
        pool: ThreadPoolExecutor | None = getattr(self._call_pools, "pool", None)
        if pool is None:
            pool = ThreadPoolExecutor(self.config.parallel_calls, thread_name_prefix="target-call")
            self._call_pools.pool = pool
        return pool

    def call_target(self, call: TargetCall, lease_until: datetime) -> TargetResponse:
        """Call ``call``'s target (the one call ``call_targets`` makes per run), if its lease (taken until
        ``lease_until``) still has a heartbeat left (or half of it, if the heartbeat is longer): the first
        heartbeat comes a heartbeat after the calls start, and a lease that runs out before it is the
        reaper's to give away."""
        margin = min(self.config.heartbeat, self.config.lease / 2)
        if self.clock.now() + margin >= lease_until:
            raise LeaseLapsedBeforeCall(f"{call.run.run_id}: its lease ran out before the call could start")
        if isinstance(call.run.target, AwsTarget):
            return self.call_aws(call.run, call.team)
        return self.caller.call(self.build_request(call.run, call.team))

    def call_aws(self, run: Run, team: Team) -> TargetResponse:
        """Call ``run``'s AWS target under the target's role, else the team's, with the team's external id;
        without a role, with the worker's own credentials where the caller allows it (a local stack)."""
        target = run.target
        assert isinstance(target, AwsTarget)
        if self.aws_caller is None:
            return TargetResponse(None, "", "AWS targets are not enabled on this worker", 0, permanent=True)
        role_arn = target.role_arn or team.aws_role_arn
        role = None
        if role_arn is not None:
            if team.aws_external_id is None:
                refused = "the team has no external id: register its role (PUT /v1/team/aws-role)"
                return TargetResponse(None, "", refused, 0, permanent=True)
            role = AwsRole(role_arn, team.aws_external_id, session_name(team.team_id), team.team_id)
        envelope = RunEnvelope(run.run_id, run.job_id, run.attempt, run.nominal_at, run.fire_at)
        return self.aws_caller.call(AwsTargetCall(target, envelope, role, run.timeout_seconds))

    def land_wave(
        self, wave: list[tuple[TargetCall, Future[TargetResponse]]], started: datetime, flight: Flight
    ) -> dict[str, WorkReport | Exception]:
        """Record the results of the calls that just ended and free their slots (one request), then queue
        their retries and publish their alerts: each ended call's report or error, by run id. ``wave``:
        the ended calls with their futures (a response, or the call's exception), already landed from
        ``flight``; ``started``: when the batch began."""
        outcomes: dict[str, WorkReport | Exception] = {}
        answered: list[tuple[TargetCall, TargetResponse, ResultWrite]] = []
        now = self.clock.now()
        try:
            for call, future in wave:
                try:
                    response = future.result()
                    answered.append((call, response, self._result_of(call.run, response, now)))
                except LeaseLapsedBeforeCall as exc:  # not called: the message comes back
                    log.warning("%s", exc, extra={"run_id": call.run.run_id})
                    outcomes[call.run.run_id] = exc
                except Exception as exc:  # the call itself failed: the message comes back
                    log.exception("run failed", extra={"run_id": call.run.run_id})
                    outcomes[call.run.run_id] = exc
            writes = [write for _, _, write in answered]
            slots = _slots_by_team([call for call, _ in wave])
            recorded = self.runs.record_results_and_free_slots(writes, self.owner, now, slots)
        except Exception as exc:
            log.exception("recording results failed")
            self._release_slots([call for call, _ in wave])  # the failed request may not have freed them
            return {call.run.run_id: outcomes.get(call.run.run_id, exc) for call, _ in wave}
        with flight.lock:
            known = set(flight.cancelled)
        refused = [w.run.run_id for _, _, w in answered if w.run.run_id not in recorded]
        cancelled = known | self._cancelled_among([run_id for run_id in refused if run_id not in known])
        for call, response, write in answered:
            try:
                outcome = (
                    WorkOutcome.CANCELLED
                    if call.run.run_id in cancelled and call.run.run_id not in recorded
                    else self._after_record(write, recorded, now)
                )
            except Exception as exc:
                outcomes[call.run.run_id] = exc
                continue
            run = call.run
            outcomes[run.run_id] = WorkReport(
                outcome,
                run.run_id,
                run.attempt,
                start_lateness_seconds=(started - run.fire_at).total_seconds() if run.attempt == 1 else None,
                started_at=started,
                status_code=response.status_code,
                duration_ms=response.duration_ms,
                heartbeats=call.heartbeats,
                heartbeat_errors=flight.heartbeat_errors,
            )
        return outcomes

    def _cancelled_among(self, refused: list[str]) -> set[str]:
        """Which of the runs whose lease or result the store refused were cancelled (one read; rare)."""
        if not refused:
            return set()
        try:
            runs = self.runs.get_runs(refused)
        except Exception:
            log.warning("reading refused runs failed", exc_info=True)
            return set()
        return {run_id for run_id, run in runs.items() if run.status is RunStatus.CANCELLED}

    def _release_slots(self, calls: list[TargetCall]) -> None:
        for team_id, slots in _slots_by_team(calls).items():
            try:
                self.team_store.release_slots(team_id, slots)
            except Exception:  # the slots come back by themselves when their leases pass
                log.exception("freeing slots failed", extra={"team": team_id})

    def _defer(self, run: Run, now: datetime) -> WorkReport:
        if self.runs.return_to_queue(
            run.run_id, run.attempt, self.owner, now, now + self.config.queue_deadline
        ):
            self.queue.send([RunMessage(run.run_id, run.attempt)], delay_seconds=self.config.defer_seconds)
        return WorkReport(WorkOutcome.DEFERRED, run.run_id, run.attempt)

    def build_request(self, run: Run, team: Team) -> TargetRequest:
        target = run.target
        assert isinstance(target, HttpTarget), target.type
        body = target.body.encode() if target.body is not None else b""
        headers = {
            **target.headers,
            "Idempotency-Key": run.run_id,
            "X-Duetime-Run-Id": run.run_id,
            "X-Duetime-Attempt": str(run.attempt),
            "X-Duetime-Scheduled-At": iso_z(run.nominal_at),
            "User-Agent": USER_AGENT,
        }
        if target.body is not None and not any(k.lower() == "content-type" for k in headers):
            headers["Content-Type"] = "application/json"
        signed = signed_headers(team, run.job_id, run.run_id, self.clock.now(), body)
        return TargetRequest(
            url=target.url,
            method=target.method,
            headers=with_signed_headers(headers, signed),
            body=body if target.body is not None else None,
            timeout_seconds=run.timeout_seconds,
        )

    def _heartbeat(self, flight: Flight, expires: datetime, done: threading.Event) -> None:
        """Extend the leases and slots of the calls in flight every ``heartbeat`` until ``done`` (one
        request for the leases, one per team for the slots). A failed extension (a throttle past the SDK's
        retries, a reset connection) is retried sooner, with backoff and jitter, for as long as the leases
        may still be held: until their expiry has passed. A run whose lease the store says is lost is no
        longer extended (its result will be refused)."""
        failures = 0
        delay = self.config.heartbeat.total_seconds()
        while not self.wait(done, delay):
            now = self.clock.now()
            if now >= expires:
                log.error("lease expired after %d failed heartbeats", failures)
                return
            calls = flight.snapshot()
            if not calls:
                continue
            until = now + self.config.lease
            try:
                held = self.runs.extend_leases(
                    [(call.run.run_id, call.run.attempt) for call in calls], self.owner, now, until
                )
                by_team: dict[str, dict[str, int]] = {}
                for call in calls:
                    if call.run.run_id in held:
                        by_team.setdefault(call.team.team_id, {})[call.run.run_id] = call.slot
                for team_id, slots in by_team.items():
                    self.team_store.extend_slots(team_id, slots, until)
            except Exception:
                failures += 1
                flight.heartbeat_errors += 1
                delay = self._heartbeat_retry_delay(failures, expires - now)
                log.warning(
                    "heartbeat failed (%d in a row); trying again in %.2f s", failures, delay, exc_info=True
                )
                continue
            lost = [call for call in calls if call.run.run_id not in held]
            if lost:
                log.warning("lease lost during the call", extra={"run_ids": [c.run.run_id for c in lost]})
                flight.land([call.run.run_id for call in lost])
                self._give_up_cancelled(lost, flight)
            for call in calls:
                if call.run.run_id in held:
                    call.heartbeats += 1
            expires, failures, delay = until, 0, self.config.heartbeat.total_seconds()

    def _give_up_cancelled(self, lost: list[TargetCall], flight: Flight) -> None:
        """Of the calls whose lease the heartbeat found lost, those whose run was cancelled are given up:
        their slots are freed now, not when their calls end (the request already sent is not taken back; its
        answer is discarded, as the store refuses its result). A lease lost any other way (it expired and
        the reaper took the run back) keeps its slot until the call ends, as the team's cap counts it."""
        ids = self._cancelled_among([call.run.run_id for call in lost])
        cancelled = [call for call in lost if call.run.run_id in ids]
        if cancelled:
            with flight.lock:
                flight.cancelled.update(call.run.run_id for call in cancelled)
            log.info("runs cancelled during their calls", extra={"run_ids": sorted(ids)})
            self._release_slots(cancelled)

    def _heartbeat_retry_delay(self, failures: int, left: timedelta) -> float:
        """Doubling from ``heartbeat_retry`` up to the heartbeat, with jitter; and soon enough to try again
        before the lease runs out (half the time it has left, but not less than half the first delay)."""
        first = min(self.config.heartbeat_retry, self.config.heartbeat).total_seconds()
        ceiling = min(self.config.heartbeat.total_seconds(), first * 2 ** min(failures - 1, 30))
        delay = self.rng.uniform(ceiling / 2, ceiling)
        return max(first / 2, min(delay, left.total_seconds() / 2))

    def _result_of(self, run: Run, response: TargetResponse, now: datetime) -> ResultWrite:
        """What to record for ``run``'s attempt: succeeded, failed, dead, or a retry at a time with jitter."""
        verdict = judge(response)
        result = RunResult(
            status_code=response.status_code,
            duration_ms=response.duration_ms,
            error=response.error,
            body=response.body[:1024] or None,
            retryable=verdict is Verdict.RETRYABLE,
        )
        if verdict is Verdict.SUCCESS:
            return ResultWrite(run, RunStatus.SUCCEEDED, result)
        if verdict is Verdict.PERMANENT:
            return ResultWrite(run, RunStatus.FAILED, result)
        if run.attempt >= run.max_attempts:
            return ResultWrite(run, RunStatus.DEAD, result)
        retry_at = retry_time(run.retry, run.attempt, now, self.rng)
        return ResultWrite(run, RunStatus.RETRY_WAIT, result, retry_at, retry_at + self.config.queue_deadline)

    def _after_record(self, write: ResultWrite, recorded: set[str], now: datetime) -> WorkOutcome:
        """Queue the retry, or publish the alert, of a result written; STALE for one refused."""
        run = write.run
        if run.run_id not in recorded:
            return WorkOutcome.STALE
        if write.status is RunStatus.RETRY_WAIT:
            assert write.retry_at is not None
            delay = max(0, int((write.retry_at - now).total_seconds() + 0.999))
            self.queue.send([RunMessage(run.run_id, run.attempt + 1)], delay_seconds=delay)
            return WorkOutcome.RETRY_SCHEDULED
        if write.status in (RunStatus.DEAD, RunStatus.FAILED):
            self.alerts.publish(
                Alert(
                    kind=f"run_{write.status.value}",
                    team=run.team,
                    job_id=run.job_id,
                    run_id=run.run_id,
                    attempt=run.attempt,
                    detail=write.result.error or f"HTTP {write.result.status_code}",
                    at=now,
                )
            )
            return WorkOutcome.DEAD if write.status is RunStatus.DEAD else WorkOutcome.FAILED
        if self.deadlines is not None and run.success_by is not None:
            settle_succeeded(self.deadlines, self.alerts, [run], now)
        return WorkOutcome.SUCCEEDED


def _slots_by_team(calls: Sequence[TargetCall]) -> dict[str, dict[str, int]]:
    """The slots ``calls`` hold: team id -> run id -> slot."""
    by_team: dict[str, dict[str, int]] = {}
    for call in calls:
        by_team.setdefault(call.team.team_id, {})[call.run.run_id] = call.slot
    return by_team
