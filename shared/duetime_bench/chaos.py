"""`duetime chaos`: frequent jobs of several teams run on the local stack while faults are injected at
random (reproducibly from the seed); afterwards the promises are checked from the store and from the
target's own record.

Faults: worker processes SIGKILLed mid-call and SIGSTOPped past their lease; the poller dying between a
committed claim and its send, and restarting; SQS messages duplicated and dropped; DynamoDB throttling and
500s on a fraction of calls (poller and workers); one worker process whose clock is 5 minutes fast; targets
answering 503, 429, too slowly, or 400. Besides the faults, runs are cancelled at random (queued, waiting
to retry or running: ``POST /v1/runs/{id}/cancel``'s write), and the check holds them to what a cancel
promises.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from duetime.adapters.aws.alerts import StoredAlerts
from duetime.adapters.aws.clients import new_client
from duetime.adapters.aws.notify_channels import SnsTopics
from duetime.adapters.aws.sqs import SqsRunQueue
from duetime.adapters.dynamodb.codec import item_to_run
from duetime.adapters.dynamodb.reap_tickets import is_ticket
from duetime.adapters.http_target import HttpTargetCaller
from duetime.api.previews import upcoming_runs
from duetime.domain.claim_plan import initial_state
from duetime.domain.fire_ledger import FireLabel, ledger
from duetime.domain.ids import is_manual_run_id, make_run_id, new_job_id
from duetime.domain.models import Job, JobSpec, OverlapPolicy, Run, RunStatus, Team
from duetime.execution.notification_senders import ChannelSender, WebhookSender
from duetime.execution.notifications import BackgroundDelivery, JobNotifier, deliver_due
from duetime.execution.worker import WorkOutcome
from duetime.local.demo_target import Call
from duetime.scheduling.poller import Poller, PollerConfig
from duetime_bench.chaos_watch import NOTIFY_GROUP, final_deadline_check, watch_figures, watch_jobs
from duetime_bench.faults import Faults, FaultyQueue, PollerCrash, attach_claim_cut
from duetime_bench.fleet import FleetSpec, WorkerFleet
from duetime_bench.harness import BenchStack, wait_until

LEASE_S = 5.0
HEARTBEAT_S = 1.5
QUEUE_DEADLINE_S = 15.0
TEAMS = {"team-a": 2, "team-b": 4, "team-c": 4}  # team -> concurrency cap
BEHAVIOURS: list[
    tuple[str, dict[str, Any]]
] = [  # (query string, job settings): most succeed; the rest exercise retries and failures
    ("", {}),
    ("", {}),
    ("", {}),
    ("status=503", {"retry": {"max_attempts": 2, "backoff_seconds": [1]}}),
    ("status=429", {"retry": {"max_attempts": 2, "backoff_seconds": [1]}}),
    ("sleep=2&slow_attempt=1", {"timeout_seconds": 1, "retry": {"max_attempts": 3, "backoff_seconds": [1]}}),
    ("status=400", {}),
    ("sleep=0.5", {}),
]
# Jobs held to an overlap policy, whose calls outlast their minute, so the next time finds the run unfinished
# (skipped, or buffered behind it): a team of their own. A worker paused past its lease mid-call (a fault
# here) leaves its call in flight at the target while the next attempt runs elsewhere; with 62 s calls that
# is common, and the cap counts leased calls (RELIABILITY.md), so their team's cap leaves room for it.
OVERLAP_TEAM = "team-c"
OVERLAP_BEHAVIOURS: list[tuple[str, dict[str, Any]]] = [
    ("sleep=62&overlap=skip", {"overlap": "skip", "timeout_seconds": 70}),
    ("sleep=62&overlap=buffer_one", {"overlap": "buffer_one", "timeout_seconds": 70}),
]


def call_timeout(call: Call) -> float:
    """How long the worker of ``call`` waits for it: its job's timeout (found by its query's behaviour)."""
    query = "&".join(f"{k}={v}" for k, v in call.query.items() if k != "group")
    for behaviour, extra in BEHAVIOURS + OVERLAP_BEHAVIOURS:
        if behaviour == query:
            return float(extra.get("timeout_seconds", JobSpec.model_fields["timeout_seconds"].default))
    return float(JobSpec.model_fields["timeout_seconds"].default)


def waited_interval(
    call: Call, timeout: Callable[[Call], float], cancelled_at: Mapping[str, float] | None = None
) -> tuple[float, float]:
    """When duetime waited for ``call``: from its arrival until it was answered, its job's timeout passed or
    its run was cancelled (``cancelled_at``: run id -> when), whichever came first."""
    ends = [call.received_at + timeout(call)]
    if call.answered_at is not None:
        ends.append(call.answered_at)
    cancelled = (cancelled_at or {}).get(call.headers.get("idempotency-key", ""))
    if cancelled is not None:
        ends.append(max(call.received_at, cancelled))
    return call.received_at, min(ends)


def overlapping_runs(
    calls: Sequence[Call],
    guarded_jobs: Collection[str],
    timeout: Callable[[Call], float],
    cancelled_at: Mapping[str, float] | None = None,
) -> list[tuple[str, str]]:
    """Pairs of different runs of one job held to an overlap policy whose calls duetime waited for at the
    same time (``waited_interval``): what skip and buffer_one promise never happens. An attempt whose run
    was called again for a later attempt counts only until then: its lease had lapsed before (a worker
    paused or killed mid-call), the reaper gave the run to the next attempt, and the run was unfinished
    meanwhile, so no other run of the job could start; the stalled worker's request may still be at the
    target, but duetime no longer waited for it."""
    leased = leased_interval(calls, timeout, cancelled_at)
    by_job: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for call in calls:
        run_id = call.headers.get("idempotency-key", "")
        job_id = run_id.partition("@")[0]
        if job_id in guarded_jobs and not is_manual_run_id(run_id):
            start, end = leased(call)
            by_job[job_id].append((start, end, run_id))
    pairs: list[tuple[str, str]] = []
    for intervals in by_job.values():
        intervals.sort()
        for (_, end, run_id), (start, _, next_id) in itertools.pairwise(intervals):
            if next_id != run_id and start < end:
                pairs.append((run_id, next_id))
    return pairs


def leased_interval(
    calls: Sequence[Call], timeout: Callable[[Call], float], cancelled_at: Mapping[str, float] | None = None
) -> Callable[[Call], tuple[float, float]]:
    """How long duetime held each of ``calls`` as its own: ``waited_interval``, cut at the arrival of its
    run's next attempt. That attempt exists because the earlier one's lease (and with it its team slot)
    lapsed before: its worker was paused or killed mid-call and the reaper gave the run on. The stalled
    worker's request may still be at the target, but no lease, slot or overlap rule covers it any more
    (RELIABILITY.md, "What no lease can stop")."""
    attempt_of = {id(call): int(call.headers.get("x-duetime-attempt", "1")) for call in calls}
    later_attempt: dict[tuple[str, int], float] = {}
    for call in calls:
        run_id = call.headers.get("idempotency-key", "")
        for earlier in range(1, attempt_of[id(call)]):
            key = (run_id, earlier)
            later_attempt[key] = min(later_attempt.get(key, call.received_at), call.received_at)

    def interval(call: Call) -> tuple[float, float]:
        start, end = waited_interval(call, timeout, cancelled_at)
        key = (call.headers.get("idempotency-key", ""), attempt_of[id(call)])
        return start, min(end, max(start, later_attempt.get(key, end)))

    return interval


def max_in_flight_while_waited(
    calls: Sequence[Call], timeout: Callable[[Call], float], cancelled_at: Mapping[str, float] | None = None
) -> dict[str, int]:
    """Each team's most calls in flight at once while duetime held them (``leased_interval``): a call counts
    from its arrival until it was answered, its job's timeout passed, its run was cancelled
    (``cancelled_at``: run id -> when) or its run's next attempt arrived, whichever came first. A call past
    its timeout was given up by its worker, whose slot then went to another run; the target may still be
    working on it (the slow behaviour sleeps 2 s under a 1 s timeout), but the team's cap is on duetime's
    calls. So is a cancelled run's call: its worker frees the slot at its next heartbeat and discards the
    answer; and so is a stalled attempt's, whose lease and slot lapsed before its run was given on."""
    leased = leased_interval(calls, timeout, cancelled_at)
    edges: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for call in calls:
        start, end = leased(call)
        edges[call.query.get("group", "")] += [(start, 1), (end, -1)]
    most: dict[str, int] = defaultdict(int)
    for team, team_edges in edges.items():
        current = 0
        for _, change in sorted(team_edges):  # at one instant an end (-1) comes before a start (+1)
            current += change
            most[team] = max(most[team], current)
    return most


