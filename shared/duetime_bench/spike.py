"""`duetime bench spike`: N jobs due in the same minute, through the real poller and worker code on the
local stack, with a ceiling of the bare claim writes measured in the same run for comparison."""

from __future__ import annotations

import math
import os
import threading
import time
from collections import Counter
from contextlib import nullcontext
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from duetime.adapters.aws.clients import new_client
from duetime.adapters.dynamodb import partiql
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.capacity.prices import PRICES_AS_OF, PRICES_USD
from duetime.domain.claim_plan import initial_state, make_claim, plan_claim
from duetime.domain.ids import new_job_id
from duetime.domain.models import Job, JobSpec
from duetime.execution.worker import WorkOutcome, WorkReport
from duetime.local.demo_target import demo_target_process
from duetime.scheduling.preload import FireReport
from duetime_bench.fleet import WorkerFleet
from duetime_bench.harness import BENCH_TEAM, BenchStack, percentile, wait_until
from duetime_bench.isolation import CoreSplit, emulator_on_own_cores

WORKER_MEMORY_GB = 1.0
WORKER_BATCH = 10


def spike_jobs(
    count: int,
    minute: datetime,
    jitter: int,
    exact_fraction: float,
    target: str | dict[str, Any],
    created: datetime,
    teams: int = 1,
) -> list[Job]:
    """``count`` daily jobs whose nominal time is ``minute`` (UTC); the first ``exact_fraction`` exact.
    ``target``: an HTTP target's URL, or a target's spec (an AWS target's). Dealt round-robin to ``teams``
    teams (``bench_team_ids``), so a worker's batch holds runs of as many teams as it would at scale."""
    base = JobSpec.model_validate(
        {
            "name": "spike",
            "schedule": {"cron": f"{minute.minute} {minute.hour} * * *", "timezone": "UTC"},
            "target": {"url": target} if isinstance(target, str) else target,
            "jitter_seconds": jitter,
            "retry": {"max_attempts": 1},
        }
    )
    exact_count = round(count * exact_fraction)
    team_ids = bench_team_ids(teams)
    jobs = []
    for i in range(count):
        spec = base.model_copy(update={"exact": i < exact_count})
        job = Job(
            **spec.model_dump(),
            id=new_job_id(),
            team=team_ids[i % teams],
            created_at=created,
            updated_at=created,
        )
        jobs.append(job.model_copy(update={"state": initial_state(job, created)}))
    return jobs


def bench_team_ids(teams: int) -> list[str]:
    """The bench's teams: ``bench`` (``harness.BENCH_TEAM``), then ``bench-1`` ... ``bench-<teams - 1>``."""
    return [BENCH_TEAM.team_id] + [f"{BENCH_TEAM.team_id}-{n}" for n in range(1, teams)]


def raw_ceiling(stack: BenchStack, jobs: list[Job], now: datetime) -> float:
    """Claims per second of a bare loop of the claims' writes (BatchExecuteStatement: 25 run rows, then
    their 25 schedule moves, the statements ``DynamoStore.claim`` makes) against the same DynamoDB Local,
    on a client with no hooks, one request at a time."""
    bare = DynamoStore(new_client("dynamodb"), stack.names)
    stack.write_jobs(jobs, now)
    claims = [make_claim(plan_claim(job, job.state.next_fire_at or now), now) for job in jobs]
    batch = partiql.BATCH_STATEMENTS_MAX
    requests = []
    for i in range(0, len(claims), batch):
        rows, moves = bare.claim_statements(claims[i : i + batch], now)
        requests += [rows, moves]
    started = time.perf_counter()
    for statements in requests:
        bare.client.batch_execute_statement(Statements=[statement.request() for statement in statements])
    return len(claims) / (time.perf_counter() - started)


def claim_path_alone(stack: BenchStack, jobs: list[Job], now: datetime, chunk: int = 500) -> float:
    """Claims per second of the real claim path (``DynamoStore.claim``: the version read, the run rows, the
    tickets, the schedule moves, a few requests at once) on the same client kind as ``raw_ceiling``, a
    chunk at a time as the preload fires, with nothing else running. Beside the bare ceiling it tells what
    the claim code costs; beside the spike's ``claims_per_s``, what the spike's other work costs the
    claims on this machine (workers, LocalStack and the poller share its cores; on AWS they do not)."""
    store = DynamoStore(new_client("dynamodb"), stack.names)
    stack.write_jobs(jobs, now)
    claims = [make_claim(plan_claim(job, job.state.next_fire_at or now), now) for job in jobs]
    started = time.perf_counter()
    for i in range(0, len(claims), chunk):
        store.claim(claims[i : i + chunk], now)
    return len(claims) / (time.perf_counter() - started)


