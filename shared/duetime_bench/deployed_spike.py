"""`duetime bench spike --deployed-local`: one second's exact jobs on the stack ``make deploy-local`` deploys,
claimed with the pollers' fan-out on and then off, in one run, side by side.

Everything that claims and starts is the stack's: LocalStack's EventBridge rules invoke the poller functions,
a group's holder invokes the ``PollerHelper`` function for the slices it hands out
(``duetime.scheduling.fan_out``), LocalStack's SQS event source invokes the worker function, and the workers
call a ``DemoTargetServer`` on 127.0.0.1 in this process. The jobs are written by the API's own logic
(``JobService``) in this process, straight to the stack's tables: the API Gateway path is the precision
bench's subject, not this one's, and 3,000 jobs through it would take minutes.

**The modes.** A mode is the pollers' environment, set with UpdateFunctionConfiguration before its jobs
are written, and put back as it was at the end:

- ``fan_out``: ``DUETIME_FAN_OUT_HOLDER_ROWS`` lowered to ``holder_rows`` (the stack's 5,000 is more than
  this machine's spike holds), so a group's holder hands slices of a busy minute to helpers;
- ``alone``: no ``DUETIME_POLLER_HELPER_FUNCTION``, so every holder claims its whole group by itself.

A poller invocation keeps the environment it started with for its whole run, so a mode's minute is at
least one run (the rules' ``run_seconds``) past the update: by then every holder started under it.

**The figures** (per mode): runs started and lost, repeats (a run id that reached the target more than
once), the seconds from the due second to the last claim (the run rows' ``created_at``, whole seconds) and
to the last start (the first call's arrival at the target), starts a second over that span, and the
invocations LocalStack's CloudWatch logs hold for the helper and worker functions during the mode (Lambda's
``REPORT`` lines; the worker's include the pollers' warm-up invocations, at most one per group a minute).

**What LocalStack cannot show.** Its Lambda has no scaling rate, no account concurrency and no event source
ramp, and its DynamoDB no throughput limits: ``bench midnight --simulate`` models those. Here the machine's
2 cores run LocalStack, every function and the target, so starts a second are this machine's, not AWS's.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from duetime.adapters.aws.clients import new_client
from duetime.adapters.aws.store_clock import StoreClock
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.dynamodb.tables import TableNames
from duetime.api.service import JobService
from duetime.domain.ids import make_run_id
from duetime.domain.timeutil import iso_z
from duetime.local.demo_target import DemoTargetServer
from duetime.local.deployed import stack_service
from duetime_bench.deployed import (
    StackInfo,
    TargetCall,
    deployed_stack,
    invocation_figures,
    lateness_figures,
    log_messages,
    rounded,
)
from duetime_bench.harness import wait_until

if TYPE_CHECKING:
    from mypy_boto3_lambda.client import LambdaClient

MODES = ("fan_out", "alone")
HOLDER_ROWS = 300  # a group's holder claims this many of a minute's rows alone; the rest go to helpers
HOLDER_ROWS_VARIABLE = "DUETIME_FAN_OUT_HOLDER_ROWS"
HELPER_VARIABLE = "DUETIME_POLLER_HELPER_FUNCTION"
CREATE_THREADS = 8
CREATE_SECONDS_PER_JOB = 0.03  # straight to the tables: ~50-100 a second on this machine (generous)
LEAD_SECONDS = 45.0  # the minute is at least this far past the last job's creation (fan-out counts at -30 s)
RUN_SLACK_SECONDS = 15.0  # past one poller run after the update: its last old invocation has ended
GRACE_SECONDS = 240.0  # the runs may take this long past their second to start
SETTLE_SECONDS = 5.0  # after the last run's call: time for a repeat call to show up


def _progress(text: str) -> None:
    print(f"bench spike (deployed-local): {text}", file=sys.stderr, flush=True)


def poller_environment(variables: Mapping[str, str], mode: str, holder_rows: int) -> dict[str, str]:
    """A poller function's environment for ``mode``, from the one the stack gave it."""
    if mode == "fan_out":
        if not variables.get(HELPER_VARIABLE):
            raise RuntimeError("the stack has no helper function (deployed with -c poller_fan_out=false)")
        return {**variables, HOLDER_ROWS_VARIABLE: str(holder_rows)}
    if mode == "alone":
        return {k: v for k, v in variables.items() if k not in (HELPER_VARIABLE, HOLDER_ROWS_VARIABLE)}
    raise ValueError(f"unknown mode {mode!r}: one of {', '.join(MODES)}")