def chaos_jobs(stack: BenchStack, created: datetime) -> list[Job]:
    """Two teams' jobs of every behaviour. The four exact ones on a 1-minute rate are due at the same second,
    so each minute's claim of them is covered by a reap ticket (``reap_tickets``: 3 or more runs a claim) and
    the faults reach the tickets' checks and adoptions too."""
    jobs = []
    for team in TEAMS:
        behaviours = OVERLAP_BEHAVIOURS if team == OVERLAP_TEAM else BEHAVIOURS
        for i, (query, extra) in enumerate(behaviours):
            schedule = {"cron": "* * * * *", "timezone": "Europe/Berlin"} if i % 2 else {"rate": "1 minute"}
            url = f"{stack.sink.url}?group={team}" + (f"&{query}" if query else "")
            spec = JobSpec.model_validate(
                {
                    "name": f"chaos {team} {i}",
                    "schedule": schedule,
                    "target": {"url": url},
                    "jitter_seconds": 5,
                    "exact": i % 3 == 0,
                    **extra,
                }
            )
            job = Job(**spec.model_dump(), id=new_job_id(), team=team, created_at=created, updated_at=created)
            jobs.append(job.model_copy(update={"state": initial_state(job, created)}))
    return jobs


def run_chaos(seed: int, minutes: float, dynamodb_fault_rate: float = 0.05) -> dict[str, Any]:
    rng = random.Random(seed)
    stack = BenchStack.create(lease_seconds=LEASE_S)
    faults = Faults(seed, dynamodb_fault_rate)
    try:
        created = stack.clock.now()
        jobs = _write_chaos_jobs(stack, created)
        faults.attach_dynamodb(stack.dynamodb)
        attach_claim_cut(faults, stack.dynamodb, stack.names.jobs, rate=0.05)
        tickets_written = _count_tickets(stack)
        fleet = _chaos_fleet(stack, seed, dynamodb_fault_rate)
        fleet.start()
        queue = FaultyQueue(
            SqsRunQueue(stack.sqs, stack.queue_url),
            faults,
            duplicate_rate=0.05,
            drop_rate=0.05,
            crash_rate=0.03,
        )
        stop = threading.Event()
        webhooks = WebhookSender(HttpTargetCaller(allow_private=True), stack.store)
        topics = SnsTopics(new_client("sns"))  # the runs notify by webhook: this client is never called
        poller_thread = _poll_until_stopped(stack, queue, webhooks, topics, stop)

        # At least 70 s, so every job (a 1-minute rate, or a cron at the next minute, +5 s jitter) is due.
        chaos_end = created + max(timedelta(minutes=minutes), timedelta(seconds=70))
        guarded = {job.id for job in jobs if job.overlap is not OverlapPolicy.ALLOW}
        cancels = _inflict(stack, rng, faults, fleet, guarded, chaos_end)
        faults.enabled = False
        queue.crash_rate = 0.0

        expected = expected_runs(jobs, created, chaos_end)
        settled = wait_until(lambda: all_terminal(stack, expected), timeout=180, every=2)
        stop.set()
        poller_thread.join(timeout=30)
        # Every run of the window has finished (or the check reports it lost): what is still in flight is a
        # later run's call (an overlap job's lasts 62 s), which the check does not judge.
        fleet.stop(grace_seconds=5)
        final_deadline_check(stack, stack.clock.now())
        deliver_due(stack.store, ChannelSender(webhooks, topics), stack.clock.now())
        return check(
            stack,
            jobs,
            expected,
            fleet.reports,
            faults.counts,
            chaos_end,
            settled,
            sum(tickets_written),
            cancels,
        )
    finally:
        stack.close()


