"""The worker: take a run's lease, call its target, record the result while still owning the lease.

One message = one attempt. The flow for a message ``(run_id, attempt)``:

1. acquire the lease (queued|retry_wait -> running, owner, lease 60 s ahead by the store's clock); losing
   it means a duplicate or stale message: drop it;
2. take a team concurrency slot; if the team is at its cap, give the lease back and re-queue the message a
   few seconds later (the attempt is not used);
3. call the target with the run id as idempotency key, heartbeating lease and slot every 20 s (a failed
   heartbeat is retried sooner, with backoff, for as long as the lease may still be held);
4. record the result only if this worker still owns the attempt; retry with backoff, or end as
   succeeded / failed / dead (with an alert).
"""

from __future__ import annotations

import logging
import random
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from duetime.clock import Clock
from duetime.models import Run, RunResult, RunStatus, Team
from duetime.outcomes import Verdict, judge, retry_time
from duetime.ports import (
    Alert,
    AlertSink,
    RunMessage,
    RunQueue,
    RunStore,
    TargetCaller,
    TargetRequest,
    TargetResponse,
    TeamStore,
)
from duetime.signing import signature_header, signing_keys
from duetime.team_cache import TeamCache
from duetime.timeutil import iso_z

log = logging.getLogger(__name__)
USER_AGENT = "duetime/0.1"


class WorkOutcome(StrEnum):
    SUCCEEDED = "succeeded"
    RETRY_SCHEDULED = "retry_scheduled"
    FAILED = "failed"
    DEAD = "dead"
    DUPLICATE = "duplicate"  # lease not acquired: another worker has (or had) this attempt
    DEFERRED = "deferred"  # team at its concurrency cap; re-queued without using the attempt
    STALE = "stale"  # the call happened but the lease was lost: the result write was rejected