def configure_pollers(lambdas: LambdaClient, environments: Mapping[str, Mapping[str, str]]) -> None:
    """Set each poller function's environment and wait until LocalStack has the update."""
    for name, variables in environments.items():
        lambdas.update_function_configuration(FunctionName=name, Environment={"Variables": dict(variables)})
    for name in environments:
        lambdas.get_waiter("function_updated_v2").wait(FunctionName=name)


def spike_figures(
    planned: Mapping[str, datetime],
    calls: Sequence[TargetCall],
    claimed_at: Mapping[str, datetime],
    due: datetime,
) -> dict[str, Any]:
    """A mode's figures from the target's record and the run rows (pure). ``planned``: run id -> due
    second; ``claimed_at``: run id -> its row's ``created_at`` (the claim), for the rows found."""
    figures, lateness = lateness_figures(dict(planned), calls)
    started = list(lateness.values())  # the first call of each run minus its second (exact jobs: ``due``)
    to_all_started = max(started) if started and not figures["lost"] else None
    claims = [(at - due).total_seconds() for at in claimed_at.values()]
    return {
        "runs": len(planned),
        "lost": figures["lost"],
        "repeated": figures["repeats"],
        "runs_started": figures["runs_started"],
        "seconds_to_all_claimed": max(claims) if len(claims) == len(planned) else None,
        "seconds_to_all_started": rounded(to_all_started),
        "starts_per_s": rounded(len(started) / to_all_started) if to_all_started else None,
        "lateness_p50_s": figures["lateness_p50_s"],
        "lateness_p99_s": figures["lateness_p99_s"],
        "early": figures["early"],
        "unexpected_calls": figures["unexpected_calls"],
        "wrong_scheduled_at": figures["wrong_scheduled_at"],
    }


def create_spike_jobs(
    service: JobService, team_id: str, target_url: str, due: datetime, jobs: int
) -> list[str]:
    """``jobs`` exact one-time jobs of ``team_id`` due at ``due``, on a few threads; their run ids."""
    team = service.team(team_id)
    body = {
        "name": "deployed spike",
        "schedule": {"at": iso_z(due)},
        "exact": True,
        "target": {"url": target_url},
        "retry": {"max_attempts": 1},
    }

    def create(index: int) -> str:
        job = service.create_job(team, {**body, "name": f"deployed spike {index}"}, actor="bench")
        return make_run_id(job.id, due)

    with ThreadPoolExecutor(CREATE_THREADS) as pool:
        return list(pool.map(create, range(jobs)))