def _write_chaos_jobs(stack: BenchStack, created: datetime) -> list[Job]:
    """The teams, and the chaos's jobs and watched jobs, written before any fault is attached."""
    for team, cap in TEAMS.items():
        stack.store.put_team(Team(team_id=team, max_concurrency=cap, signing_secret=f"{team}-secret"))
    jobs = chaos_jobs(stack, created) + watch_jobs(stack, created)
    stack.write_jobs(jobs, created)
    return jobs


def _count_tickets(stack: BenchStack) -> list[int]:
    """The claims' reap tickets, counted into the list returned as their requests are made."""
    tickets_written: list[int] = []

    def count_tickets(params: dict[str, Any], **_: Any) -> None:
        tickets_written.append(sum("'runs': ?" in s["Statement"] for s in params["Statements"]))

    stack.dynamodb.meta.events.register("provide-client-params.dynamodb.BatchExecuteStatement", count_tickets)
    return tickets_written


def _chaos_fleet(stack: BenchStack, seed: int, dynamodb_fault_rate: float) -> WorkerFleet:
    """Three worker processes, each with its own fault seed; the third's clock is 300 s off."""
    base = FleetSpec(
        stack.names,
        stack.queue_url,
        threads=3,
        lease_seconds=LEASE_S,
        heartbeat_seconds=HEARTBEAT_S,
        queue_deadline_seconds=QUEUE_DEADLINE_S,
        dynamodb_fault_rate=dynamodb_fault_rate,
        seed=seed,
    )
    specs = [
        base,
        FleetSpec(**{**base.__dict__, "seed": seed + 1}),
        FleetSpec(**{**base.__dict__, "seed": seed + 2, "clock_skew_seconds": 300.0}),
    ]
    return WorkerFleet(base, 3, specs)


