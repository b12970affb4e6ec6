"""One release of duetime, driven from outside, for the version-skew tests (``test_version_skew.py``).

Run as a script with a release's ``shared`` folder first on ``PYTHONPATH`` (the release before, extracted
from its git tag), it serves commands: one JSON object a line on stdin, ``{"command": ..., "args": {...}}``,
one answer a line on stdout, ``{"ok": ...}`` or ``{"error": ..., "traceback": ...}``. Imported by the tests,
the same commands run in-process on the current release, so both directions run the same steps, and only
what the two releases share (the store adapters, the poller, the worker, ``JobService``) is used here.

Every command names the tables and queue it works on (``tables``: jobs, runs, control, queue URL) and takes
its instants as ISO text; a poller's ``now`` is injected (a ``ManualClock``), a worker's clock is the store's
(leases are compared by DynamoDB, as deployed).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import traceback
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import duetime
from duetime.adapters.aws.alerts import StoredAlerts
from duetime.adapters.aws.clients import new_client
from duetime.adapters.aws.sqs import SqsRunQueue
from duetime.adapters.aws.store_clock import StoreClock
from duetime.adapters.dynamodb.catalog import DynamoCatalog
from duetime.adapters.dynamodb.codec import item_to_job, item_to_run
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.dynamodb.tables import TableNames
from duetime.adapters.http_target import HttpTargetCaller
from duetime.api.service import JobService
from duetime.domain.calendars import Calendar
from duetime.domain.clock import ManualClock
from duetime.domain.ids import PARTITIONS, partition_of
from duetime.domain.models import Run, RunResult, RunStatus, Team
from duetime.domain.timeutil import minute_bucket
from duetime.domain.tokens import TokenIn
from duetime.execution.worker import Worker, WorkerConfig, WorkReport
from duetime.ports import RunMessage
from duetime.scheduling.poller import Poller, PollerConfig
from duetime.wiring import run_budget

try:  # the run message's body is a port's since the ports became a package
    from duetime.ports.queue import decode
except ImportError:  # 0.2.0 and before: the SQS adapter's
    from duetime.adapters.aws.sqs import decode

TEAM = "skew"  # the team write_everything creates


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


class Side:
    """One release's parts on one set of tables and one queue."""

    def __init__(self, jobs: str, runs: str, control: str, queue_url: str) -> None:
        self.names = TableNames(jobs, runs, control)
        self.queue_url = queue_url
        self.dynamodb = new_client("dynamodb")
        self.sqs = new_client("sqs")
        self.store = DynamoStore(self.dynamodb, self.names, lease_check=timedelta(seconds=2))
        self.clock = StoreClock(self.dynamodb, sync=lambda: self.store.low_water_marks([0]))
        self.queue = SqsRunQueue(self.sqs, queue_url)
        self.alerts = StoredAlerts(self.store)
        self.catalog = DynamoCatalog(self.dynamodb, self.names)
        self.workers: dict[str, Worker] = {}
        self.leased: dict[tuple[str, str], Run] = {}  # (run id, owner) -> the run as its owner leased it

    def poller(self, now: datetime) -> Poller:
        return Poller(
            self.store,
            self.store,
            self.queue,
            self.alerts,
            ManualClock(now),
            PollerConfig(partitions=list(range(PARTITIONS)), preload_lead=None),
            self.store,
            deadlines=self.store,
            calendars=self.catalog,
        )

    def worker(self, owner: str, lease_seconds: float = 10.0) -> Worker:
        if owner not in self.workers:
            config = WorkerConfig(
                lease=timedelta(seconds=lease_seconds),
                heartbeat=timedelta(seconds=lease_seconds / 4),
                queue_deadline=timedelta(seconds=30),
                defer_seconds=1,
            )
            caller = HttpTargetCaller(allow_private=True)
            self.workers[owner] = Worker(
                self.store,
                self.store,
                self.queue,
                self.alerts,
                caller,
                self.clock,
                config,
                owner,
                deadlines=self.store,
            )
        return self.workers[owner]

    def service(self, now: datetime) -> JobService:
        """The API's logic as the wiring builds it, its clock fixed at ``now``, private targets allowed (as
        ``duetime local`` allows them)."""
        return JobService(
            self.catalog,
            self.store,
            self.queue,
            ManualClock(now),
            allow_private_targets=True,
            aws_targets_without_role=True,
            run_budget=run_budget(self.catalog),
        )


_SIDES: dict[tuple[str, str, str, str], Side] = {}