@dataclass(frozen=True)
class WorkerConfig:
    lease: timedelta = timedelta(seconds=60)
    heartbeat: timedelta = timedelta(seconds=20)
    heartbeat_retry: timedelta = timedelta(seconds=1)  # a failed heartbeat's first retry; then doubling
    queue_deadline: timedelta = timedelta(minutes=10)
    defer_seconds: int = 5


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
class _Beats:
    """What a call's heartbeat did: written by its thread, read once the thread has ended."""

    done: int = 0
    errors: int = 0


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
    ) -> None:
        """``clock`` must be the store's clock: every lease instant is compared by DynamoDB. ``wait(done,
        seconds)`` is how the heartbeat waits for its next beat: True when ``done`` was set meanwhile (tests
        pass one that moves a manual clock instead of sleeping)."""
        self.runs = runs
        self.teams = TeamCache(teams, clock)
        self.team_store = teams
        self.queue = queue
        self.alerts = alerts
        self.caller = caller
        self.clock = clock
        self.config = config or WorkerConfig()
        self.owner = owner or f"worker-{uuid.uuid4().hex[:12]}"
        self.rng = rng or random.Random()
        self.wait = wait or threading.Event.wait

    def process(self, message: RunMessage) -> WorkReport:
        now = self.clock.now()
        lease_until = now + self.config.lease
        run = self.runs.acquire_lease(message.run_id, message.attempt, self.owner, now, lease_until)
        if run is None:
            return WorkReport(WorkOutcome.DUPLICATE, message.run_id, message.attempt)
        team = self.teams.get(run.team)
        slot = self.team_store.acquire_slot(team, run.run_id, now, lease_until)
        if slot is None:
            return self._defer(run, now)
        try:
            lateness = (now - run.fire_at).total_seconds() if run.attempt == 1 else None
            response, beats = self._call_with_heartbeat(run, team, slot, lease_until)
            report = self._record(run, response)
            return WorkReport(
                report,
                run.run_id,
                run.attempt,
                start_lateness_seconds=lateness,
                started_at=now,
                status_code=response.status_code,
                duration_ms=response.duration_ms,
                heartbeats=beats.done,
                heartbeat_errors=beats.errors,
            )
        finally:
            self.team_store.release_slot(team.team_id, slot, run.run_id)

    def _defer(self, run: Run, now: datetime) -> WorkReport:
        if self.runs.return_to_queue(
            run.run_id, run.attempt, self.owner, now, now + self.config.queue_deadline
        ):
            self.queue.send([RunMessage(run.run_id, run.attempt)], delay_seconds=self.config.defer_seconds)
        return WorkReport(WorkOutcome.DEFERRED, run.run_id, run.attempt)

    def build_request(self, run: Run, team: Team) -> TargetRequest:
        target = run.target
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
        now = self.clock.now()
        if keys := signing_keys(team, now):
            headers["X-Duetime-Signature"] = signature_header(keys, int(now.timestamp()), body)
        return TargetRequest(
            url=target.url,
            method=target.method,
            headers=headers,
            body=body if target.body is not None else None,
            timeout_seconds=run.timeout_seconds,
        )

    def _call_with_heartbeat(
        self, run: Run, team: Team, slot: int, lease_until: datetime
    ) -> tuple[TargetResponse, _Beats]:
        done = threading.Event()
        beats = _Beats()
        beat = threading.Thread(
            target=self._heartbeat,
            args=(run, team, slot, lease_until, done, beats),
            name=f"heartbeat-{run.run_id}",
            daemon=True,
        )
        beat.start()
        try:
            response = self.caller.call(self.build_request(run, team))
        finally:
            done.set()
            beat.join()
        return response, beats

    def _heartbeat(
        self, run: Run, team: Team, slot: int, expires: datetime, done: threading.Event, beats: _Beats
    ) -> None:
        """Extend lease and slot every ``heartbeat`` until ``done``. A failed extension (a throttle past the
        SDK's retries, a reset connection) is retried sooner, with backoff and jitter, for as long as the
        lease may still be held: until the store says it is lost, or its expiry has passed."""
        context = {"run_id": run.run_id, "attempt": run.attempt}
        failures = 0
        delay = self.config.heartbeat.total_seconds()
        while not self.wait(done, delay):
            now = self.clock.now()
            if now >= expires:
                log.error("lease expired after %d failed heartbeats", failures, extra=context)
                return
            until = now + self.config.lease
            try:
                held = self.runs.extend_lease(run.run_id, run.attempt, self.owner, now, until)
                if held:
                    self.team_store.extend_slot(team.team_id, slot, run.run_id, until)
            except Exception:
                failures += 1
                beats.errors += 1
                delay = self._heartbeat_retry_delay(failures, expires - now)
                log.warning(
                    "heartbeat failed (%d in a row); trying again in %.2f s",
                    failures,
                    delay,
                    exc_info=True,
                    extra=context,
                )
                continue
            if not held:
                log.warning("lease lost during the call", extra=context)
                return
            expires, failures, delay = until, 0, self.config.heartbeat.total_seconds()
            beats.done += 1

    def _heartbeat_retry_delay(self, failures: int, left: timedelta) -> float:
        """Doubling from ``heartbeat_retry`` up to the heartbeat, with jitter; and soon enough to try again
        before the lease runs out (half the time it has left, but not less than half the first delay)."""
        first = min(self.config.heartbeat_retry, self.config.heartbeat).total_seconds()
        ceiling = min(self.config.heartbeat.total_seconds(), first * 2 ** min(failures - 1, 30))
        delay = self.rng.uniform(ceiling / 2, ceiling)
        return max(first / 2, min(delay, left.total_seconds() / 2))

    def _record(self, run: Run, response: TargetResponse) -> WorkOutcome:
        verdict = judge(response)
        now = self.clock.now()
        result = RunResult(
            status_code=response.status_code,
            duration_ms=response.duration_ms,
            error=response.error,
            body=response.body[:1024] or None,
            retryable=verdict is Verdict.RETRYABLE,
        )
        if verdict is Verdict.SUCCESS:
            return self._finish(run, RunStatus.SUCCEEDED, result, now, WorkOutcome.SUCCEEDED)
        if verdict is Verdict.PERMANENT:
            return self._finish(run, RunStatus.FAILED, result, now, WorkOutcome.FAILED)
        if run.attempt >= run.max_attempts:
            return self._finish(run, RunStatus.DEAD, result, now, WorkOutcome.DEAD)
        retry_at = retry_time(run.retry, run.attempt, now, self.rng)
        recorded = self.runs.record_result(
            run,
            self.owner,
            RunStatus.RETRY_WAIT,
            result,
            now,
            retry_at=retry_at,
            queue_deadline=retry_at + self.config.queue_deadline,
        )
        if not recorded:
            return WorkOutcome.STALE
        delay = max(0, int((retry_at - now).total_seconds() + 0.999))
        self.queue.send([RunMessage(run.run_id, run.attempt + 1)], delay_seconds=delay)
        return WorkOutcome.RETRY_SCHEDULED

    def _finish(
        self, run: Run, status: RunStatus, result: RunResult, now: datetime, outcome: WorkOutcome
    ) -> WorkOutcome:
        if not self.runs.record_result(run, self.owner, status, result, now):
            return WorkOutcome.STALE
        if status in (RunStatus.DEAD, RunStatus.FAILED):
            self.alerts.publish(
                Alert(
                    kind=f"run_{status.value}",
                    team=run.team,
                    job_id=run.job_id,
                    run_id=run.run_id,
                    attempt=run.attempt,
                    detail=result.error or f"HTTP {result.status_code}",
                    at=now,
                )
            )
        return outcome