def _poll_until_stopped(
    stack: BenchStack,
    queue: FaultyQueue,
    webhooks: WebhookSender,
    topics: SnsTopics,
    stop: threading.Event,
) -> threading.Thread:
    """A poller in a thread (started) until ``stop``: a crashed one is replaced, as EventBridge would."""
    config = PollerConfig(partitions=list(range(64)), queue_deadline=timedelta(seconds=QUEUE_DEADLINE_S))
    alerts = JobNotifier(StoredAlerts(stack.store), stack.store, stack.store)
    delivery = BackgroundDelivery(stack.store, ChannelSender(webhooks, topics), stack.clock)

    def poll_forever() -> None:
        while not stop.is_set():
            poller = Poller(
                stack.store,
                stack.store,
                queue,
                alerts,
                stack.clock,
                config,
                deadlines=stack.store,
                notifications=delivery,
            )
            try:
                poller.run_until(stop=stop.is_set, sleep=stop.wait, interval=1.0, recover_every=2)
            except PollerCrash:
                stop.wait(2)

    poller_thread = threading.Thread(target=poll_forever, daemon=True)
    poller_thread.start()
    return poller_thread


def _inflict(
    stack: BenchStack,
    rng: random.Random,
    faults: Faults,
    fleet: WorkerFleet,
    guarded: set[str],
    chaos_end: datetime,
) -> dict[str, Cancel]:
    """Until ``chaos_end``, every 6-14 s: maybe a run cancelled, and a worker killed or paused past its
    lease; the runs cancelled."""
    cancels: dict[str, Cancel] = {}
    while stack.clock.now() < chaos_end:
        time.sleep(rng.uniform(6, 14))
        if rng.random() < 0.5:
            cancels.update(cancel_a_run(stack, rng, faults, guarded))
        target = rng.randrange(2)  # the skewed process (2) is left running: it must be fenced, not killed
        if rng.random() < 0.5:
            faults.count("worker_killed")
            fleet.kill_and_replace(target)
        else:
            faults.count("worker_paused_past_lease")
            fleet.pause(target, LEASE_S + 3)
    return cancels


