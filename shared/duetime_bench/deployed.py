"""`duetime bench precision --deployed-local`: the precision bench on the stack ``make deploy-local`` deploys.

Nothing here runs duetime's code in the bench's process: the jobs go in through the deployed API (API
Gateway -> api function), LocalStack's EventBridge rules invoke the poller functions (each invocation runs
135 s and hands its group's lease over at an agreed whole second), LocalStack's SQS event source mapping
invokes the worker function, and the worker calls a ``DemoTargetServer`` on 127.0.0.1 in this process.

The stack: the one answering on the port (``DUETIME_DEPLOYED_PORT``, 4610) is reused; if none answers,
``scripts/deploy_local.sh --detach`` deploys one and it is stopped afterwards (only then: a LocalStack the
bench found running is left running). ``--redeploy`` replaces a stack it finds, as ``make deploy-local``
does (a stack deployed from older code measures older code).

**The clock.** Lateness is the target's clock: the instant the call reached the target (``time.time()`` in
this process) minus the second in ``X-Duetime-Scheduled-At``. That is what a job's owner sees, and it does
not depend on the code under test: the store's clock (DynamoDB's ``Date`` header, which every poller and
worker refines and uses to decide "its second") is duetime's own estimate, and measuring with it would let
an error of that estimate hide itself. Here the store is LocalStack's DynamoDB on this same machine, so the
two are one kernel clock; the bench measures the store's clock against the target's anyway (the same
probes the workers make) and reports the offset and its uncertainty, so an early start cannot be an
artefact of the reference. The in-process bench (``precision.py``) reports the worker's lease time minus
the fire time on the worker's store clock; the workers here report the same figure in their
``StartLateness`` metric (floored at 0), read back from their logs as ``worker_start_lateness_*``.

What else is measured, to tell where lateness comes from: the second each run was claimed (the run row's
``created_at``, whole seconds), the pollers' leases sampled every second (handovers, takeovers, seconds in
which no invocation held a group), and the functions' CloudWatch logs (invocations, cold starts).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

from duetime.adapters.aws.clients import new_client
from duetime.adapters.aws.store_clock import StoreClock
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.dynamodb.tables import TableNames
from duetime.client import ApiFailure, DuetimeClient
from duetime.domain.ids import make_run_id, partition_of
from duetime.domain.models import Run
from duetime.domain.timeutil import iso_z, parse_iso_z
from duetime.local.demo_target import DemoTargetServer
from duetime.local.deployed import STACK, DeployedStack, team_token, wait_until_jobs_can_be_created
from duetime.local.system import EMULATORS_SCRIPT
from duetime.ports import PollerLease
from duetime_bench.harness import percentile, wait_until

if TYPE_CHECKING:
    from mypy_boto3_logs.client import CloudWatchLogsClient

DEPLOY_SCRIPT = EMULATORS_SCRIPT.parent / "deploy_local.sh"
DEFAULT_PORT = 4610
DEPLOY_SECONDS = 900.0  # LocalStack, synth, bootstrap, deploy: a minute or two on an idle machine
CREATE_THREADS = 4
LEAD_SECONDS = 30.0  # the window starts at the first whole minute this far ahead, plus time to create
CREATE_SECONDS_PER_JOB = 0.1  # the jobs (generous: ~15 creations/s through API Gateway here)
PRELOAD_AHEAD_SECONDS = 10  # the poller loads a minute this long before it starts
LEASE_SAMPLE_SECONDS = 1.0
NEAR_HANDOVER_SECONDS = 2
SETTLE_SECONDS = 5.0  # after the last run's call: time for a repeat call to show up

_REPORT = re.compile(r"^REPORT RequestId:")
_INIT = re.compile(r"Init Duration: ([\d.]+) ms")


# --- the figures (pure) ----------------------------------------------------------------------------------


def due_offsets(jobs: int, seconds: int) -> list[int]:
    """Whole-second offsets from the window's start (a whole minute) for ``jobs`` one-time jobs over
    ``seconds``: every second when there are at least as many jobs as seconds (the extra ones spread
    evenly); otherwise every minute's first and last second (the preload's boundaries) and the rest of
    the jobs spread evenly over the other seconds, one job a second at most."""
    if jobs <= 0 or seconds <= 0:
        return []
    if jobs >= seconds:
        return [i * seconds // jobs for i in range(jobs)]
    anchors = sorted({*range(0, seconds, 60), *range(59, seconds, 60)})
    if jobs <= len(anchors):
        return sorted(anchors[i * len(anchors) // jobs] for i in range(jobs))
    others = sorted(set(range(seconds)) - set(anchors))
    rest = jobs - len(anchors)
    return sorted([*anchors, *(others[i * len(others) // rest] for i in range(rest))])


@dataclass(frozen=True)
class TargetCall:
    run_id: str  # X-Duetime-Run-Id
    scheduled_at: str  # X-Duetime-Scheduled-At, as sent
    received_at: float  # epoch seconds, the target's clock


def rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _spread(values: Sequence[float], prefix: str) -> dict[str, float | None]:
    """p50 / p99 / max of ``values`` as ``<prefix>_p50_s``...; None when there are none."""
    return {
        f"{prefix}_p50_s": rounded(percentile(list(values), 0.50)) if values else None,
        f"{prefix}_p99_s": rounded(percentile(list(values), 0.99)) if values else None,
        f"{prefix}_max_s": rounded(max(values)) if values else None,
    }


def lateness_figures(
    planned: dict[str, datetime], calls: Sequence[TargetCall]
) -> tuple[dict[str, Any], dict[str, float]]:
    """The precision bench's figures from the target's record: ``planned`` is run id -> due second. A run
    started when its run id reached the target at least once; its lateness is the first call's arrival
    minus its ``X-Duetime-Scheduled-At``. Also returns each started run's lateness."""
    first: dict[str, TargetCall] = {}
    for call in sorted(calls, key=lambda c: c.received_at):
        first.setdefault(call.run_id, call)
    started = [run_id for run_id in planned if run_id in first]
    lateness = {r: first[r].received_at - parse_iso_z(first[r].scheduled_at).timestamp() for r in started}
    values = list(lateness.values())
    figures = {
        "runs_started": len(started),
        "lost": len(planned) - len(started),
        **_spread(values, "lateness"),
        "lateness_min_s": rounded(min(values)) if values else None,  # < 0: a call before its second
        "early": sum(v < 0 for v in values),
        "late_over_1s": sum(v > 1 for v in values),
        "late_over_2s": sum(v > 2 for v in values),
        "target_calls": len(calls),
        "repeats": sum(c.run_id in planned for c in calls) - len(started),  # calls after a run's first
        "unexpected_calls": sum(c.run_id not in planned for c in calls),
        "wrong_scheduled_at": sum(first[r].scheduled_at != iso_z(planned[r]) for r in started),
    }
    return figures, lateness