def side(tables: list[str]) -> Side:
    key = (tables[0], tables[1], tables[2], tables[3])
    if key not in _SIDES:
        _SIDES[key] = Side(*key)
    return _SIDES[key]


def _run_json(run: Run | None) -> Any:
    return None if run is None else json.loads(run.model_dump_json())


# --- the commands ---------------------------------------------------------------------------------------


def where() -> dict[str, Any]:
    """Which duetime this is: its folder and version."""
    return {"file": duetime.__file__, "version": getattr(duetime, "__version__", None)}


def write_in_format(tables: list[str], stored_format: int) -> int:
    """Write every item and message in ``stored_format`` from now on (as an installation finalized at it
    does): for a release with stored formats only; the one before them has no such choice and refuses."""
    s = side(tables)
    parts: list[Any] = [s.store, s.catalog, s.queue]
    for part in parts:
        if not hasattr(part, "write_format"):
            raise TypeError(f"{type(part).__name__} of this release writes no stored format")
        part.write_format = lambda: stored_format
    return stored_format


def create_job(tables: list[str], team_id: str, body: dict[str, Any], now: str) -> str:
    """The job ``POST /v1/jobs`` creates for the team at ``now``: its id."""
    s = side(tables)
    team = s.store.get_team(team_id)
    assert team is not None, f"no team {team_id}"
    return s.service(instant(now)).create_job(team, body).id


def sweep(tables: list[str], now: str) -> dict[str, Any]:
    """One sweep of every partition at ``now``: the claim report, and the ids of the runs it created."""
    report = side(tables).poller(instant(now)).claim(instant(now))
    counts = {f.name: getattr(report, f.name) for f in dataclasses.fields(report) if f.name != "runs"}
    return {**counts, "run_ids": [run.run_id for run in report.runs]}


def recover(tables: list[str], now: str) -> dict[str, Any]:
    """One reap pass at ``now``."""
    report = side(tables).poller(instant(now)).recover()
    return {
        "leases_expired": report.leases_expired,
        "dead": report.dead,
        "messages_resent": report.messages_resent,
    }


def work(
    tables: list[str], bodies: list[str], owner: str, lease_seconds: float = 10.0
) -> list[dict[str, Any]]:
    """Work one batch of queue message bodies as the event source mapping hands them to a worker: per body, in
    order, its outcome, or the error that stops it (that message comes back)."""
    answers: list[dict[str, Any] | None] = []
    messages: list[RunMessage] = []
    for body in bodies:
        try:
            messages.append(decode(body))
            answers.append(None)
        except Exception as error:
            answers.append({"error": f"decode: {type(error).__name__}: {error}"})
    outcomes = (
        iter(side(tables).worker(owner, lease_seconds).process_batch(messages)) if messages else iter([])
    )
    result: list[dict[str, Any]] = []
    for answer in answers:
        if answer is not None:
            result.append(answer)
            continue
        outcome = next(outcomes)
        if isinstance(outcome, WorkReport):
            result.append(
                {"outcome": outcome.outcome.value, "run_id": outcome.run_id, "attempt": outcome.attempt}
            )
        else:
            result.append({"error": f"{type(outcome).__name__}: {outcome}"})
    return result


def lease(tables: list[str], run_id: str, attempt: int, owner: str, now: str, lease_until: str) -> Any:
    """Take a run's lease as ``owner`` (a worker's first step); the leased run, kept for ``record``."""
    s = side(tables)
    run = s.store.acquire_lease(run_id, attempt, owner, instant(now), instant(lease_until))
    if run is not None:
        s.leased[(run_id, owner)] = run
    return _run_json(run)


def extend(tables: list[str], run_id: str, attempt: int, owner: str, now: str, lease_until: str) -> bool:
    """A heartbeat of ``owner``'s lease of ``attempt``."""
    return side(tables).store.extend_lease(run_id, attempt, owner, instant(now), instant(lease_until))


def record(tables: list[str], run_id: str, owner: str, status: str, status_code: int, now: str) -> bool:
    """Record a result for the run ``owner`` leased (as it holds it in memory): whether the store took it."""
    s = side(tables)
    run = s.leased[(run_id, owner)]
    result = RunResult(status_code=status_code, duration_ms=5)
    return s.store.record_result(run, owner, RunStatus(status), result, instant(now))


def get_run(tables: list[str], run_id: str) -> Any:
    return _run_json(side(tables).store.get_run(run_id))