@dataclass(frozen=True)
class Cancel:
    """A run cancelled during the chaos: when (the bench's wall clock, as the target records calls), the
    status it was read in just before, and the attempt it was cancelled at."""

    at: float
    status: RunStatus
    attempt: int


def cancel_a_run(
    stack: BenchStack, rng: random.Random, faults: Faults, spared: Collection[str] = ()
) -> dict[str, Cancel]:
    """Cancel one unfinished run, picked at random, as ``POST /v1/runs/{id}/cancel`` does (its write may
    meet an injected DynamoDB fault, as the API's would: then nothing is cancelled). Runs of ``spared`` jobs
    are left alone: the overlap jobs' long runs would otherwise draw most cancels, and a cancelled run
    leaves nothing to skip or buffer behind (the stateful protocol test cancels an overlap job's runs)."""
    try:
        unfinished = sorted(
            (r for r in _runs(stack).values() if not r.status.terminal and r.job_id not in spared),
            key=lambda r: r.run_id,
        )
        if not unfinished:
            return {}
        run = rng.choice(unfinished)
        cancelled = stack.store.cancel_run(run.run_id, stack.clock.now())
    except Exception:
        faults.count("cancel_refused_by_a_fault")
        return {}
    if cancelled is None:  # it finished since it was read
        return {}
    faults.count(f"run_cancelled_{run.status.value}")
    return {run.run_id: Cancel(time.time(), run.status, cancelled.attempt)}


def cancel_violations(
    runs: Mapping[str, Run], calls: Sequence[Call], cancels: Mapping[str, Cancel]
) -> list[str]:
    """What a cancel promises: the run stays cancelled (no result, retry or reaper write after it), no
    later attempt is ever called, and no call of it starts later than a lease after the cancel (a worker
    that took the lease just before may still start its call, within its lease)."""
    violations: list[str] = []
    reopened = [
        run_id for run_id in cancels if run_id not in runs or runs[run_id].status is not RunStatus.CANCELLED
    ]
    if reopened:
        violations.append(f"{len(reopened)} cancelled runs did not stay cancelled, e.g. {reopened[:3]}")
    late = [
        c
        for c in calls
        if (cancel := cancels.get(c.headers.get("idempotency-key", ""))) is not None
        and (
            int(c.headers.get("x-duetime-attempt", "0")) > cancel.attempt
            or c.received_at > cancel.at + LEASE_S
        )
    ]
    if late:
        violations.append(
            f"{len(late)} calls of cancelled runs came after the cancel (a later attempt or lease)"
        )
    return violations


def expected_runs(jobs: list[Job], created: datetime, end: datetime) -> dict[str, Job]:
    """Every run id the window must have: each nominal time whose fire time came before the end."""
    expected: dict[str, Job] = {}
    for job in jobs:
        for upcoming in upcoming_runs(job, job.id, job.created_at, created, 1000):
            if upcoming.fire_at > end:
                break
            expected[make_run_id(job.id, upcoming.nominal_at)] = job
    return expected


def _runs(stack: BenchStack) -> dict[str, Any]:
    return _scan_runs_table(stack)[0]


def _scan_runs_table(stack: BenchStack) -> tuple[dict[str, Any], int]:
    """The runs by id, and how many reap tickets (``reap_tickets``) are still in the table."""
    runs: dict[str, Any] = {}
    tickets = 0
    # A Scan of the whole table: inspecting the result of the experiment, not the product's read path.
    pages = stack.dynamodb.get_paginator("scan").paginate(TableName=stack.names.runs, ConsistentRead=True)
    for item in (item for page in pages for item in page.get("Items", [])):
        if is_ticket(item):
            tickets += 1
        elif item["job_id"]["S"].startswith("~"):
            continue  # a deadline watch or missing flag, or a notification outbox record: not a run
        else:
            runs[item["run_id"]["S"]] = item_to_run(item)
    return runs, tickets


