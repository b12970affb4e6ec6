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
least one run (the rules' ``run_seconds``) past the update: by then every holder started under it. (On AWS;
LocalStack stops the invocations still running at an update, and their lines are never stored.)

**Proof that a mode ran as labelled.** Each poller invocation logs the fan-out it runs with as its first
line (``fan_out.POLLER_INVOCATION_LOG``, field ``fan_out``), and each helper invocation the minute it serves
(``HELPER_INVOCATION_LOG``). A mode's *window* runs from its update being in effect to the end of its
minute's runs; the invocations counted for it are those whose first line is stamped inside it (the
function's own clock, this machine's). LocalStack stores an invocation's lines only when it ends, all
stamped with that instant: counting ``REPORT`` lines stored since a mode began put the fan_out mode's helpers,
which serve until their minute is over, under the alone mode (issue 51). So before the next mode's update
the bench waits until every invocation started in the window has ended (the pollers' timeout; the helpers'
``serve_until``), then reads the lines, and raises ``ModeNotInEffect`` rather than report a mode whose
invocations logged the other setting, whose group had no invocation in it, or (``fan_out``) in which no
helper started though a group's minute held more than ``holder_rows`` rows, or (``alone``) in which one did.

**The figures** (per mode): runs started and lost, repeats (a run id that reached the target more than
once), the seconds from the due second to the last claim (the run rows' ``created_at``, whole seconds) and
to the last start (the first call's arrival at the target), starts a second over that span, the poller
invocations in the window by their logged setting, the helper invocations, and the worker invocations whose
lines were stored in the window (Lambda's ``REPORT`` lines; they include the pollers' warm-up invocations, at
most one per group a minute).

**What LocalStack cannot show.** Its Lambda has no scaling rate, no account concurrency and no event source
ramp, and its DynamoDB no throughput limits: ``bench midnight --simulate`` models those. Here the machine's
2 cores run LocalStack, every function and the target, so starts a second are this machine's, not AWS's.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from duetime.adapters.aws.clients import new_client
from duetime.adapters.aws.store_clock import StoreClock
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.dynamodb.tables import TableNames
from duetime.api.service import JobService
from duetime.domain.ids import make_run_id, partition_of
from duetime.domain.timeutil import iso_z, parse_iso_z
from duetime.local.demo_target import DemoTargetServer
from duetime.local.deployed import stack_service
from duetime.scheduling.fan_out import (
    HELPER_INVOCATION_LOG,
    POLLER_INVOCATION_LOG,
    FanOutPolicy,
    FanOutSetting,
)
from duetime_bench.deployed import (
    StackInfo,
    TargetCall,
    deployed_stack,
    group_of,
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
LOG_DELIVERY_SECONDS = 10.0  # past an invocation's end: its lines are stored
# from a helper's minute to its serve_until (``fan_out.FanOut``), by when it has ended
HELPER_SERVES_AFTER = timedelta(minutes=1, seconds=FanOutPolicy().serve_after_seconds)


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


# --- what ran in a mode (pure) ---------------------------------------------------------------------------


class ModeNotInEffect(RuntimeError):
    """A mode's invocations do not show it ran as labelled: its figures would be another mode's."""


@dataclass(frozen=True)
class ModeWindow:
    """From a mode's update being in effect to the end of its minute's runs (epoch seconds, this machine's
    clock, which the functions LocalStack runs here share)."""

    start: float
    end: float

    def holds(self, at: float) -> bool:
        return self.start <= at < self.end


@dataclass(frozen=True)
class PollerInvocation:
    at: float  # epoch seconds: its first line (``POLLER_INVOCATION_LOG``)
    fan_out: FanOutSetting
    group: str | None  # its rule's partition group, e.g. "0-15"


@dataclass(frozen=True)
class HelperInvocation:
    at: float  # epoch seconds: its first line (``HELPER_INVOCATION_LOG``)
    partitions: tuple[int, ...]  # its slice of a group
    minute: datetime  # the minute it was started for


def _logged_at(timestamp: str) -> float:
    """A Powertools line's ``timestamp`` ("2026-12-07 18:46:56,502+0000") in epoch seconds."""
    return datetime.strptime(timestamp, "%Y-%m-%d %H:%M:%S,%f%z").timestamp()


def _lines(messages: Iterable[str], message: str) -> Iterator[tuple[float, dict[str, Any]]]:
    """The structured lines whose ``message`` is ``message``, with the instant each was logged."""
    for text in messages:
        if not text.startswith("{") or message not in text:
            continue
        try:
            line = json.loads(text)
        except ValueError:
            continue
        if isinstance(line, dict) and line.get("message") == message:
            yield _logged_at(line["timestamp"]), line


def poller_invocations(messages: Iterable[str]) -> list[PollerInvocation]:
    """The poller invocations whose lines ``messages`` holds, with the fan-out each logged it ran with."""
    return [
        PollerInvocation(at, FanOutSetting.model_validate(line["fan_out"]), line.get("group"))
        for at, line in _lines(messages, POLLER_INVOCATION_LOG)
    ]


def helper_invocations(messages: Iterable[str]) -> list[HelperInvocation]:
    """The helper invocations whose lines ``messages`` holds, with the slice and minute each served."""
    return [
        HelperInvocation(at, tuple(line["helper"]["partitions"]), parse_iso_z(line["helper"]["minute"]))
        for at, line in _lines(messages, HELPER_INVOCATION_LOG)
    ]


def mode_evidence(
    window: ModeWindow,
    due: datetime,
    pollers: Sequence[PollerInvocation],
    helpers: Sequence[HelperInvocation],
) -> dict[str, Any]:
    """What the invocations that started inside ``window`` logged: the pollers by their fan-out setting (and
    the holder rows of those with helpers), the groups they served, and the helpers (those that started only
    once their minute had begun, and those started for another minute than ``due``, too)."""
    ran = [p for p in pollers if window.holds(p.at)]
    helped = [h for h in helpers if window.holds(h.at)]
    return {
        "poller_invocations": {
            "fan_out_on": sum(p.fan_out.helpers for p in ran),
            "fan_out_off": sum(not p.fan_out.helpers for p in ran),
        },
        "poller_holder_rows": sorted({p.fan_out.holder_rows for p in ran if p.fan_out.holder_rows}),
        "poller_groups": dict(sorted(Counter(p.group or "?" for p in ran).items())),
        "helpers_invoked": len(helped),
        "helpers_started_in_their_minute": sum(h.at >= h.minute.timestamp() for h in helped),  # or later
        "helpers_for_another_minute": sum(h.minute != due for h in helped),
    }


def check_mode(
    mode: str,
    evidence: Mapping[str, Any],
    groups: Sequence[str],
    group_rows: Mapping[str, int],
    holder_rows: int,
) -> None:
    """Raise ``ModeNotInEffect`` unless ``evidence`` (``mode_evidence``) shows ``mode`` ran as labelled: every
    poller invocation in its window logged the mode's setting, every group had one, and helpers started
    (``fan_out``: when a group's minute, ``group_rows``, held more than ``holder_rows``) or none did
    (``alone``)."""
    pollers = evidence["poller_invocations"]
    problems = []
    other, setting = ("fan_out_off", "off") if mode == "fan_out" else ("fan_out_on", "on")
    if pollers[other]:
        problems.append(f"{pollers[other]} poller invocations in its window ran with fan-out {setting}")
    missing = ", ".join(g for g in groups if g not in evidence["poller_groups"])
    if missing:
        problems.append(f"no poller invocation of group {missing} logged its setting in its window")
    if mode == "fan_out":
        problems += _fan_out_problems(evidence, max(group_rows.values(), default=0), holder_rows)
    elif evidence["helpers_invoked"]:
        problems.append(f"{evidence['helpers_invoked']} helper invocations started in its window")
    if problems:
        reasons = "; ".join(problems)
        raise ModeNotInEffect(f"the {mode} mode did not take effect: {reasons} (logged: {evidence})")


def _fan_out_problems(evidence: Mapping[str, Any], busiest: int, holder_rows: int) -> list[str]:
    """Why ``evidence`` does not show fan-out at work: the pollers' holder rows were not ``holder_rows``, or
    no helper started though the busiest group's minute held ``busiest`` rows (more than ``holder_rows``)."""
    problems = []
    if any(rows != holder_rows for rows in evidence["poller_holder_rows"]):
        ran_with = evidence["poller_holder_rows"]
        problems.append(f"the pollers ran with holder rows {ran_with}, not {holder_rows}")
    if busiest <= holder_rows:
        problems.append(
            f"no group's minute holds more than {holder_rows} rows (the busiest {busiest}): nothing for "
            "helpers to take; more --jobs or fewer --holder-rows"
        )
    elif not evidence["helpers_invoked"]:
        problems.append(f"no helper started, though a group's minute held {busiest} rows")
    return problems


def rows_by_group(run_ids: Iterable[str], groups: Sequence[str]) -> dict[str, int]:
    """How many of ``run_ids`` each poller group claims (a run id is ``<job id>@<second>``)."""
    counts = Counter(group_of(partition_of(r.split("@")[0]), groups) or "?" for r in run_ids)
    return {g: counts.get(g, 0) for g in groups}


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
        configurations = [
            self.lambdas.get_function_configuration(FunctionName=name)
            for name in info.functions.get("poller", [])
        ]
        self.original = {c["FunctionName"]: c["Environment"]["Variables"] for c in configurations}
        self.poller_timeout = max((c.get("Timeout", 0) for c in configurations), default=150)
        self.run_seconds = max((s for s in info.poller_run_seconds if s), default=135)

    def restore(self) -> None:
        configure_pollers(self.lambdas, self.original)

    def messages(self, kind: str, since: float, until: float | None = None) -> list[str]:
        """The lines of ``kind``'s functions stored from ``since`` (to ``until``; epoch seconds)."""
        until_ms = None if until is None else int(until * 1000)
        return [
            m
            for name in self.info.functions.get(kind, [])
            for m in log_messages(self.logs, name, int(since * 1000), until_ms)
        ]

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
        """``jobs`` runs due at one second with the pollers set for ``mode``; its figures, once what its
        invocations logged shows it ran as labelled (else ``ModeNotInEffect``)."""
        _progress(f"{mode}: setting the pollers' environment")
        configure_pollers(
            self.lambdas, {n: poller_environment(v, mode, self.holder_rows) for n, v in self.original.items()}
        )
        window_start = time.time()
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
        self.wait_for_runs(mode, planned, due)
        time.sleep(SETTLE_SECONDS)
        window = ModeWindow(window_start, time.time())
        with ThreadPoolExecutor(CREATE_THREADS) as pool:
            rows = dict(zip(planned, pool.map(self.store.get_run, planned), strict=True))
        claimed_at = {r: run.created_at for r, run in rows.items() if run}
        figures = spike_figures(planned, self.calls_of(planned), claimed_at, due)
        evidence = self.evidence(mode, window, due)
        group_rows = rows_by_group(planned, self.info.groups)
        check_mode(mode, evidence, self.info.groups, group_rows, self.holder_rows)
        workers = invocation_figures(self.messages("worker", window.start, window.end))[0]
        return {
            **figures,
            **evidence,
            "spike_workers_invoked": workers["invocations"],
            "rows_by_group": group_rows,
            "due": iso_z(due),
            "window": [iso_z(datetime.fromtimestamp(t, due.tzinfo)) for t in (window.start, window.end)],
            "creation_s": rounded(creation_s),
            "created_after_lead": created_late,  # True: the jobs were still being written near the minute
        }

    def wait_for_runs(self, mode: str, planned: Mapping[str, datetime], due: datetime) -> None:
        """Until every planned run has called the target, or ``GRACE_SECONDS`` past ``due``."""

        def started() -> int:
            return len({c.run_id for c in self.calls_of(planned)})

        deadline = due + timedelta(seconds=GRACE_SECONDS)
        while self.clock.now() < deadline and started() < len(planned):
            _progress(f"{mode}: {started()}/{len(planned)} runs have called the target")
            wait_until(lambda: started() >= len(planned), timeout=15, every=0.5)

    def evidence(self, mode: str, window: ModeWindow, due: datetime) -> dict[str, Any]:
        """What the poller and helper invocations that started in ``window`` logged (``mode_evidence``), read
        once every one of them has ended and its lines are stored: LocalStack stores them only then, and
        stops the invocations still running at the next update without storing any."""
        ended_by = max(
            window.end + self.poller_timeout,
            (due + HELPER_SERVES_AFTER).timestamp(),  # the helpers' serve_until
        )
        wait = ended_by + LOG_DELIVERY_SECONDS - time.time()
        if wait > 0:
            _progress(f"{mode}: {wait:.0f} s for the invocations started in its window to end and log")
            time.sleep(wait)
        pollers = poller_invocations(self.messages("poller", window.start))
        helpers = helper_invocations(self.messages("helper", window.start))
        return mode_evidence(window, due, pollers, helpers)


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