def write_everything(tables: list[str], target_url: str, flaky_url: str, now: str) -> dict[str, Any]:
    """Every family of item this release writes, through its API's logic as of ``now`` minus 90 s: a team,
    tokens, calendars (dates and holidays), jobs of every schedule kind (cron with an exclusion calendar,
    rate, one-time, jittered, business day, exact, keyed, an AWS target, with headers, labels and a
    notification), an edit, a pause, triggers (one with a body of its own, one cancelled); then a sweep at
    ``now`` (the rate job's run) with its queue messages. The cron and rate jobs call ``flaky_url``, the
    others ``target_url``. The ids written, by family."""
    s = side(tables)
    start = instant(now) - timedelta(seconds=90)
    service = s.service(start)
    team, token = service.create_team(TEAM, max_concurrency=10, exact_quota=5)
    caller = service.authenticate(f"Bearer {token}")
    _, read_token = service.issue_token_for(
        caller, TokenIn.model_validate({"name": "ci-read", "scope": "read"})
    )
    closed = (start.date() + timedelta(days=20)).isoformat()
    service.calendars.create(TEAM, {"name": "closed", "source": {"dates": [closed]}}, actor="skew")
    service.calendars.create(
        TEAM,
        {"name": "fr", "source": {"holidays": {"country": "FR"}}, "description": "French holidays"},
        "skew",
    )
    target = {"url": target_url}
    bodies: dict[str, dict[str, Any]] = {
        "cron": {
            "schedule": {"cron": "*/5 * * * *", "timezone": "Europe/Berlin"},
            "exclude": {"calendars": ["closed"]},
            "target": {"url": flaky_url, "method": "PUT", "headers": {"X-Key": "s3cret"}, "body": '{"a": 1}'},
            "labels": {"env": "skew"},
            "retry": {"max_attempts": 3, "backoff_seconds": [1, 2]},
            "notify": [{"type": "webhook", "url": target_url, "events": ["dead"]}],
        },
        "rate": {
            "schedule": {"rate": "1 minute"},
            "jitter_seconds": 0,
            "target": {"url": flaky_url},
            "retry": {"max_attempts": 2, "backoff_seconds": [1]},
        },
        "once": {"schedule": {"at": (start + timedelta(hours=1)).isoformat()}, "target": target},
        "jittered": {
            "schedule": {"cron": "* * * * *", "timezone": "UTC"},
            "jitter_seconds": 30,
            "target": target,
        },
        "business_day": {
            "schedule": {"business_day": -1, "at": "17:00", "timezone": "Europe/Paris", "calendars": ["fr"]},
            "target": target,
        },
        "exact": {
            "schedule": {"rate": "2 hours"},
            "exact": True,
            "target": target,
            "success_deadline_seconds": 600,
        },
        "aws": {
            "schedule": {"rate": "5 minutes"},
            "target": {"type": "sqs", "queue_url": s.queue_url, "message": "ping"},
        },
    }
    jobs = {kind: service.create_job(team, {"name": f"skew {kind}", **body}) for kind, body in bodies.items()}
    keyed, _ = service.put_job_by_key(
        team, "skew/keyed", {"name": "keyed", "schedule": {"rate": "1 hour"}, "target": target}
    )
    service.update_job(
        team, jobs["cron"].id, {"name": "skew cron renamed", "labels": {"env": "skew", "tier": "2"}}
    )
    service.update_job(team, jobs["once"].id, {"paused": True})
    triggered = service.trigger(team, jobs["jittered"].id)
    own_body = service.trigger(team, jobs["cron"].id, {"body": '{"replay": true}'})
    cancelled = service.trigger(team, jobs["exact"].id)
    service.cancel_run(team, cancelled.run_id)
    swept = sweep(tables, now)
    return {
        "team": TEAM,
        "jobs": {kind: job.id for kind, job in {**jobs, "keyed": keyed}.items()},
        "runs": [triggered.run_id, own_body.run_id, cancelled.run_id, *swept["run_ids"]],
        "calendars": ["closed", "fr"],
        "tokens": [token, read_token],
    }