def all_terminal(stack: BenchStack, expected: dict[str, Job]) -> bool:
    runs = _runs(stack)
    return all(run_id in runs and runs[run_id].status.terminal for run_id in expected)


def check(
    stack: BenchStack,
    jobs: list[Job],
    expected: dict[str, Job],
    reports: list[Any],
    faults: Counter[str],
    chaos_end: datetime,
    settled: bool,
    tickets_written: int = 0,
    cancels: Mapping[str, Cancel] | None = None,
) -> dict[str, Any]:
    cancels = cancels or {}
    runs, tickets_left = _scan_runs_table(stack)
    checked_at = stack.clock.now()
    lost, twice, violations = _lost_and_twice(expected, runs, reports)
    every_call = list(stack.sink.recorder.calls)
    calls = [c for c in every_call if c.query.get("group") != NOTIFY_GROUP]  # the runs' calls
    watched, watch_violations = watch_figures(stack, jobs, runs, every_call, checked_at)
    violations += watch_violations
    violations += _key_violations(runs, calls)
    violations += cancel_violations(runs, calls, cancels)
    guarded = {j.id for j in jobs if j.overlap is not OverlapPolicy.ALLOW}
    waited, concurrency_violations = _concurrency(calls, guarded, cancels)
    violations += concurrency_violations
    violations += _schedules_behind(stack, jobs, chaos_end)
    ledger_counts, ledger_violations = _ledger_agrees(jobs, expected, runs, chaos_end, checked_at)
    violations += ledger_violations
    statuses = Counter(run.status.value for run in runs.values())
    return {
        "runs": len(runs),
        "expected_runs": len(expected),
        "settled": settled,
        "faults_injected": sum(faults.values()),
        "faults": dict(sorted(faults.items())),
        "lost": len(lost),
        "duplicates_succeeded": len(twice),
        "target_calls": len(calls),
        "repeat_calls_same_key": _repeat_calls(stack, runs),
        "stale_writes_rejected": sum(1 for r in reports if r.outcome is WorkOutcome.STALE),
        "duplicate_messages_dropped": sum(1 for r in reports if r.outcome is WorkOutcome.DUPLICATE),
        "max_in_flight": {team: waited[team] for team in TEAMS},
        # at the target, counting calls duetime had given up on (past their timeout) until they answered
        "max_in_flight_at_target": {team: stack.sink.recorder.max_in_flight[team] for team in TEAMS},
        "caps": TEAMS,
        "run_statuses": dict(sorted(statuses.items())),
        "overlap_jobs_runs": dict(
            sorted(Counter(r.status.value for r in runs.values() if r.job_id in guarded).items())
        ),
        "runs_cancelled": dict(sorted(Counter(c.status.value for c in cancels.values()).items())),
        "cancelled_while_called": sum(1 for r in reports if r.outcome is WorkOutcome.CANCELLED),
        "reap_tickets_written": tickets_written,
        "reap_tickets_left": tickets_left,  # checks still to come, a lease after the last claims at most
        "ledger": ledger_counts,  # the fire ledger's labels over the window (GET /v1/jobs/{id}/fires)
        **watched,
        "violations": violations,
    }


