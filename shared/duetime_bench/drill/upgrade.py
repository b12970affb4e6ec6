"""``duetime drill upgrade --from <ref>``: an upgrade, a rollback and a roll forward of the stack deployed in
LocalStack, in place, while jobs are due; then the finalize. What it checks is the promise across deploys:
no fire lost, repeats only under a run's own id, and how late runs started while functions were replaced.

1. **old**: the older release (``<ref>``, built from git by its own build: ``release.py``) is deployed as
   stack ``Duetime`` into the deployed-stack LocalStack (a stack found there is destroyed first: the drill
   starts from empty tables), a team is created by that release's own code, and jobs through its API: cron
   every minute (exact, and jittered), a 1-minute rate, one-time jobs spread over the drill, a job whose call
   takes 40 s, and one whose first attempt fails (503) and is retried 20 s later. Their target is an HTTP
   server in this process that records every call with its run id (the idempotency key).
2. **upgrade**, **rollback**, **forward**: just before each deploy the slow and the failing job are
   triggered (a call in flight and a retry pending while functions are replaced) and a one-time job is
   created due 20 s on (due during the deploy); then ``cdklocal deploy`` updates the stack in place to this
   checkout's code, back to the older release, and forward again; each phase then runs for ``dwell`` s.
3. **finalize**: ``duetime system finalize`` on the stack's tables (``finalize``): refused at once (the older
   release's functions may still run), then forced; the deploy check then refuses the older release (a
   rollback past the finalize) and allows this one.
4. After the last phase the drill stops counting fires (the cut-off), waits ``settle`` s for calls in flight
   and retries, reads what its target recorded and the stack's logs, and accounts (``accounting.py``).

Real clocks, real deploys: about 12 minutes with the defaults. The expected fires are computed with
duetime's own schedule rules (``duetime.domain.schedule``) from each job as the API created it.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from duetime.adapters.aws.clients import new_client
from duetime.client import ApiFailure, DuetimeClient
from duetime.domain.ids import make_run_id
from duetime.domain.models import JobSpec
from duetime.domain.schedule import fire_time, first_nominal, next_nominal_after, rate_anchor
from duetime.local.demo_target import DemoTargetServer
from duetime.local.deployed import DeployedStack
from duetime.local.system import EMULATORS_SCRIPT
from duetime_bench.drill import release as releases
from duetime_bench.drill.accounting import ExpectedFire, PhaseWindow, TargetCall, account, target_calls
from duetime_bench.drill.forensics import fire_forensics
from duetime_bench.drill.release import STACK, Deploy, Release

DEFAULT_PORT = 4610
PHASES = ("old", "upgrade", "rollback", "forward", "finalize")
SLOW_SECONDS = 40  # the slow job's call: in flight while the stack updates
RETRY_BACKOFF_SECONDS = 20  # the failing job's retry: pending while the stack updates
ONCE_EVERY_SECONDS = 40  # one-time jobs spread over the drill
DUE_DURING_DEPLOY_SECONDS = 20  # the one-time job created just before a deploy
CLAIM_WAIT_SECONDS = (
    300  # after the settle, how long fires whose jobs still wait for them may take to be claimed
)

Progress = Callable[[str], None]


def _progress(text: str) -> None:
    print(f"drill upgrade: {text}", file=sys.stderr, flush=True)


@dataclass
class DrillJob:
    name: str  # the drill's name for it
    id: str
    body: dict[str, Any]
    created_at: datetime
    first_nominal: datetime | None  # as the API answered, when it says


@dataclass
class Phase:
    name: str
    started: float  # epoch seconds
    deploy: Deploy | None = None
    health: dict[str, Any] = field(default_factory=dict)  # GET /healthz after its deploy
    tables: dict[str, str] = field(default_factory=dict)  # the stack's table names after its deploy
    jobs_listed: int | None = None  # the team's jobs the API lists after the deploy (the tables' data)
    jobs_created: int | None = None  # the jobs the drill had created by then
    triggered: dict[str, str] = field(default_factory=dict)  # drill job -> the run id triggered before
    finalize: dict[str, Any] | None = None
    stage_repaired: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class Drill:
    endpoint: str
    older: Release
    current: Release
    logs: Path
    progress: Progress
    client: DuetimeClient | None = None
    stack: DeployedStack | None = None
    target: DemoTargetServer | None = None
    jobs: list[DrillJob] = field(default_factory=list)
    triggers: list[ExpectedFire] = field(default_factory=list)
    phases: list[Phase] = field(default_factory=list)
    started_ms: int = 0

    # --- the stack ---------------------------------------------------------------------------------------

    def stack_status(self) -> str:
        try:
            described = new_client("cloudformation", self.endpoint).describe_stacks(StackName=STACK)
            return str(described["Stacks"][0].get("StackStatus", "?"))
        except Exception as exc:
            return f"none ({type(exc).__name__})"

    def deploy(self, release: Release, phase: Phase) -> None:
        self.progress(f"{phase.name}: deploying {release.label} in place (cdklocal deploy)")
        done = releases.deploy(
            release, self.endpoint, self.logs / f"deploy-{phase.name}.log", self.stack_status
        )
        phase.deploy = done
        verdict = "done" if done.ok else f"FAILED ({'; '.join(done.failed) or 'see ' + done.log})"
        self.progress(f"{phase.name}: deploy {verdict} in {done.seconds:.1f} s, stack {done.stack_status}")
        outputs = Path(done.log).with_suffix(".outputs.json")
        if done.ok and outputs.exists():
            stack = DeployedStack.from_outputs(outputs, self.endpoint)
            phase.tables = {
                "jobs": stack.jobs_table,
                "runs": stack.runs_table,
                "control": stack.control_table,
            }
            if self.stack is None:
                self.stack = stack
            elif stack.api_url != self.stack.api_url:
                phase.notes.append(f"the API moved: {self.stack.api_url} -> {stack.api_url}")
                self.stack = stack
                if self.client is not None:
                    self.client = DuetimeClient(stack.api_url, self.client.token, timeout=30)
        if done.ok and self.client is not None:
            self.repair_stage(phase)
        self.observe(phase)

    def repair_stage(self, phase: Phase) -> None:
        """Put the API's stage on the deployment the template names, as AWS's CloudFormation would have.

        LocalStack (2026.3) cannot: its Stage provider has no update (NotImplementedError, taken for a
        success), so the stage stays on the API deployment it had, and removing that deployment (it is
        replaced whenever the API's methods change, a new logical id) deletes the stages on it
        (``aws_apigateway_deployment.py``'s delete: "TODO: verify if AWS behaves the same?"; AWS refuses to
        delete a deployment a stage uses). The API then answers 404 "does not correspond to a deployed API"
        until the stage is put back. Reported per phase; the scheduling (pollers, queue, workers) does not
        go through API Gateway."""
        assert self.client is not None
        try:
            self.client.request("GET", "/healthz")
            answered = "answered"
        except ApiFailure as exc:
            answered = f"did not answer ({exc.status})"
        try:
            repaired = put_stage_on_template_deployment(self.endpoint)
        except Exception as exc:
            phase.notes.append(f"checking the API's stage failed: {type(exc).__name__}: {exc}")
            return
        if repaired:
            phase.stage_repaired = repaired
            phase.notes.append(
                f"the API after the deploy {answered}; LocalStack left its stage {repaired['stage']!r} "
                f"{repaired['found']}: the drill {repaired['did']} it on the template's deployment "
                f"{repaired['deployment']} (LocalStack's CloudFormation cannot update an API Gateway stage)"
            )

    def observe(self, phase: Phase) -> None:
        """What answers after a deploy: /healthz (the api function's release and commit) and the team's
        jobs (what the tables kept)."""
        if self.client is None:
            return
        for _ in range(30):
            try:
                phase.health = dict(self.client.request("GET", "/healthz"))
                break
            except ApiFailure as exc:
                phase.health = {"error": str(exc)}
                time.sleep(1)
        try:
            phase.jobs_created = len(self.jobs)
            phase.jobs_listed = len(self.client.request("GET", "/v1/jobs", query={"limit": 100})["jobs"])
        except ApiFailure as exc:
            phase.notes.append(f"listing the jobs failed: {exc}")

    def start_stack(self, release: Release, phase_name: str) -> Phase:
        """The first phase: ``release`` deployed as a new stack (one found there is destroyed first: the drill
        starts from empty tables), a team created by that release's own code, the API's client and the
        target that records every call."""
        if not self.stack_status().startswith("none"):
            self.progress(
                f"destroying the {STACK} stack found on {self.endpoint} (the drill starts from empty tables)"
            )
            try:
                releases.destroy(release, self.endpoint, self.logs / "destroy.log")
            except RuntimeError as exc:
                raise RuntimeError(
                    f"{exc}\nLocalStack could not delete the stack (after a failed update it may keep a "
                    "record of resources it no longer has): restart it, scripts/emulators.sh stop-deployed"
                ) from exc
        releases.bootstrap(release, self.endpoint, self.logs)
        self.started_ms = int(time.time() * 1000)
        first = Phase(phase_name, time.time())
        self.phases.append(first)
        self.deploy(release, first)
        if first.deploy is None or not first.deploy.ok or self.stack is None:
            raise RuntimeError(f"{release.label} did not deploy: {first.deploy}")
        outputs = Path(first.deploy.log).with_suffix(".outputs.json")
        team = releases.team(release, outputs, self.endpoint, f"drill-{uuid.uuid4().hex[:6]}")
        self.client = DuetimeClient(self.stack.api_url, team["token"], timeout=30)
        self.target = DemoTargetServer().start()
        return first

    # --- jobs ---------------------------------------------------------------------------------------------

    def create(self, name: str, schedule: dict[str, Any], query: str = "", **more: Any) -> DrillJob:
        assert self.client is not None and self.target is not None
        body: dict[str, Any] = {
            "name": f"drill {name}",
            "schedule": schedule,
            "target": {"url": f"{self.target.url}?group={name}{query}"},
            "misfire": "run_all",  # every missed time runs: a time with no run is lost, not skipped
            "catchup_window_seconds": 3600,
            **more,
        }
        answer = self.client.request("POST", "/v1/jobs", body)
        nominal = answer.get("next_nominal_at")
        job = DrillJob(
            name,
            answer["id"],
            body,
            instant(answer["created_at"]),
            instant(nominal) if nominal else None,
        )
        self.jobs.append(job)
        return job

    def create_jobs(self, last_due: float) -> None:
        every_minute = {"cron": "* * * * *"}
        self.create("cron-exact", every_minute, exact=True)
        self.create("cron-jittered", every_minute, exact=False, jitter_seconds=30)
        self.create("rate", {"rate": "1 minute"}, exact=True)
        self.create(
            "slow", every_minute, f"&sleep={SLOW_SECONDS}", exact=True, timeout_seconds=SLOW_SECONDS + 15
        )
        self.create(
            "flaky",
            every_minute,
            "&fail_attempt=1",
            exact=True,
            retry={"max_attempts": 3, "backoff_seconds": [RETRY_BACKOFF_SECONDS, RETRY_BACKOFF_SECONDS]},
        )
        due = time.time() + 45
        while due < last_due:
            self.once(due)
            due += ONCE_EVERY_SECONDS

    def once(self, due: float) -> DrillJob:
        at = datetime.fromtimestamp(int(due), UTC).isoformat().replace("+00:00", "Z")
        return self.create("once", {"at": at}, exact=True)

    def before_deploy(self, phase: Phase) -> None:
        """A call in flight, a retry pending and a one-time job due while the stack updates."""
        assert self.client is not None
        try:
            self.once(time.time() + DUE_DURING_DEPLOY_SECONDS)
        except ApiFailure as exc:
            phase.notes.append(f"creating the one-time job due during the deploy failed: {exc}")
        for job in self.jobs:
            if job.name in ("slow", "flaky"):
                at = time.time()
                try:
                    run_id = self.client.request("POST", self.client.job_path(job.id, "trigger"))["run_id"]
                except ApiFailure as exc:
                    phase.notes.append(f"triggering {job.name} failed: {exc}")
                    continue
                phase.triggered[job.name] = run_id
                self.triggers.append(ExpectedFire(run_id, f"{job.name}-triggered", at))
        # the slow call under way before the deploy starts
        time.sleep(3)

    def expected(self, cutoff: float) -> list[ExpectedFire]:
        """Every fire due by ``cutoff``: each job's nominal times from its creation, by duetime's schedule
        rules, plus the triggered runs."""
        fires = list(self.triggers)
        until = datetime.fromtimestamp(cutoff, UTC)
        for job in self.jobs:
            spec = JobSpec.model_validate(job.body)
            anchor = rate_anchor(spec, job.created_at)
            nominal = job.first_nominal or first_nominal(spec, job.created_at, job.created_at)
            while nominal is not None and nominal <= until:
                following = next_nominal_after(spec, anchor, nominal)
                due = fire_time(job.id, spec, nominal, following)
                fires.append(ExpectedFire(make_run_id(job.id, nominal), job.name, due.timestamp()))
                nominal = following
        return fires

    def calls(self) -> list[TargetCall]:
        assert self.target is not None
        recorder = self.target.recorder
        with recorder.lock:
            recorded = list(recorder.calls)
        return target_calls(recorded)

    # --- the run ------------------------------------------------------------------------------------------

    def dwell(self, seconds: float, phase: Phase) -> None:
        self.progress(f"{phase.name}: running for {seconds:.0f} s")
        time.sleep(seconds)

    def run(self, run_id: str) -> dict[str, Any] | None:
        """A run as the API shows it; None: it has none (a fire with no run)."""
        assert self.client is not None
        try:
            return dict(self.client.request("GET", self.client.run_path(run_id)))
        except ApiFailure as exc:
            if exc.status == 404 and "no run" in str(exc):  # duetime's own answer, not API Gateway's 404
                return None
            return {"status": f"unreadable: {exc}"}

    def job_waits(self, run_id: str) -> bool | str:
        """Whether the fire of ``run_id`` has no run because its job still waits for it (no poller has
        claimed it yet: pollers slow or stopped), as opposed to a schedule that moved past it (lost); the
        API's failure as text when the job could not be read."""
        assert self.client is not None
        job_id, _, nominal = run_id.partition("@")
        try:
            job = self.client.request("GET", self.client.job_path(job_id))
        except ApiFailure as exc:
            return f"its job could not be read: {exc}"
        waiting_for = job.get("next_nominal_at")
        return bool(waiting_for) and instant(waiting_for) <= instant(nominal)

    def still_due(self, run_id: str) -> bool:
        return self.job_waits(run_id) is True

    def await_claims(self, lost: list[str], most: float) -> float:
        """Fires with no run whose job still waits for them: wait until each has a run (a poller claimed it
        late) that a worker started, at most ``most`` s; the seconds waited."""
        waiting = [run for run in lost if self.run(run) is None and self.still_due(run)]
        if not waiting:
            return 0.0
        self.progress(
            f"{len(waiting)} fires not claimed yet (their jobs still wait): waiting for their claims"
        )
        started = time.monotonic()
        while waiting and time.monotonic() - started < most:
            time.sleep(5)
            waiting = [run for run in waiting if not (self.run(run) or {}).get("started_at")]
        return time.monotonic() - started

    def run_status(self, run_id: str) -> str:
        run = self.run(run_id)
        if run is None:
            waits = self.job_waits(run_id)
            if waits is True:
                return "no run: not claimed yet (its job still waits for this time)"
            if waits is False:
                return "no run: the schedule moved past this time"
            return f"no run as the API says; {waits}"
        keys = ("created_at", "queue_deadline", "started_at", "finished_at")
        times = ", ".join(f"{k} {run[k]}" for k in keys if run.get(k))
        return f"{run.get('status')} (attempt {run.get('attempt')}; {times})"

    def await_redelivery(self, lost: list[str], most: float) -> float:
        """Lost fires whose run is queued with no message (a poller stopped between its claim and its send):
        wait until their queue deadline has passed (the re-send), at most ``most`` s; the seconds waited."""
        deadlines = []
        for run_id in lost:
            run = self.run(run_id)
            if run and run.get("status") == "queued" and run.get("queue_deadline"):
                deadlines.append(instant(run["queue_deadline"]).timestamp())
        if not deadlines:
            return 0.0
        wait = max(0.0, min(max(deadlines) + 45 - time.time(), most))
        self.progress(
            f"{len(deadlines)} of the {len(lost)} fires with no call have a queued run: waiting {wait:.0f} s "
            "for their queue deadline (the run is sent again then)"
        )
        time.sleep(wait)
        return wait

    def statuses(self) -> dict[str, int]:
        """The runs' statuses the API lists, over the drill's jobs."""
        assert self.client is not None
        counted: Counter[str] = Counter()
        for job in self.jobs:
            try:
                page = self.client.request("GET", self.client.job_path(job.id, "runs"), query={"limit": 100})
            except ApiFailure:
                counted["unlisted"] += 1
                continue
            counted.update(run["status"] for run in page["runs"])
        return dict(sorted(counted.items()))

    def cleanup(self) -> None:
        if self.client is None:
            return
        for job in self.jobs:
            with contextlib.suppress(ApiFailure):
                self.client.request("DELETE", self.client.job_path(job.id))


# A stage's method settings in CloudFormation -> its patch path's tail (UpdateStage)
_METHOD_SETTINGS = {
    "ThrottlingBurstLimit": "throttling/burstLimit",
    "ThrottlingRateLimit": "throttling/rateLimit",
    "MetricsEnabled": "metrics/enabled",
    "LoggingLevel": "logging/loglevel",
    "DataTraceEnabled": "logging/dataTrace",
    "CachingEnabled": "caching/enabled",
}


def put_stage_on_template_deployment(endpoint: str) -> dict[str, Any] | None:
    """If the stack's API stage is missing or on another deployment than the template's: create it (with the
    template's settings) or move it; what was found and done. None: it was as the template says."""
    import boto3

    cloudformation = new_client("cloudformation", endpoint)
    resources = cloudformation.describe_stack_resources(StackName=STACK)["StackResources"]

    def one(kind: str) -> Any:
        (found,) = [r for r in resources if r["ResourceType"] == kind]
        return found

    api_id = one("AWS::ApiGateway::RestApi")["PhysicalResourceId"]
    deployment = one("AWS::ApiGateway::Deployment")["PhysicalResourceId"]
    stage_resource = one("AWS::ApiGateway::Stage")
    name = stage_resource["PhysicalResourceId"]
    apigateway: Any = boto3.session.Session().client("apigateway", endpoint_url=endpoint)
    stages = {s["stageName"]: s for s in apigateway.get_stages(restApiId=api_id)["item"]}
    stage = stages.get(name)
    if stage is not None and stage.get("deploymentId") == deployment:
        return None
    if stage is not None:
        apigateway.update_stage(
            restApiId=api_id,
            stageName=name,
            patchOperations=[{"op": "replace", "path": "/deploymentId", "value": deployment}],
        )
        return {
            "stage": name,
            "found": f"on deployment {stage.get('deploymentId')}",
            "did": "moved",
            "deployment": deployment,
        }
    body = cloudformation.get_template(StackName=STACK)["TemplateBody"]
    template = json.loads(body) if isinstance(body, str) else body
    properties = template["Resources"][stage_resource["LogicalResourceId"]].get("Properties", {})
    variables = {k: v for k, v in (properties.get("Variables") or {}).items() if isinstance(v, str)}
    apigateway.create_stage(
        restApiId=api_id,
        stageName=name,
        deploymentId=deployment,
        description=str(properties.get("Description", "")),
        tracingEnabled=bool(properties.get("TracingEnabled", False)),
        variables=variables,
    )
    patches = []
    for setting in properties.get("MethodSettings") or []:
        path = setting.get("ResourcePath", "/*").replace("/", "~1")
        prefix = f"/{path}/{setting.get('HttpMethod', '*')}"
        patches += [
            {
                "op": "replace",
                "path": f"{prefix}/{tail}",
                "value": str(setting[key]).lower() if isinstance(setting[key], bool) else str(setting[key]),
            }
            for key, tail in _METHOD_SETTINGS.items()
            if key in setting
        ]
    if patches:
        apigateway.update_stage(restApiId=api_id, stageName=name, patchOperations=patches)
    return {
        "stage": name,
        "found": "deleted",
        "did": "re-created (with its method settings)",
        "deployment": deployment,
    }


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def finalize(stack: DeployedStack, older: Release) -> dict[str, Any]:
    """The finalize, as the operator runs it (``duetime system finalize``, on the stack's tables): asked at
    once it is refused (the older release's functions may still run: the drain), so it is forced, as after
    a deploy whose old functions are known to have ended. Then the deploy check says whether the older
    release may come back (it may not, once finalized) and this one may (it may)."""
    from duetime import build_info
    from duetime.adapters.dynamodb.installation import DynamoInstallation
    from duetime.adapters.dynamodb.tables import TableNames
    from duetime.upgrades import operations

    names = TableNames(stack.jobs_table, stack.runs_table, stack.control_table)
    record = DynamoInstallation(new_client("dynamodb", stack.endpoint), names)
    now = datetime.now(UTC)
    before = operations.describe(record.read_installation(), build_info.version, now)
    waited = operations.finalize(record, build_info.version, now)
    forced = operations.finalize(record, build_info.version, now, force=True) if not waited.done else waited
    older_version = release_version(older)
    return {
        "available": True,
        "ok": forced.done,
        "answer": (
            f"finalized at format {forced.stored_format}"
            + (" (forced: " + (waited.refusal or "") + ")" if not waited.done else "")
        ),
        "before": before,
        "refused_unforced": waited.refusal,
        "writes_format": forced.stored_format,
        "rollback_to_older": {
            "release": older_version,
            "refusal": operations.deploy_check(record, older_version),
        },
        "this_release_again": operations.deploy_check(record, build_info.version),
        "releases_seen": [r["release"] for r in before["releases"]],
    }


def release_version(release: Release) -> str:
    """The version a release's source declares (``duetime.__version__``)."""
    text = (release.source / "shared" / "duetime" / "__init__.py").read_text(encoding="utf-8")
    for line in text.splitlines():
        if line.startswith("__version__"):
            return line.split("=", 1)[1].strip().strip("\"'")
    return "unknown"


def function_logs(endpoint: str, since_ms: int, kept: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """From the functions' CloudWatch logs since the drill began: unreadable rows reported by the pollers
    (their warning lines and the ``UnreadableRows`` metric in their EMF lines), and error lines per kind of
    function. LocalStack keeps no metrics from EMF lines; the CloudWatch metric is read too, in case.
    ``kept``: filled with each function's lines, by function name."""
    from duetime_bench.deployed import log_messages

    lambda_, logs = new_client("lambda", endpoint), new_client("logs", endpoint)
    warnings = emf = read = 0
    errors: Counter[str] = Counter()
    for page in lambda_.get_paginator("list_functions").paginate():
        for function in page["Functions"]:
            kind = function.get("Handler", "?").split("/")[1] if "/" in function.get("Handler", "") else "?"
            if function.get("Handler", "").endswith("helper.handler"):
                kind = "poller-helper"
            lines = log_messages(logs, function["FunctionName"], since_ms)
            if kept is not None:
                kept[function["FunctionName"]] = lines
            read += len(lines)
            for line in lines:
                if "unreadable job row" in line:
                    warnings += 1
                if '"UnreadableRows"' in line:
                    with contextlib.suppress(ValueError, TypeError, AttributeError):
                        emf += int(json.loads(line).get("UnreadableRows", 0))
                if (
                    '"level":"ERROR"' in line.replace(" ", "")
                    or line.startswith("Traceback")
                    or "[ERROR]" in line
                ):
                    errors[kind] += 1
    return {
        "unreadable_rows_logged": warnings,
        "unreadable_rows_emf": emf,
        "unreadable_rows_metric": unreadable_metric(endpoint, since_ms),
        "error_lines": dict(sorted(errors.items())),
        "log_lines_read": read,
    }


def unreadable_metric(endpoint: str, since_ms: int) -> float | None:
    """The sum of CloudWatch's ``UnreadableRows`` (namespace duetime) since the drill began; None: no data."""
    import boto3

    cloudwatch: Any = boto3.session.Session().client("cloudwatch", endpoint_url=endpoint)
    total, found = 0.0, False
    try:
        metrics = cloudwatch.list_metrics(Namespace="duetime", MetricName="UnreadableRows")["Metrics"]
        for metric in metrics:
            stats = cloudwatch.get_metric_statistics(
                Namespace="duetime",
                MetricName="UnreadableRows",
                Dimensions=metric.get("Dimensions", []),
                StartTime=datetime.fromtimestamp(since_ms / 1000, UTC),
                EndTime=datetime.now(UTC) + timedelta(minutes=1),
                Period=60,
                Statistics=["Sum"],
            )
            for point in stats.get("Datapoints", []):
                total += float(point["Sum"])
                found = True
    except Exception:
        return None
    return total if found else None


def answers(endpoint: str) -> bool:
    from duetime_bench.deployed import answers as answering

    return answering(endpoint)


def drill_place(port: int | None, name: str = "") -> tuple[int, str, Path, Path]:
    """Where a drill on the deployed-stack LocalStack runs: its port (``DUETIME_DEPLOYED_PORT`` or 4610),
    LocalStack's endpoint, the drills' work folder and this run's folder (``<name><UTC time>``, made). The
    AWS credentials LocalStack takes are set unless some are."""
    for variable, value in (("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test")):
        os.environ.setdefault(variable, value)
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    port = port or int(os.environ.get("DUETIME_DEPLOYED_PORT") or DEFAULT_PORT)
    work = releases.ROOT / ".cache" / "drill"
    logs = work / "runs" / f"{name}{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}"
    logs.mkdir(parents=True, exist_ok=True)
    return port, f"http://127.0.0.1:{port}", work, logs


def run_upgrade_drill(
    from_ref: str,
    port: int | None = None,
    dwell: float = 75.0,
    old_seconds: float = 100.0,
    settle: float = 100.0,
    redelivery: float = 720.0,
    progress: Progress = _progress,
) -> dict[str, Any]:
    """The drill from ``from_ref`` to this checkout: its report (``report`` for people). ``redelivery``: how
    long to wait at most, after ``settle``, for the queue deadline of fires claimed, never sent (0: not)."""
    port, endpoint, work, logs = drill_place(port)
    older = releases.older_release(from_ref, work, progress)
    current = releases.current_release(work, progress)
    started_here = not answers(endpoint)
    if started_here:
        progress(f"starting the deployed-stack LocalStack on {endpoint}")
        env = {**os.environ, "DUETIME_DEPLOYED_PORT": str(port)}
        subprocess.run([str(EMULATORS_SCRIPT), "start-deployed"], env=env, check=True)
    drill = Drill(endpoint, older, current, logs, progress)
    try:
        return _run(drill, dwell, old_seconds, settle, redelivery)
    finally:
        if drill.target is not None:
            drill.target.shutdown()
            drill.target.server_close()
        if started_here:
            env = {**os.environ, "DUETIME_DEPLOYED_PORT": str(port)}
            subprocess.run([str(EMULATORS_SCRIPT), "stop-deployed"], env=env, check=False)


def _run(drill: Drill, dwell: float, old_seconds: float, settle: float, redelivery: float) -> dict[str, Any]:
    progress, older, current = drill.progress, drill.older, drill.current
    old = drill.start_stack(older, "old")
    assert drill.target is not None and drill.stack is not None
    drill.observe(old)
    # one-time jobs over the whole drill: the old phase, three deploys with their dwells, the finalize
    expected_end = time.time() + old_seconds + 3 * (dwell + 60) + dwell
    drill.create_jobs(expected_end)
    progress(f"{len(drill.jobs)} jobs created through {older.label}'s API; target {drill.target.url}")
    old.started = min(old.started, time.time())
    drill.dwell(old_seconds, old)
    for name, release in (("upgrade", current), ("rollback", older), ("forward", current)):
        phase = Phase(name, time.time())
        drill.phases.append(phase)
        drill.before_deploy(phase)
        drill.deploy(release, phase)
        drill.dwell(dwell, phase)
    final = Phase("finalize", time.time())
    drill.phases.append(final)
    final.finalize = finalize(drill.stack, older)
    progress(f"finalize: {final.finalize['answer']}")
    drill.dwell(dwell, final)
    cutoff = time.time()
    progress(f"cut-off; waiting {settle:.0f} s for calls in flight and retries")
    time.sleep(settle)
    expected = drill.expected(cutoff)
    windows = [
        PhaseWindow(p.name, p.started, nxt.started if nxt else float("inf"))
        for p, nxt in zip(drill.phases, [*drill.phases[1:], None], strict=True)
    ]
    figures = account(expected, drill.calls(), windows, cutoff)
    lost_at_settle = figures["overall"]["lost_runs"]
    # A loaded host can leave a poller group minutes behind: a fire its job still waits for is late, not lost.
    waited_for_claims = drill.await_claims(lost_at_settle, CLAIM_WAIT_SECONDS) if lost_at_settle else 0.0
    waited = drill.await_redelivery(lost_at_settle, redelivery) if lost_at_settle and redelivery else 0.0
    calls = drill.calls()
    figures = account(expected, calls, windows, cutoff)
    figures["lost_at_settle"] = lost_at_settle
    figures["waited_for_redelivery_s"] = round(waited)
    figures["waited_for_claims_s"] = round(waited_for_claims)
    figures["lost_detail"] = {run: drill.run_status(run) for run in figures["overall"]["lost_runs"]}
    figures["repeated_detail"] = {
        run: [
            f"attempt {c.attempt} at {iso(c.received_at)} answered {c.status or 'nothing'}"
            + (" (replayed)" if c.replayed else "")
            for c in sorted(calls, key=lambda c: c.received_at)
            if c.run_id == run
        ]
        for run in figures["overall"]["repeated_runs"]
    }
    statuses = drill.statuses()
    lines: dict[str, list[str]] = {}
    found = function_logs(drill.endpoint, drill.started_ms, lines)
    tables = drill.phases[-1].tables or drill.phases[0].tables
    figures["lost_forensics"] = {
        run: fire_forensics(drill.endpoint, tables, run, lines) for run in figures["overall"]["lost_runs"]
    }
    drill.cleanup()
    result = _report(drill, figures, statuses, found, cutoff)
    (drill.logs / "result.json").write_text(json.dumps(result, indent=1, default=str))
    return result


def _report(
    drill: Drill, figures: dict[str, Any], statuses: dict[str, int], found: dict[str, Any], cutoff: float
) -> dict[str, Any]:
    overall = figures["overall"]
    first_tables = drill.phases[0].tables
    phases = []
    for phase in drill.phases:
        phases.append(
            {
                "phase": phase.name,
                "started": datetime.fromtimestamp(phase.started, UTC).isoformat(timespec="seconds"),
                "deploy": phase.deploy.as_dict() if phase.deploy else None,
                "release_answering": phase.health,
                "tables_kept": (phase.tables == first_tables) if phase.tables else None,
                "jobs_listed": phase.jobs_listed,
                "jobs_created": phase.jobs_created,
                "triggered": phase.triggered,
                "finalize": phase.finalize,
                "stage_repaired": phase.stage_repaired,
                "notes": phase.notes,
                **figures["phases"][phase.name],
            }
        )
    deploys = {p.name: round(p.deploy.seconds, 1) for p in drill.phases if p.deploy}
    return {
        "from": drill.older.ref,
        "from_release": drill.older.label,
        "to_release": drill.current.label,
        "jobs": Counter(j.name for j in drill.jobs),
        "cutoff": datetime.fromtimestamp(cutoff, UTC).isoformat(timespec="seconds"),
        "lost": overall["lost"],
        "lost_runs": overall["lost_runs"],
        "lost_detail": figures["lost_detail"],
        "lost_forensics": figures["lost_forensics"],
        "lost_at_settle": len(figures["lost_at_settle"]),
        "waited_for_redelivery_s": figures["waited_for_redelivery_s"],
        "waited_for_claims_s": figures["waited_for_claims_s"],
        "repeated": overall["repeated"],
        "repeated_runs": overall["repeated_runs"],
        "repeated_detail": figures["repeated_detail"],
        "late_max_s": overall["late_max_s"],
        "late_p50_s": overall["late_p50_s"],
        "latest": overall["latest"],
        "fires_due": overall["due"],
        "calls": overall["calls"],
        "unreadable_rows": found["unreadable_rows_logged"] + found["unreadable_rows_emf"],
        "unreadable_rows_detail": found,
        "deploy_seconds": deploys,
        "deploys_failed": [p.name for p in drill.phases if p.deploy and not p.deploy.ok],
        "in_place": all(p.deploy.ok for p in drill.phases if p.deploy),
        "stages_repaired_by_drill": [p.name for p in drill.phases if p.stage_repaired],
        # the same tables after every deploy, holding every job created before it
        "tables_kept": all(p.tables == first_tables for p in drill.phases if p.tables)
        and all(p.jobs_listed == p.jobs_created for p in drill.phases if p.jobs_listed is not None),
        "run_statuses": statuses,
        "phases": phases,
        "logs": str(drill.logs),
    }


def report(result: dict[str, Any]) -> str:
    """The drill's report for people."""
    lines = [
        f"upgrade drill: {result['from_release']} -> {result['to_release']} -> back -> forward -> finalize",
        "",
        f"{'phase':10} {'deploy':>9} {'ok':>3} {'answering':24} {'due':>4} {'called':>6} {'lost':>4} "
        f"{'repeat':>6} {'late max':>8}",
    ]
    for phase in result["phases"]:
        deploy = phase["deploy"]
        health = phase["release_answering"]
        answering = f"{health.get('version', '?')} {health.get('commit', '')}".strip() if health else "-"
        if phase["phase"] == "finalize":
            answering = "(as forward)"
        late = "-" if phase["late_max_s"] is None else f"{phase['late_max_s']:.1f} s"
        took = f"{deploy['seconds']} s" if deploy else "-"
        ok = ("yes" if deploy["ok"] else "NO") if deploy else "-"
        lines.append(
            f"{phase['phase']:10} {took:>9} {ok:>3} {answering[:24]:24} {phase['due']:>4} "
            f"{phase['called']:>6} {phase['lost']:>4} {phase['repeated']:>6} {late:>8}"
        )
        for failed in (deploy or {}).get("failed", []):
            lines.append(f"{'':14}failed: {failed}")
        if phase["finalize"]:
            lines.append(f"{'':14}finalize: {phase['finalize']['answer']}")
        for note in phase["notes"]:
            lines.append(f"{'':14}{note}")
    lines += [
        "",
        f"fires due {result['fires_due']}, target calls {result['calls']}",
        f"lost {result['lost']} (no call by the end; {result['lost_at_settle']} at the settle, then "
        f"{result['waited_for_redelivery_s']} s waited for queue deadlines)",
        *(f"  {run}: {detail}" for run, detail in result["lost_detail"].items()),
        f"repeated {result['repeated']} (called again after a success, or an attempt called twice)",
        *(f"  {run}: {'; '.join(calls)}" for run, calls in result["repeated_detail"].items()),
        f"late max {result['late_max_s']} s (median {result['late_p50_s']} s); latest: "
        + ", ".join(f"{x['job']} {x['late_s']} s" for x in result["latest"]),
        f"unreadable rows {result['unreadable_rows']} ({result['unreadable_rows_detail']})",
        f"deploy seconds {result['deploy_seconds']}; in place: {'yes' if result['in_place'] else 'NO'}; "
        f"tables kept: {'yes' if result['tables_kept'] else 'NO'}; API stage put back by the drill after: "
        f"{', '.join(result['stages_repaired_by_drill']) or 'none'}",
        f"run statuses {result['run_statuses']}",
        f"logs in {result['logs']}",
    ]
    return "\n".join(lines)