class SpikeRun:
    """One bench run on one stack: its clients, clock, target and the pollers' original environments."""

    def __init__(self, info: StackInfo, target: DemoTargetServer, holder_rows: int) -> None:
        stack = info.stack
        self.info, self.target, self.holder_rows = info, target, holder_rows
        self.lambdas = new_client("lambda", stack.endpoint)
        self.logs = new_client("logs", stack.endpoint)
        dynamodb = new_client("dynamodb", stack.endpoint)
        self.store = DynamoStore(
            dynamodb, TableNames(stack.jobs_table, stack.runs_table, stack.control_table)
        )
        self.clock = StoreClock(dynamodb, sync=lambda: self.store.low_water_marks([0]))
        self.service = stack_service(stack, allow_private_targets=True)
        self.original = {
            name: self.lambdas.get_function_configuration(FunctionName=name)["Environment"]["Variables"]
            for name in info.functions.get("poller", [])
        }
        self.run_seconds = max((s for s in info.poller_run_seconds if s), default=135)

    def restore(self) -> None:
        configure_pollers(self.lambdas, self.original)

    def invocations(self, kind: str, since_ms: int) -> dict[str, Any]:
        messages = [
            m for name in self.info.functions.get(kind, []) for m in log_messages(self.logs, name, since_ms)
        ]
        return invocation_figures(messages)[0]

    def calls_of(self, planned: Mapping[str, datetime]) -> list[TargetCall]:
        with self.target.recorder.lock:
            return [
                TargetCall(
                    c.headers.get("x-duetime-run-id", ""),
                    c.headers.get("x-duetime-scheduled-at", ""),
                    c.received_at,
                )
                for c in self.target.recorder.calls
                if c.headers.get("x-duetime-run-id", "") in planned
            ]

    def spike(self, mode: str, jobs: int) -> dict[str, Any]:
        since_ms = int(time.time() * 1000)
        _progress(f"{mode}: setting the pollers' environment")
        configure_pollers(
            self.lambdas, {n: poller_environment(v, mode, self.holder_rows) for n, v in self.original.items()}
        )
        configured = self.clock.now()
        team_id = f"spike-{mode.replace('_', '-')}-{uuid.uuid4().hex[:6]}"
        self.service.create_team(team_id, max_concurrency=max(jobs, 1), exact_quota=max(jobs, 1))
        earliest = max(
            configured + timedelta(seconds=self.run_seconds + RUN_SLACK_SECONDS),
            configured + timedelta(seconds=jobs * CREATE_SECONDS_PER_JOB + LEAD_SECONDS),
        )
        due = earliest.replace(second=0, microsecond=0) + timedelta(minutes=1)
        _progress(f"{mode}: creating {jobs} exact jobs due {iso_z(due)}")
        began = time.monotonic()
        planned = dict.fromkeys(create_spike_jobs(self.service, team_id, self.target.url, due, jobs), due)
        creation_s = time.monotonic() - began
        created_late = self.clock.now() > due - timedelta(seconds=LEAD_SECONDS)

        def started() -> int:
            return len({c.run_id for c in self.calls_of(planned)})

        deadline = due + timedelta(seconds=GRACE_SECONDS)
        while self.clock.now() < deadline and started() < len(planned):
            _progress(f"{mode}: {started()}/{len(planned)} runs have called the target")
            wait_until(lambda: started() >= len(planned), timeout=15, every=0.5)
        time.sleep(SETTLE_SECONDS)
        with ThreadPoolExecutor(CREATE_THREADS) as pool:
            rows = dict(zip(planned, pool.map(self.store.get_run, planned), strict=True))
        claimed_at = {r: run.created_at for r, run in rows.items() if run}
        return {
            **spike_figures(planned, self.calls_of(planned), claimed_at, due),
            "helpers_invoked": self.invocations("helper", since_ms)["invocations"],
            "spike_workers_invoked": self.invocations("worker", since_ms)["invocations"],
            "poller_invocations": self.invocations("poller", since_ms)["invocations"],
            "due": iso_z(due),
            "creation_s": rounded(creation_s),
            "created_after_lead": created_late,  # True: the jobs were still being written near the minute
        }


def run_deployed_spike(
    jobs: int,
    port: int | None = None,
    redeploy: bool = False,
    holder_rows: int = HOLDER_ROWS,
    modes: Sequence[str] = MODES,
) -> dict[str, Any]:
    """The spike in each of ``modes`` on the deployed stack, one after the other; the pollers' environment
    is put back afterwards, whatever happens."""
    with deployed_stack(port, redeploy, _progress) as info:
        target = DemoTargetServer().start()
        run = SpikeRun(info, target, holder_rows)
        run.clock.start_refining()
        try:
            results = {mode: run.spike(mode, jobs) for mode in modes}
        finally:
            run.restore()
            target.shutdown()
            target.server_close()
        return {
            "jobs": jobs,
            "mode": "deployed-local",
            "holder_rows": holder_rows,
            "poller_groups": info.groups,
            **results,
            "stack": info.how,
            "endpoint": info.stack.endpoint,
        }