def merge_usage(snapshots: list[dict[str, Any]]) -> dict[str, Any]:
    """Requests and units of the poller's process and every worker process, added up."""
    merged: dict[str, Any] = {"by_operation": {}}
    for snapshot in snapshots:
        for key, value in snapshot.items():
            if key == "by_operation":
                for operation, count in value.items():
                    merged["by_operation"][operation] = merged["by_operation"].get(operation, 0) + count
            else:
                merged[key] = merged.get(key, 0) + value
    return merged


def run_spike(
    jobs: int,
    exact_fraction: float = 0.0,
    jitter: int = 0,
    workers: int = 16,
    ceiling_jobs: int = 5000,
    timeout: float = 900.0,
    chart: str | None = None,
    worker_processes: int = 2,
    own_cores: bool = True,
    teams: int = 1,
) -> dict[str, Any]:
    """With ``own_cores``, DynamoDB Local runs on cores of its own for the whole run (ceiling included),
    as DynamoDB does on AWS; without, everything shares every core (see ``bench.isolation``)."""
    stack = BenchStack.create()
    endpoints = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB"), os.environ.get("AWS_ENDPOINT_URL_SQS")
    cores = emulator_on_own_cores(*endpoints) if own_cores else nullcontext(None)
    try:
        # The target answers from a process of its own: its CPU is not the client's (client_cpu_ms_per_run).
        with cores as split, demo_target_process() as target_url:
            return _run_spike(
                target_url,
                stack,
                jobs,
                exact_fraction,
                jitter,
                workers,
                ceiling_jobs,
                timeout,
                chart,
                worker_processes,
                split,
                teams,
            )
    finally:
        stack.close()