def _ledger_agrees(
    jobs: list[Job], expected: Mapping[str, Job], runs: Mapping[str, Run], end: datetime, now: datetime
) -> tuple[dict[str, int], list[str]]:
    """The fire ledger read over the window, held to this check's own accounting: it lists every expected
    time, no other time due by the end, and labels none of them missed or pending once every run ended."""
    counts: Counter[str] = Counter()
    violations: list[str] = []
    for job in jobs:
        read = ledger(job, [], lambda ids: {i: runs[i] for i in ids if i in runs}, job.created_at, end, now)
        due = {fire.run_id: fire for fire in read.fires if fire.fire_at <= end}
        counts.update(fire.label.value for fire in due.values())
        mine = {run_id for run_id, owner in expected.items() if owner.id == job.id}
        if mine != set(due):
            violations.append(
                f"the ledger of job {job.id} lists {sorted(set(due) - mine)[:3]} not expected and misses "
                f"{sorted(mine - set(due))[:3]}"
            )
        unsettled = [f.run_id for f in due.values() if f.label in (FireLabel.MISSED, FireLabel.PENDING)]
        if unsettled:
            violations.append(
                f"the ledger labels {len(unsettled)} finished times missed or pending: {unsettled[:3]}"
            )
    return {label.value: counts.get(label.value, 0) for label in FireLabel}, violations


def _lost_and_twice(
    expected: Mapping[str, Job], runs: Mapping[str, Run], reports: list[Any]
) -> tuple[list[str], list[str], list[str]]:
    """The nominal times with no finished run, the runs recorded as succeeded twice, and their violations."""
    violations = []
    lost = [r for r in expected if r not in runs or not runs[r].status.terminal]
    if lost:
        violations.append(f"{len(lost)} nominal times without a finished run, e.g. {lost[:3]}")
    succeeded = Counter(r.run_id for r in reports if r.outcome is WorkOutcome.SUCCEEDED)
    twice = [run_id for run_id, n in succeeded.items() if n > 1]
    if twice:
        violations.append(f"{len(twice)} runs recorded as succeeded twice")
    return lost, twice, violations


def _repeat_calls(stack: BenchStack, runs: Mapping[str, Run]) -> int:
    """Calls of a run past its first that carried its idempotency key."""
    return sum(
        len(stack.sink.recorder.keyed(run_id)) - 1 for run_id in runs if stack.sink.recorder.keyed(run_id)
    )


def _key_violations(runs: Mapping[str, Run], calls: Sequence[Call]) -> list[str]:
    """Target calls whose idempotency key names no run, and runs whose repeats carried another key."""
    violations = []
    orphans = [c for c in calls if c.headers.get("idempotency-key") not in runs]
    if orphans:
        violations.append(f"{len(orphans)} target calls match no run row")
    keys_by_run: dict[str, set[str]] = defaultdict(set)
    for call in calls:
        keys_by_run[call.headers.get("x-duetime-run-id", "")].add(call.headers.get("idempotency-key", ""))
    changed = [run for run, keys in keys_by_run.items() if keys != {run}]
    if changed:
        violations.append(f"{len(changed)} runs whose repeats carried another idempotency key")
    return violations


def _concurrency(
    calls: Sequence[Call], guarded: set[str], cancels: Mapping[str, Cancel]
) -> tuple[dict[str, int], list[str]]:
    """Each team's most calls in flight while duetime waited for them, and the violations: an overlap
    job's runs called at once, a team over its cap."""
    violations = []
    cancelled_at = {run_id: c.at for run_id, c in cancels.items()}
    waited = max_in_flight_while_waited(calls, call_timeout, cancelled_at)
    overlapping = overlapping_runs(calls, guarded, call_timeout, cancelled_at)
    if overlapping:
        violations.append(
            f"{len(overlapping)} calls of an overlap job's runs at once, e.g. {overlapping[:2]}"
        )
    over_cap = {team: waited[team] for team, cap in TEAMS.items() if waited[team] > cap}
    if over_cap:
        violations.append(f"team concurrency over the cap: {over_cap}")
    return waited, violations


def _schedules_behind(stack: BenchStack, jobs: list[Job], chaos_end: datetime) -> list[str]:
    """A violation if any job's next due time is not past the chaos's end."""
    behind = [
        j.id
        for j in jobs
        if (s := stack.store.get_job(j.id)) is None
        or s.state.next_fire_at is None
        or s.state.next_fire_at <= chaos_end
    ]
    return [f"{len(behind)} jobs whose next due time is not ahead"] if behind else []