def max_by_minute(
    planned: dict[str, datetime], lateness: dict[str, float], start: datetime
) -> list[float | None]:
    """The largest lateness among the runs due in each minute of the window (None: none started)."""

    def minute(at: datetime) -> int:
        return int((at - start).total_seconds() // 60)

    minutes: list[list[float]] = [[] for _ in range(max(map(minute, planned.values()), default=-1) + 1)]
    for run_id, at in planned.items():
        if run_id in lateness:
            minutes[minute(at)].append(lateness[run_id])
    return [rounded(max(values)) if values else None for values in minutes]


@dataclass(frozen=True)
class LeaseSample:
    group: str
    at: datetime  # the store's clock, when read
    lease: PollerLease


@dataclass
class LeaseChanges:
    handovers: list[tuple[str, datetime]] = field(default_factory=list)  # (group, agreed whole second)
    takeovers: list[tuple[str, datetime]] = field(default_factory=list)  # (group, taken at): expired
    free_takes: list[tuple[str, datetime]] = field(default_factory=list)  # (group, taken at): given back
    unseen: int = 0  # terms that came and went between two samples
    unheld_seconds: float = 0.0  # sampled time in which a group had no live holder


def lease_changes(
    samples: Sequence[LeaseSample], start: datetime, end: datetime, every: float
) -> LeaseChanges:
    """Who held each group's lease over [start, end], from samples taken every ``every`` s. A new term whose
    ``since`` is a whole second was handed over at that second (an acceptance sets ``since`` to the agreed
    second); any other new term took a free or expired lease (``since`` = the store's now, in ms): a
    ``free_take`` when the sample before shows the lease given back (a rested group's next tick, the end of
    a run) or still unexpired at ``since`` (it can only have been given back), else a takeover of a holder
    that stopped renewing (also when terms came and went unseen in between)."""
    changes = LeaseChanges()
    by_group: dict[str, list[LeaseSample]] = defaultdict(list)
    for sample in samples:
        by_group[sample.group].append(sample)
    for group, seen in by_group.items():
        seen.sort(key=lambda s: s.at)
        for sample in seen:
            if start <= sample.at < end and sample.lease.free_at(sample.at):
                changes.unheld_seconds += every
        for before, after in pairwise(seen):
            new_terms = after.lease.term - before.lease.term
            since = after.lease.since
            if new_terms <= 0 or since is None or not start <= since < end:
                continue
            changes.unseen += new_terms - 1
            if since.microsecond == 0:
                kind = changes.handovers
            elif new_terms == 1 and not _expired_before(before.lease, since):
                kind = changes.free_takes
            else:
                kind = changes.takeovers
            kind.append((group, since))
    return changes


def _expired_before(lease: PollerLease, since: datetime) -> bool:
    """Whether ``lease`` had a holder whose lease had expired by ``since``."""
    return lease.holder is not None and (lease.expires_at is None or lease.expires_at < since)


def group_of(partition: int, groups: Sequence[str]) -> str | None:
    """The group label (``"0-15"``, ``"0-7,32-39"``) whose ranges hold ``partition``."""
    for label in groups:
        for part in label.split(","):
            low, _, high = part.partition("-")
            if int(low) <= partition <= int(high or low):
                return label
    return None


def near_handovers(
    planned: dict[str, datetime],
    lateness: dict[str, float],
    groups: Mapping[str, str | None],
    handovers: Sequence[tuple[str, datetime]],
    within: int = NEAR_HANDOVER_SECONDS,
) -> dict[str, Any]:
    """The runs due within ``within`` s of a handover of their own group, and how late they were."""
    near = [
        r
        for r, at in planned.items()
        if any(g == groups.get(r) and abs((at - x).total_seconds()) <= within for g, x in handovers)
    ]
    values = [lateness[r] for r in near if r in lateness]
    return {"runs": len(near), "started": len(values), **_spread(values, "lateness")}


def invocation_figures(messages: Iterable[str]) -> tuple[dict[str, Any], list[float]]:
    """A function's invocations and cold starts from its log lines (Lambda's ``REPORT`` line, with an
    ``Init Duration`` on a cold start), and the ``StartLateness`` values its EMF metric lines carry."""
    invocations, inits, lateness = 0, [], []
    for message in messages:
        if _REPORT.match(message):
            invocations += 1
            found = _INIT.search(message)
            if found:
                inits.append(float(found[1]) / 1000)
        elif message.startswith("{") and '"StartLateness"' in message:
            try:
                values = json.loads(message).get("StartLateness")
            except ValueError:
                continue
            lateness += [float(v) for v in (values if isinstance(values, list) else [values])]
    figures = {
        "invocations": invocations,
        "cold_starts": len(inits),
        "init_max_s": rounded(max(inits)) if inits else None,
    }
    return figures, lateness


# --- the stack -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StackInfo:
    stack: DeployedStack
    created_at: str
    functions: dict[str, list[str]]  # "poller" | "helper" | "worker" | "api" | "prescaler" -> names
    groups: list[str]  # the pollers' partition groups
    poller_run_seconds: list[int]  # what the EventBridge rules ask each poller invocation to run
    how: str = "reused"  # how the bench came by it (deployed_stack)


def function_kind(logical_id: str) -> str:
    for prefix, kind in (
        ("PollersPollerHelper", "helper"),  # the helpers of busy minutes (duetime.scheduling.fan_out)
        ("Pollers", "poller"),
        ("Workers", "worker"),
        ("Api", "api"),
        ("Prescaler", "prescaler"),
    ):
        if logical_id.startswith(prefix):
            return kind
    return "other"


def find_stack(endpoint: str) -> StackInfo | None:
    """The Duetime stack deployed into the LocalStack at ``endpoint``, from CloudFormation (not from an
    outputs file on disk, which may belong to another deploy); None when there is none, or not complete."""
    cloudformation = new_client("cloudformation", endpoint)
    try:
        described = cloudformation.describe_stacks(StackName=STACK)["Stacks"][0]
    except Exception:
        return None
    if described.get("StackStatus") not in ("CREATE_COMPLETE", "UPDATE_COMPLETE"):
        return None
    with tempfile.TemporaryDirectory() as folder:  # the same outputs `cdklocal deploy` writes to a file
        outputs = Path(folder) / "outputs.json"
        outputs.write_text(
            json.dumps({STACK: {o["OutputKey"]: o["OutputValue"] for o in described["Outputs"]}})
        )
        stack = DeployedStack.from_outputs(outputs, endpoint)
    resources = cloudformation.list_stack_resources(StackName=STACK)["StackResourceSummaries"]
    functions: dict[str, list[str]] = defaultdict(list)
    lambdas, events = new_client("lambda", endpoint), new_client("events", endpoint)
    groups, run_seconds = [], []
    for resource in resources:
        kind, name = function_kind(resource["LogicalResourceId"]), resource["PhysicalResourceId"]
        if resource["ResourceType"] == "AWS::Lambda::Function":
            functions[kind].append(name)
            if kind == "poller":
                variables = lambdas.get_function_configuration(FunctionName=name)["Environment"]["Variables"]
                groups.append(variables["DUETIME_PARTITIONS"])
        elif resource["ResourceType"] == "AWS::Events::Rule" and kind == "poller":  # not the prescaler's
            for target in events.list_targets_by_rule(Rule=name)["Targets"]:
                run_seconds.append(json.loads(target.get("Input") or "{}").get("run_seconds"))
    return StackInfo(stack, str(described["CreationTime"]), dict(functions), sorted(groups), run_seconds)


def answers(endpoint: str) -> bool:
    try:
        with urllib.request.urlopen(f"{endpoint}/_localstack/health", timeout=2):
            return True
    except OSError:
        return False


def deploy(port: int) -> None:
    """``make lambda-assets-local`` (as ``make deploy-local`` does: the stack must run this checkout's code,
    not an asset built from older code), then ``scripts/deploy_local.sh --detach`` on ``port``: it reuses a
    LocalStack answering there (replacing a stack it finds) or starts one, and returns once a job can be
    created. Its progress goes to stderr."""
    root = EMULATORS_SCRIPT.parents[1]
    outer_make = ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")  # a bench run from make must not pass its flags on
    build_env = {k: v for k, v in os.environ.items() if k not in outer_make}
    subprocess.run(
        ["make", "--no-print-directory", "-C", str(root), "lambda-assets-local"],
        env=build_env,
        stdout=sys.stderr,
        check=True,
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    env["DUETIME_DEPLOYED_PORT"] = str(port)
    if port != DEFAULT_PORT:  # leave cdk.out-local/ to the stack on the default port
        env["DUETIME_DEPLOYED_OUT"] = str(root / ".cache" / f"cdk.out-local-{port}")
    script = subprocess.Popen(
        [str(DEPLOY_SCRIPT), "--detach"], env=env, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        output, _ = script.communicate(timeout=DEPLOY_SECONDS)
    except subprocess.TimeoutExpired:
        script.terminate()  # its trap stops the LocalStack it started
        script.wait(timeout=120)
        raise RuntimeError(f"deploy_local.sh was not ready in {DEPLOY_SECONDS:.0f} s") from None
    print(output.strip(), file=sys.stderr, flush=True)
    if script.returncode != 0:
        raise RuntimeError(f"deploy_local.sh failed with exit status {script.returncode}")


# --- the run ---------------------------------------------------------------------------------------------


class LeaseSampler:
    """Reads every group's lease every ``every`` s in a thread, stamping each read with the store's clock."""

    def __init__(self, store: DynamoStore, clock: StoreClock, groups: Sequence[str], every: float) -> None:
        self.store, self.clock, self.groups, self.every = store, clock, list(groups), every
        self.samples: list[LeaseSample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="lease-sampler", daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self.every):
            for group in self.groups:
                try:
                    lease = self.store.read_poller_lease(group)
                except Exception:  # a missed sample is a gap in the record, not a failed bench
                    continue
                self.samples.append(LeaseSample(group, self.clock.now(), lease))

    def __enter__(self) -> LeaseSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def create_jobs(
    client: DuetimeClient, target_url: str, dues: Sequence[datetime], tag: str
) -> dict[str, datetime]:
    """Exact one-time jobs through the API, in due order on a few threads; run id -> due second."""

    def create(index: int) -> tuple[str, datetime]:
        at = dues[index]
        body = {
            "name": f"precision {index}",
            "schedule": {"at": iso_z(at)},
            "exact": True,
            "target": {"url": target_url},
            "retry": {"max_attempts": 1},
        }
        for attempt in range(4):
            try:
                job = client.request("POST", "/v1/jobs", body, headers={"Idempotency-Key": f"{tag}-{index}"})
                return make_run_id(job["id"], at), at
            except ApiFailure:  # the API function's cold start or a busy LocalStack: same key, same job
                if attempt == 3:
                    raise
                time.sleep(1 + attempt)
        raise AssertionError("unreachable")

    with ThreadPoolExecutor(CREATE_THREADS) as pool:
        return dict(pool.map(create, range(len(dues))))


def log_messages(
    logs: CloudWatchLogsClient, function: str, since_ms: int, until_ms: int | None = None
) -> list[str]:
    """The function's log lines stored from ``since_ms`` (up to ``until_ms``, if given): every page, up to a
    page that fails. LocalStack stores an invocation's lines when it ends, all stamped with that instant."""
    messages: list[str] = []
    group = f"/aws/lambda/{function}"
    paginator = logs.get_paginator("filter_log_events")
    pages = (
        paginator.paginate(logGroupName=group, startTime=since_ms)
        if until_ms is None
        else paginator.paginate(logGroupName=group, startTime=since_ms, endTime=until_ms)
    )
    try:
        for page in pages:
            messages += [event["message"] for event in page.get("events", [])]
    except Exception:  # no log group yet (the function never ran), or a nextToken answered twice (botocore's
        pass  # PaginationError; LocalStack did so): the lines read so far
    return messages


def _progress(text: str) -> None:
    print(f"bench precision (deployed-local): {text}", file=sys.stderr, flush=True)


def aws_defaults() -> None:
    for name, value in (
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ):
        os.environ.setdefault(name, value)  # LocalStack's, as deploy_local.sh exports them


@contextmanager
def deployed_stack(port: int | None, redeploy: bool, progress: Callable[[str], None]) -> Iterator[StackInfo]:
    """The stack on ``port`` (``DUETIME_DEPLOYED_PORT`` or 4610): the one found there, or one deployed for
    the bench and stopped after it (only then: a LocalStack the bench found running is left running).
    ``info.how`` says which: "reused", "deployed into a running LocalStack" or "started"."""
    aws_defaults()
    port = port or int(os.environ.get("DUETIME_DEPLOYED_PORT") or DEFAULT_PORT)
    endpoint = f"http://127.0.0.1:{port}"
    found = answers(endpoint)
    info = find_stack(endpoint) if found and not redeploy else None
    how = "reused"
    if info is None:
        progress(f"deploying the stack on {endpoint} (scripts/deploy_local.sh --detach)")
        deploy(port)
        how = "deployed into a running LocalStack" if found else "started"
        info = find_stack(endpoint)
        if info is None:
            raise RuntimeError(f"no complete {STACK} stack on {endpoint} after deploying")
    try:
        yield replace(info, how=how)
    finally:
        if how == "started":
            env = {**os.environ, "DUETIME_DEPLOYED_PORT": str(port)}
            subprocess.run([str(EMULATORS_SCRIPT), "stop-deployed"], env=env, check=False)


def run_deployed_precision(
    jobs: int, minutes: float, port: int | None = None, redeploy: bool = False, grace_seconds: float = 180.0
) -> dict[str, Any]:
    with deployed_stack(port, redeploy, _progress) as info:
        target = DemoTargetServer().start()
        try:
            return {**_measure(info, jobs, minutes, target, grace_seconds), "stack": info.how}
        finally:
            target.shutdown()
            target.server_close()


def _measure(
    info: StackInfo, jobs: int, minutes: float, target: DemoTargetServer, grace_seconds: float
) -> dict[str, Any]:
    stack = info.stack
    bench_started_ms = int(time.time() * 1000)
    load = [os.getloadavg()[0]]
    store, clock = _store_and_clock(stack)
    tag = f"bench-{uuid.uuid4().hex[:8]}"
    client = _team_client(stack, tag, jobs)
    seconds = round(minutes * 60)
    ahead = clock.now() + timedelta(seconds=LEAD_SECONDS + jobs * CREATE_SECONDS_PER_JOB)
    start = ahead.replace(second=0, microsecond=0) + timedelta(minutes=1)
    end = start + timedelta(seconds=seconds)
    dues = [start + timedelta(seconds=offset) for offset in due_offsets(jobs, seconds)]
    with LeaseSampler(store, clock, info.groups, LEASE_SAMPLE_SECONDS) as sampler:
        _progress(f"creating {jobs} exact jobs due {iso_z(start)} .. {iso_z(end)} through {stack.api_url}")
        began = time.monotonic()
        planned = create_jobs(client, target.url, dues, tag)
        creation_seconds = time.monotonic() - began
        created_late = _created_after_preload(planned, clock.now())
        _wait_for_calls(target, planned, clock, end + timedelta(seconds=grace_seconds))
        time.sleep(SETTLE_SECONDS)
        load.append(os.getloadavg()[0])
    figures, lateness = lateness_figures(planned, _target_calls(target))

    runs, claim_delays = _runs_and_claim_delays(store, planned)
    groups = {r: group_of(partition_of(r.split("@")[0]), info.groups) for r in planned}
    changes = lease_changes(sampler.samples, start, end, LEASE_SAMPLE_SECONDS)

    functions, worker_lateness = _function_figures(info, bench_started_ms)
    return {
        "jobs": jobs,
        "minutes": minutes,
        **figures,
        "mode": "deployed-local",
        "clock": "target",  # lateness = arrival at the target (this process) - X-Duetime-Scheduled-At
        "store_clock_offset_s": rounded(clock.offset_seconds()),  # the store's clock minus the target's
        "store_clock_uncertainty_s": rounded(clock.uncertainty_seconds()),
        "lateness_max_by_minute_s": max_by_minute(planned, lateness, start),
        **_spread(worker_lateness, "worker_start_lateness"),  # lease - fire time, store clock, floored at 0
        "claimed_in_a_later_second": sum(d >= 1 for d in claim_delays.values()),  # run rows: whole seconds
        "claim_delay_max_s": max(claim_delays.values(), default=None),
        "run_statuses": dict(Counter(run.status.value for run in runs.values() if run)),
        "handovers": len(changes.handovers),
        "takeovers": len(changes.takeovers),
        "free_lease_takes": len(changes.free_takes),
        "lease_terms_unseen": changes.unseen,
        "unheld_group_seconds": changes.unheld_seconds,
        "near_handover": near_handovers(planned, lateness, groups, changes.handovers),
        "functions": functions,  # invocations and cold starts that logged since the bench began
        "latest": _latest(lateness, groups, claim_delays),
        "window": [iso_z(start), iso_z(end)],
        "creation_s": rounded(creation_seconds),
        "load_average_1m": [round(value, 2) for value in load],  # at the start and at the end (2 cores)
        "created_after_preload": created_late,
        "poller_groups": info.groups,
        "poller_run_seconds": sorted(set(info.poller_run_seconds)),
        "stack_created_at": info.created_at,
        "endpoint": stack.endpoint,
    }


def _team_client(stack: DeployedStack, tag: str, jobs: int) -> DuetimeClient:
    """A client of a new team named ``tag`` that may make ``jobs`` exact jobs, once the API takes them."""
    token, _ = team_token(stack, tag, exact_quota=max(1000, jobs))
    wait_until_jobs_can_be_created(stack.api_url, token)
    return DuetimeClient(stack.api_url, token)


def _created_after_preload(planned: Mapping[str, datetime], created_by: datetime) -> int:
    """The jobs created after their minute's preload read its rows (``created_by``: when the last was)."""
    return sum(
        created_by > at.replace(second=0) - timedelta(seconds=PRELOAD_AHEAD_SECONDS)
        for at in planned.values()
    )


def _runs_and_claim_delays(
    store: DynamoStore, planned: Mapping[str, datetime]
) -> tuple[dict[str, Run | None], dict[str, float]]:
    """The planned runs as stored (None: never made), and how long after its time each was claimed."""
    with ThreadPoolExecutor(CREATE_THREADS) as pool:
        runs = dict(zip(planned, pool.map(store.get_run, planned), strict=True))
    claim_delays = {r: (run.created_at - planned[r]).total_seconds() for r, run in runs.items() if run}
    return runs, claim_delays


def _store_and_clock(stack: DeployedStack) -> tuple[DynamoStore, StoreClock]:
    """The stack's store, and a clock on it (refining itself against the store's)."""
    dynamodb = new_client("dynamodb", stack.endpoint)
    store = DynamoStore(dynamodb, TableNames(stack.jobs_table, stack.runs_table, stack.control_table))
    clock = StoreClock(dynamodb, sync=lambda: store.low_water_marks([0]))
    clock.start_refining()
    return store, clock


def _wait_for_calls(
    target: DemoTargetServer, planned: Mapping[str, datetime], clock: StoreClock, deadline: datetime
) -> None:
    """Until every planned run called the target, or ``deadline`` (the store's clock), telling how many."""

    def called() -> int:
        with target.recorder.lock:
            seen = {c.headers.get("x-duetime-run-id") for c in target.recorder.calls}
        return len(seen & planned.keys())

    while clock.now() < deadline and called() < len(planned):
        _progress(f"{called()}/{len(planned)} runs have called the target")
        wait_until(lambda: called() >= len(planned), timeout=30, every=0.5)


def _target_calls(target: DemoTargetServer) -> list[TargetCall]:
    """Every call the target received: its run, its scheduled instant and when it arrived."""
    with target.recorder.lock:
        return [
            TargetCall(
                c.headers.get("x-duetime-run-id", ""),
                c.headers.get("x-duetime-scheduled-at", ""),
                c.received_at,
            )
            for c in target.recorder.calls
        ]


def _function_figures(info: StackInfo, bench_started_ms: int) -> tuple[dict[str, Any], list[float]]:
    """Invocations and cold starts each kind of function logged since the bench began, and the workers'
    start lateness they logged."""
    logs = new_client("logs", info.stack.endpoint)
    functions: dict[str, Any] = {}
    worker_lateness: list[float] = []
    for kind in ("api", "poller", "worker"):
        messages = [
            m for name in info.functions.get(kind, []) for m in log_messages(logs, name, bench_started_ms)
        ]
        functions[kind], values = invocation_figures(messages)
        worker_lateness += values if kind == "worker" else []
    return functions, worker_lateness


def _latest(
    lateness: Mapping[str, float], groups: Mapping[str, str | None], claim_delays: Mapping[str, float]
) -> list[dict[str, Any]]:
    """The five latest runs: how late, their poller group and how long after their time they were claimed."""
    latest = sorted(lateness, key=lateness.__getitem__, reverse=True)[:5]
    return [
        {
            "run_id": r,
            "lateness_s": rounded(lateness[r]),
            "group": groups[r],
            "claim_delay_s": claim_delays.get(r),
        }
        for r in latest
    ]