def _run_spike(
    target_url: str,
    stack: BenchStack,
    jobs: int,
    exact_fraction: float,
    jitter: int,
    workers: int,
    ceiling_jobs: int,
    timeout: float,
    chart: str | None,
    worker_processes: int,
    split: CoreSplit | None,
    teams: int = 1,
) -> dict[str, Any]:
    now = stack.clock.now()
    for team_id in bench_team_ids(teams)[1:]:  # as the bench's own team: no cap a spike could reach
        stack.store.put_team(BENCH_TEAM.model_copy(update={"team_id": team_id}))
    lead = timedelta(seconds=jobs / 1500 + 20)  # time to write the jobs, plus the preload lead
    minute = (now + lead + timedelta(minutes=1)).replace(second=0, microsecond=0)
    created = now - timedelta(seconds=1)
    stack.write_jobs(spike_jobs(jobs, minute, jitter, exact_fraction, target_url, created, teams), created)
    wait_until(lambda: stack.clock.now() >= minute - timedelta(seconds=15), timeout=300, every=0.5)
    stack.ledger.reset()
    fleet = stack.fleet(processes=worker_processes, threads=max(1, workers // worker_processes))
    fires, cpu_ms = _fire_until_started(stack, fleet, jobs, timeout + (minute - now).total_seconds())
    usage = merge_usage([stack.ledger.snapshot(), *fleet.usage])

    started = [r for r in fleet.reports if r.started_at is not None and r.start_lateness_seconds is not None]
    start_times = sorted(r.started_at.timestamp() for r in started if r.started_at)
    runs_started = len({r.run_id for r in started})
    claims_per_s, starts_per_s = _rates(fires, start_times)
    ceiling_batch = partial(spike_jobs, min(jobs, ceiling_jobs), minute, jitter, 0.0, target_url, created)
    ceiling = raw_ceiling(stack, ceiling_batch(), created)
    alone = claim_path_alone(stack, ceiling_batch(), created)
    per_run = max(1, runs_started)
    result: dict[str, Any] = {
        "jobs": jobs,
        "teams": teams,
        "runs_started": runs_started,
        "lost": jobs - runs_started,
        "claims_per_s": round(claims_per_s, 1),
        "starts_per_s": round(starts_per_s, 1),
        "peak_starts_per_s": peak_per_second(start_times),
        **_lateness_figures(started),
        "raw_ceiling_claims_per_s": round(ceiling, 1),
        "ratio": round(claims_per_s / ceiling, 3),
        "claim_path_alone_claims_per_s": round(alone, 1),  # the claim code with nothing else running
        "claim_path_alone_ratio": round(alone / ceiling, 3),
        **_per_run(usage, cpu_ms, per_run),
        "exact_fraction": exact_fraction,
        "jitter_s": jitter,
        "workers": workers,
        "cores": split.describe() if split else "shared: emulators, poller and workers on every core",
    }
    result["usd_per_million_runs"] = round(usd_per_million(result), 2)
    result["prices_as_of"] = PRICES_AS_OF
    result["requests_by_operation"] = {
        k: round(v / per_run, 3) for k, v in sorted(usage["by_operation"].items())
    }
    if chart:
        from duetime_bench.chart import spike_chart

        spike_chart(chart, minute, start_times, started, result)
    return result


def _rates(fires: list[tuple[float, FireReport]], start_times: list[float]) -> tuple[float, float]:
    """Runs claimed a second of claiming, and runs started a second from the first start to the last."""
    claimed = sum(f.runs_created for _, f in fires)
    claims_per_s = claimed / (sum(f.claim_seconds for _, f in fires) or math.nan)
    starts_per_s = (
        len(start_times) / max(1e-9, start_times[-1] - start_times[0]) if len(start_times) > 1 else math.nan
    )
    return claims_per_s, starts_per_s


def _lateness_figures(started: list[WorkReport]) -> dict[str, float]:
    """How late the runs started after their second: median, 99th percentile, most and least."""
    lateness = [r.start_lateness_seconds for r in started if r.start_lateness_seconds is not None]
    return {
        "lateness_p50_s": round(percentile(lateness, 0.50), 3),
        "lateness_p99_s": round(percentile(lateness, 0.99), 3),
        "lateness_max_s": round(max(lateness) if lateness else math.nan, 3),
        "lateness_min_s": round(min(lateness) if lateness else math.nan, 3),  # < 0: started early
    }


def _fire_until_started(
    stack: BenchStack, fleet: WorkerFleet, jobs: int, timeout: float
) -> tuple[list[tuple[float, FireReport]], float]:
    """The poller in a thread and ``fleet`` working until ``jobs`` runs started (or ``timeout`` s), then
    both stopped and the reap checks settled: the poller's fires (when, what) and the CPU ms spent by this
    process and the fleet's."""
    fires: list[tuple[float, FireReport]] = []
    stop = threading.Event()
    poller = stack.poller()
    fleet.start()
    poller_thread = threading.Thread(
        target=poller.run_until,
        kwargs={
            "stop": stop.is_set,
            "sleep": stop.wait,
            "on_fire": lambda r: fires.append((time.time(), r)),
        },
    )
    cpu_before = time.process_time()
    poller_thread.start()

    def started_runs() -> int:
        return len(
            {
                r.run_id
                for r in fleet.collect()
                if r.outcome not in (WorkOutcome.DUPLICATE, WorkOutcome.DEFERRED)
            }
        )

    wait_until(lambda: started_runs() >= jobs, timeout=timeout, every=0.5)
    stop.set()
    poller_thread.join(timeout=60)
    fleet.stop()
    stack.settle_reap_checks(poller)
    return fires, (time.process_time() - cpu_before + fleet.cpu_seconds) * 1000


def _per_run(usage: dict[str, Any], cpu_ms: float, per_run: int) -> dict[str, float]:
    """What each run started took of DynamoDB, SQS and this machine's CPU."""
    return {
        "ddb_write_units_per_run": round(usage["write_units"] / per_run, 2),
        "ddb_read_units_per_run": round(usage["read_units"] / per_run, 2),
        "ddb_local_consumed_write_units_per_run": round(usage["local_write_units"] / per_run, 2),
        "ddb_local_consumed_read_units_per_run": round(usage["local_read_units"] / per_run, 2),
        "ddb_requests_per_run": round(usage["dynamodb_requests"] / per_run, 2),
        "sqs_requests_per_run": round(usage["sqs_requests"] / per_run, 2),
        "client_cpu_ms_per_run": round(cpu_ms / per_run, 2),
    }


def peak_per_second(instants: list[float]) -> int:
    """The most instants (epoch seconds) falling in one wall-clock second."""
    return max(Counter(math.floor(i) for i in instants).values(), default=0)


def usd_per_million(result: dict[str, Any]) -> float:
    """DynamoDB units, SQS requests, and the worker Lambda (a request per batch of 10 runs, and GB-seconds
    from the client CPU measured per run), per million runs, at the list prices in ``prices.py``."""
    per_run = (
        result["ddb_write_units_per_run"] * PRICES_USD["dynamodb_write_request_unit"]
        + result["ddb_read_units_per_run"] * PRICES_USD["dynamodb_read_request_unit"]
        + result["sqs_requests_per_run"] * PRICES_USD["sqs_request"]
        + PRICES_USD["lambda_request"] / WORKER_BATCH
        + result["client_cpu_ms_per_run"] / 1000 * WORKER_MEMORY_GB * PRICES_USD["lambda_gb_second_arm64"]
    )
    return float(per_run * 1_000_000)