def read_everything(
    tables: list[str], bodies: list[str], team_id: str = TEAM, tokens: list[str] | None = None
) -> dict[str, Any]:
    """Read every item of the three tables and every message body given, as this release reads them: each job
    and run item with its codec, each team and calendar item's JSON with its model, and the team's jobs, runs,
    calendars (and their users), tokens (and ``tokens`` as the authorizer reads them), labels, name words,
    keys, history and audit trail through the API's logic, the low-water marks and the due rows through the
    poller's reads. What was read, by family, and every failure (``failures``: "what: error"); the items
    read only through those paths (history, tokens, marks, indexes), by table and key prefix
    (``other_items``)."""
    s = side(tables)
    read: Counter[str] = Counter()
    failures: list[str] = []
    other_items: Counter[str] = Counter()

    def attempt(what: str, reader: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``reader(*args, **kwargs)``, counted under the first word of ``what``; None if it failed."""
        try:
            value = reader(*args, **kwargs)
        except Exception as error:
            failures.append(f"{what}: {type(error).__name__}: {error}")
            return None
        read[what.split(" ")[0]] += 1
        return value

    for table in (s.names.jobs, s.names.runs, s.names.control):
        for page in s.dynamodb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
            for item in page.get("Items", []):
                key = "/".join(
                    f"{k}={v.get('S', v.get('N'))}"
                    for k, v in sorted(item.items())
                    if k in ("job_id", "run_id", "pk", "sk")
                )
                team_json = item.get("team", {}).get("S", "")
                if table == s.names.jobs and "spec" in item:
                    attempt(f"job_item {key}", item_to_job, item)
                elif table == s.names.runs and "payload" in item:
                    attempt(f"run_item {key}", item_to_run, item)
                elif team_json.startswith("{"):
                    attempt(f"team_item {key}", Team.model_validate_json, team_json)
                elif "calendar" in item:
                    attempt(f"calendar_item {key}", Calendar.model_validate_json, item["calendar"]["S"])
                else:
                    named = item.get("pk", item.get("job_id", item.get("run_id", {})))
                    other_items[f"{table.rsplit('-', 1)[-1]}:{named.get('S', '?').split('#')[0]}"] += 1
    for index, body in enumerate(bodies):
        attempt(f"message {index}", decode, body)

    service = s.service(s.clock.now())
    team = attempt("team", service.team, team_id)
    if team is None:
        return {"read": dict(read), "failures": failures, "other_items": dict(other_items)}
    attempt("teams", s.catalog.list_teams)
    attempt("tokens", service.teams.list_tokens, team_id)
    for token in tokens or []:
        attempt("authenticated", service.authenticate, f"Bearer {token}")
    attempt("audit", service.teams.audit, team_id)
    calendars = attempt("calendars", service.calendars.list, team_id, 100, None)
    for calendar in calendars.items if calendars else []:
        attempt(f"calendar {calendar.name}", service.calendars.get, team_id, calendar.name)
        attempt(f"calendar_days {calendar.name}", service.calendars.days, team_id, calendar.name, 2027)
        attempt(
            f"calendar_history {calendar.name}", service.calendars.history, team_id, calendar.name, 100, None
        )
        attempt(f"calendar_users {calendar.name}", service.calendars.users, team_id, calendar.name)
    attempt("labelled", service.list_jobs, team, 100, None, label="env:skew")
    attempt("named", service.list_jobs, team, 100, None, q="skew")
    attempt("marks", s.store.low_water_marks, range(PARTITIONS))
    page = attempt("jobs", service.list_jobs, team, 100, None)
    for job in page.items if page else []:
        attempt(f"job {job.id}", service.get_job, team, job.id)
        attempt(f"job_history {job.id}", service.job_history, team, job.id, 100, None)
        attempt(f"preview {job.id}", service.preview, team, job.id, 3)
        if job.key is not None:
            attempt(f"keyed {job.id}", service.job_id_by_key, team, job.key)
        runs = attempt(f"job_runs {job.id}", service.list_runs, team, job.id, 100, None)
        for run in runs.items if runs else []:
            attempt(f"run {run.run_id}", service.get_run, team, run.run_id)
        fire = job.state.next_fire_at
        if fire is not None:
            due = (partition_of(job.id), minute_bucket(fire), fire, 100)
            attempt(f"due_jobs {job.id}", s.store.due_jobs, *due)
    return {"read": dict(read), "failures": failures, "other_items": dict(other_items)}


COMMANDS: dict[str, Callable[..., Any]] = {
    "where": where,
    "write_in_format": write_in_format,
    "create_job": create_job,
    "sweep": sweep,
    "recover": recover,
    "work": work,
    "lease": lease,
    "extend": extend,
    "record": record,
    "get_run": get_run,
    "write_everything": write_everything,
    "read_everything": read_everything,
}


def serve() -> None:
    """Answer commands from stdin until it closes. What the code prints or logs goes to stderr."""
    answers = sys.stdout
    sys.stdout = sys.stderr
    for line in sys.stdin:
        if not line.strip():
            continue
        command = json.loads(line)
        try:
            answer = {"ok": COMMANDS[command["command"]](**command.get("args", {}))}
        except Exception as error:
            answer = {"error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()}
        answers.write(json.dumps(answer, default=str) + "\n")
        answers.flush()


if __name__ == "__main__":
    serve()
