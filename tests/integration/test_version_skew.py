"""Version skew (issue 49, item 5): the release before (git tag ``v0.1.0``) runs beside this one on the same
tables and queue, as it does for a while after every deploy and after a rollback (docs/stored-formats.md).

The release before cannot share a process with this one (both are the package ``duetime``): it is extracted
from its tag and driven in a process of its own (``release_driver.py``, the same commands this release runs
in-process). Pollers sweep at injected instants; workers call a target in this process that counts calls
per run id, so a due time with no run (lost) or a run called twice (repeated) is counted exactly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

import pytest

from duetime.domain.models import RunStatus
from duetime.local.demo_target import Answer, JsonRequestHandler
from duetime.upgrades.releases import resolve_ref

from . import release_driver
from .conftest import Stack

# One driver of the release before per process (a session fixture): the module's tests on one xdist worker.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("version-skew")]

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(release_driver.__file__).resolve()
PREVIOUS_RELEASE = "v0.1.0"


# --- the two releases -----------------------------------------------------------------------------------


class Release(Protocol):
    name: str

    def call(self, command: str, **args: Any) -> Any: ...


class ReleaseFailed(Exception):
    """A command the release answered with an error (its traceback in the message)."""


class OldRelease:
    """The release before, in a process of its own serving ``release_driver``'s commands."""

    name = "old"

    def __init__(self, shared: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(shared)}
        self.process = subprocess.Popen(
            [sys.executable, str(DRIVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        self.lock = threading.Lock()

    def call(self, command: str, **args: Any) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        with self.lock:
            self.process.stdin.write(json.dumps({"command": command, "args": args}) + "\n")
            self.process.stdin.flush()
            line = self.process.stdout.readline()
        if not line:
            raise ReleaseFailed(f"the old release's driver exited ({self.process.poll()})")
        answer = json.loads(line)
        if "error" in answer:
            raise ReleaseFailed(f"{answer['error']}\n{answer['traceback']}")
        return answer["ok"]

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=10)


class NewRelease:
    """This release, running the same commands in this process (arguments and answers through JSON, as the
    old one's)."""

    name = "new"

    def call(self, command: str, **args: Any) -> Any:
        try:
            answer = release_driver.COMMANDS[command](**json.loads(json.dumps(args)))
        except Exception as error:
            raise ReleaseFailed(f"{type(error).__name__}: {error}") from error
        return json.loads(json.dumps(answer, default=str))


def extracted(release: str) -> Path:
    """``shared`` and ``functions`` of ``release`` (its commit from releases.json: a clone without tags has
    it too), extracted once per commit under .cache/releases/."""
    ref = resolve_ref(release, ROOT)
    found = subprocess.run(
        ["git", "rev-parse", "--verify", f"{ref}^{{commit}}"], cwd=ROOT, capture_output=True, text=True
    )
    if found.returncode != 0:
        pytest.fail(
            f"release {release} ({ref}) is not in this clone (a shallow one?): {found.stderr.strip()}"
        )
    commit = found.stdout.strip()
    folder = ROOT / ".cache" / "releases" / commit
    if not (folder / "shared" / "duetime" / "__init__.py").exists():
        partial = folder.with_name(f"{commit}.{os.getpid()}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "archive", commit, "shared", "functions"], cwd=ROOT, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(partial)], input=archive, check=True)
        try:
            partial.rename(folder)
        except OSError:  # another worker extracted it meanwhile
            shutil.rmtree(partial, ignore_errors=True)
    return folder / "shared"


@pytest.fixture(scope="session")
def old() -> Iterator[OldRelease]:
    shared = extracted(PREVIOUS_RELEASE)
    release = OldRelease(shared)
    where = release.call("where")
    assert Path(where["file"]).resolve().is_relative_to(shared.resolve()), where  # the old code, not ours
    assert where["version"] == PREVIOUS_RELEASE.removeprefix("v"), where
    yield release
    release.close()


@pytest.fixture
def new() -> NewRelease:
    return NewRelease()


def tables_of(stack: Stack) -> list[str]:
    return [stack.names.jobs, stack.names.runs, stack.names.control, stack.queue_url]


# --- the target -----------------------------------------------------------------------------------------


class _CountingHandler(JsonRequestHandler):
    server: CountingTarget

    def answer(self, method: str, body: str) -> Answer:
        run_id = self.headers.get("Idempotency-Key", "")
        attempt = int(self.headers.get("X-Duetime-Attempt", "0"))
        status = 500 if "flaky" in self.path and attempt == 1 else 200
        with self.server.lock:
            self.server.calls.append((run_id, attempt, status))
        return status, json.dumps({"ok": status == 200}), {}


class CountingTarget(ThreadingHTTPServer):
    """Answers 200, or 500 to the first attempt on a path with ``flaky`` in it; keeps every call."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _CountingHandler)
        self.calls: list[tuple[str, int, int]] = []  # (run id, attempt, status)
        self.lock = threading.Lock()

    def url(self, path: str = "/target") -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"

    def by_run(self) -> dict[str, list[tuple[int, int]]]:
        with self.lock:
            calls: dict[str, list[tuple[int, int]]] = {}
            for run_id, attempt, status in self.calls:
                calls.setdefault(run_id, []).append((attempt, status))
            return calls


@pytest.fixture
def target() -> Iterator[CountingTarget]:
    server = CountingTarget()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


# --- helpers --------------------------------------------------------------------------------------------


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


def run_id_of(job_id: str, nominal: datetime) -> str:
    return f"{job_id}@{nominal:%Y-%m-%dT%H:%M:%SZ}"


def deliver(
    stack: Stack, worker: Release, owner: str, until: Callable[[], bool], timeout: float = 40.0
) -> list[dict[str, Any]]:
    """Hand the queue's messages, a batch of up to 10 at a time, to ``worker`` as the event source mapping
    does, until ``until()``; every answer. A message the worker fails on (one it cannot decode, a run it
    cannot read or record) fails the test at once: nothing here should."""
    answers: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while not until():
        assert time.monotonic() < deadline, f"timed out; answers so far: {answers}"
        batch = stack.consumer.receive(10, wait_seconds=1)
        if not batch:
            continue
        worked = worker.call("work", tables=tables_of(stack), bodies=[m.body for m in batch], owner=owner)
        answers.extend(worked)
        assert not [answer for answer in worked if "error" in answer], worked
        stack.consumer.delete([m.receipt_handle for m in batch])
    return answers


def peek(stack: Stack, count: int, timeout: float = 15.0) -> list[str]:
    """The bodies of the ``count`` messages on the queue (waiting for those delayed), left there: each is
    visible again a second after it was seen."""
    bodies: dict[str, str] = {}
    deadline = time.monotonic() + timeout
    while len(bodies) < count:
        assert time.monotonic() < deadline, f"{len(bodies)} messages of {count}: {list(bodies.values())}"
        for message in stack.sqs.receive_message(
            QueueUrl=stack.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1, VisibilityTimeout=1
        ).get("Messages", []):
            bodies[message["MessageId"]] = message["Body"]
    return list(bodies.values())


def succeeded(stack: Stack, run_ids: set[str]) -> Callable[[], bool]:
    def check() -> bool:
        runs = stack.store.get_runs(sorted(run_ids))
        return len(runs) == len(run_ids) and all(r.status is RunStatus.SUCCEEDED for r in runs.values())

    return check


# --- runs across the releases ---------------------------------------------------------------------------

KINDS: dict[str, dict[str, Any]] = {
    "cron": {"schedule": {"cron": "* * * * *", "timezone": "Europe/Berlin"}, "jitter_seconds": 0},
    "rate": {"schedule": {"rate": "1 minute"}, "jitter_seconds": 0},
    "once": {"schedule": {"at": "{base+50s}"}, "jitter_seconds": 0},
    "jittered": {"schedule": {"cron": "* * * * *", "timezone": "UTC"}, "jitter_seconds": 30},
    "retried": {
        "schedule": {"rate": "1 minute"},
        "jitter_seconds": 0,
        "retry": {"max_attempts": 2, "backoff_seconds": [1]},
        "target": "flaky",
    },
}
PER_KIND = 4
SWEEPS = 2


def claim_and_run(
    stack: Stack, poller: Release, worker: Release, target: CountingTarget, creator: Release
) -> dict[str, Any]:
    """Jobs of every kind (PER_KIND each) created by ``creator``'s API a few minutes ago, then SWEEPS sweeps
    by ``poller`` at injected instants a minute apart, each catching exactly one due time of each job, every
    run worked by ``worker`` from the queue. Asserts each sweep created exactly the runs due (none lost, none
    more) and every run succeeded with one successful call (the retried ones after a 500); the figures."""
    started = time.monotonic()
    base = stack.clock.now().replace(second=0, microsecond=0) - timedelta(minutes=10)
    jobs: list[Any] = []
    second = timedelta(seconds=1)
    for kind, spec in KINDS.items():
        body = json.loads(json.dumps(spec).replace("{base+50s}", iso(base + timedelta(seconds=50))))
        path = body.pop("target", "target")
        for i in range(PER_KIND):
            job_body = {"name": f"{kind} {i}", "target": {"url": target.url(f"/{path}")}, **body}
            created = creator.call(
                "create_job", tables=tables_of(stack), team_id="team-a", body=job_body, now=iso(base + second)
            )
            jobs.append(stack.store.get_job(created))
    expected_all: set[str] = set()
    lost = extra = 0
    for k in range(SWEEPS):
        now = base + timedelta(seconds=119.5 + 60 * k)
        expected = set()
        for job in jobs:
            stored = stack.store.get_job(job.id)
            assert stored is not None
            fire, nominal = stored.state.next_fire_at, stored.state.next_nominal_at
            if fire is not None and nominal is not None and fire <= now:
                expected.add(run_id_of(job.id, nominal))
        report = poller.call("sweep", tables=tables_of(stack), now=iso(now))
        created = set(report["run_ids"])
        lost += len(expected - created)
        extra += len(created - expected)
        assert created == expected, (k, report)
        expected_all |= created
        deliver(stack, worker, f"{worker.name}-worker", succeeded(stack, expected_all))
    # one run per periodic job and sweep, the one-time jobs' once
    per_job = Counter(r.split("@")[0] for r in expected_all)
    assert all(per_job[j.id] == (1 if j.name.startswith("once") else SWEEPS) for j in jobs), [
        (j.name, per_job[j.id], j.state, sorted(r for r in expected_all if r.startswith(j.id))) for j in jobs
    ]
    assert len(expected_all) == (len(KINDS) - 1) * PER_KIND * SWEEPS + PER_KIND
    # what is left on the queue (a run a racing poller sent again) is a duplicate: dropped, never called
    while batch := stack.consumer.receive(10, wait_seconds=1):
        leftover = worker.call("work", tables=tables_of(stack), bodies=[m.body for m in batch], owner="late")
        assert all(answer.get("outcome") == "duplicate" for answer in leftover), leftover
        stack.consumer.delete([m.receipt_handle for m in batch])
    calls = target.by_run()
    repeated = sum(1 for run_id in expected_all if sum(s == 200 for _, s in calls.get(run_id, [])) > 1)
    uncalled = sum(1 for run_id in expected_all if not any(s == 200 for _, s in calls.get(run_id, [])))
    retried = {
        r for r in expected_all if r.split("@")[0] in {j.id for j in jobs if j.name.startswith("retried")}
    }
    for run_id in expected_all:
        wanted = [(1, 500), (2, 200)] if run_id in retried else [(1, 200)]
        assert calls.get(run_id) == wanted, (run_id, calls.get(run_id))
    assert set(calls) == expected_all  # no call for a run that is not one of them
    rows = {
        i["run_id"]["S"] for i in stack.dynamodb.scan(TableName=stack.names.runs)["Items"] if "payload" in i
    }
    assert rows == expected_all  # no run row besides them: none skipped, none made twice
    figures = {
        "creator": creator.name,
        "poller": poller.name,
        "worker": worker.name,
        "runs": len(expected_all),
        "calls": sum(len(c) for c in calls.values()),
        "lost": lost + uncalled,
        "extra_runs": extra,
        "repeated": repeated,
        "run_rows": len(rows),
        "seconds": round(time.monotonic() - started, 1),
    }
    print("skew figures:", figures)
    assert figures["lost"] == 0 and figures["repeated"] == 0 and figures["extra_runs"] == 0
    return figures


# This release writing format 1 (what it writes until the installation is finalized: what the release before
# wrote) or format 2 (after: no release before may run then, but one that still did must not fail), the jobs
# created by its API or by the release before's.
FORMATS_AND_CREATORS = pytest.mark.parametrize(
    ("stored_format", "creator"),
    [(1, "new"), (2, "new"), (1, "old")],
    ids=["format1-jobs-by-new", "format2-jobs-by-new", "format1-jobs-by-old"],
)


def assert_written_in(stack: Stack, table: str, stored_format: int) -> None:
    """The items of ``table`` that carry a stored format carry ``stored_format`` (format 1 carries none)."""
    marks = {item["fmt"]["N"] for item in scanned(stack, table) if "fmt" in item}
    assert marks == ({str(stored_format)} if stored_format > 1 else set()), marks


class BothReleases:
    """Both releases at once: each sweep is the two pollers' at the same instant, on two threads (the
    worst case for their races); the jobs are created by the two APIs in turn, and the batches go to the
    two workers in turn."""

    name = "both"

    def __init__(self, old: OldRelease, new: NewRelease) -> None:
        self.releases: list[Release] = [old, new]
        self.batches = 0
        self.created = 0
        self.races = 0

    def call(self, command: str, **args: Any) -> Any:
        if command == "create_job":
            self.created += 1
            return self.releases[self.created % 2].call(command, **args)
        if command == "work":
            self.batches += 1
            release = self.releases[self.batches % 2]
            return release.call(command, **{**args, "owner": f"{release.name}-worker"})
        assert command == "sweep"
        reports: list[Any] = [None, None]
        barrier = threading.Barrier(2)

        def sweep(i: int) -> None:
            barrier.wait()
            reports[i] = self.releases[i].call(command, **args)

        threads = [threading.Thread(target=sweep, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        old_runs, new_runs = (set(report["run_ids"]) for report in reports)
        assert not old_runs & new_runs, old_runs & new_runs  # no run made by both
        self.races += sum(report["lost_races"] for report in reports)
        return {"run_ids": sorted(old_runs | new_runs), "reports": reports}


@FORMATS_AND_CREATORS
def test_old_poller_claims_and_new_worker_runs_every_job(
    stack: Stack, old: OldRelease, new: NewRelease, target: CountingTarget, stored_format: int, creator: str
) -> None:
    new.call("write_in_format", tables=tables_of(stack), stored_format=stored_format)
    claim_and_run(stack, old, new, target, creator=new if creator == "new" else old)
    if creator == "new":
        assert_written_in(stack, stack.names.jobs, stored_format)


@FORMATS_AND_CREATORS
def test_new_poller_claims_and_old_worker_runs_every_job(
    stack: Stack, old: OldRelease, new: NewRelease, target: CountingTarget, stored_format: int, creator: str
) -> None:
    new.call("write_in_format", tables=tables_of(stack), stored_format=stored_format)
    claim_and_run(stack, new, old, target, creator=new if creator == "new" else old)
    assert_written_in(stack, stack.names.runs, stored_format)


# --- what one release writes, the other reads -----------------------------------------------------------

KEYS = {"jobs": ("job_id",), "runs": ("job_id", "occurrence"), "control": ("pk", "sk")}
SETTLED = {RunStatus.SUCCEEDED, RunStatus.CANCELLED, RunStatus.RETRY_WAIT, RunStatus.SKIPPED}


def families(stack: Stack) -> list[tuple[str, str]]:
    return [("jobs", stack.names.jobs), ("runs", stack.names.runs), ("control", stack.names.control)]


def scanned(stack: Stack, table: str) -> list[dict[str, Any]]:
    return [
        item
        for page in stack.dynamodb.get_paginator("scan").paginate(TableName=table)
        for item in page["Items"]
    ]


def with_format_marks(stack: Stack, bodies: list[str]) -> list[str]:
    """Give every item of the three tables a top-level number ``fmt`` (where it has none), as the release
    after this one is to write; the bodies, each with a top-level ``"fmt"`` the same way."""
    for family, table in families(stack):
        for item in scanned(stack, table):
            stack.dynamodb.update_item(
                TableName=table,
                Key={name: item[name] for name in KEYS[family]},
                UpdateExpression="SET fmt = if_not_exists(fmt, :one)",
                ExpressionAttributeValues={":one": {"N": "1"}},
            )
    return [json.dumps({"fmt": 1, **json.loads(body)}) for body in bodies]


def writes_then_reads(
    stack: Stack, writer: Release, reader: Release, target: CountingTarget
) -> dict[str, Any]:
    """``writer`` writes every family of item it has (``release_driver.write_everything``: the cron and rate
    jobs' targets answer 500 at first) and works the runs that made; ``reader`` reads every item, and every
    message ``writer`` queued (the poller's and the API's, a worker's retries), as written and again with a
    format mark added everywhere, without one failure; then ``reader``'s worker runs the retries ``writer``
    left."""
    tables = tables_of(stack)
    now = stack.clock.now()
    written = writer.call(
        "write_everything",
        tables=tables,
        target_url=target.url("/ok"),
        flaky_url=target.url("/flaky"),
        now=iso(now),
    )
    # the runs written, and any due time the sweep recorded as skipped (the jittered job's first, when its
    # second was due too: misfire run_once)
    run_ids = {item["run_id"]["S"] for item in scanned(stack, stack.names.runs) if "payload" in item}
    assert set(written["runs"]) <= run_ids
    skipped = {
        i for i, run in stack.store.get_runs(sorted(run_ids)).items() if run.status is RunStatus.SKIPPED
    }
    # the triggers' messages (carrying their runs) and the sweep's
    bodies = peek(stack, len(run_ids - skipped))

    def settled() -> bool:
        runs = stack.store.get_runs(sorted(run_ids))
        return len(runs) == len(run_ids) and all(run.status in SETTLED for run in runs.values())

    deliver(stack, writer, f"{writer.name}-worker", settled)
    runs = stack.store.get_runs(sorted(run_ids))
    # the jittered job's trigger succeeded (and its swept run, if one was due), the cron job's trigger and the
    # swept rate run (and the cron's, if one was due) were answered 500: their retries wait
    statuses = Counter(run.status for run in runs.values())
    assert statuses[RunStatus.SUCCEEDED] >= 1 and statuses[RunStatus.RETRY_WAIT] >= 2, runs
    assert statuses[RunStatus.CANCELLED] == 1
    # the retries' messages, sent by the writer's worker
    bodies += peek(stack, statuses[RunStatus.RETRY_WAIT])

    first = reader.call("read_everything", tables=tables, bodies=bodies, tokens=written["tokens"])
    assert first["failures"] == [], first["failures"]
    formats = {  # the stored formats of the items as written (0: none), by table
        family: Counter(
            int(item["fmt"]["N"]) if "fmt" in item else 0
            for item in scanned(stack, table)
            if family != "runs" or "payload" in item
        )
        for family, table in families(stack)
    }
    # In the runs table only the runs are items written whole: the rows that hold keys only (a reap ticket,
    # written when a claim makes several runs at once, as a late sweep of the jittered job does; a deadline
    # watch) carry no format (docs/stored-formats.md), so they are not counted here.
    message_formats = Counter(json.loads(body).get("fmt", 1) for body in bodies)
    marked = reader.call(
        "read_everything", tables=tables, bodies=with_format_marks(stack, bodies), tokens=written["tokens"]
    )
    assert marked["failures"] == [], marked["failures"]
    assert marked["read"] == first["read"]
    read = first["read"]
    assert (
        read["job_item"] == len(written["jobs"]) and read["jobs"] == 1 and read["job"] == len(written["jobs"])
    )
    assert read["run_item"] == read["run"] == len(run_ids)
    assert read["team_item"] >= 1 and read["calendar_item"] == len(written["calendars"])
    assert read["calendar"] == read["calendar_days"] == read["calendar_history"] == len(written["calendars"])
    assert read["calendar_users"] == len(written["calendars"]) and read["audit"] == 1
    assert read["message"] == len(bodies) and read["authenticated"] == len(written["tokens"])

    retries = {run_id for run_id, run in runs.items() if run.status is RunStatus.RETRY_WAIT}
    deliver(stack, reader, f"{reader.name}-worker", succeeded(stack, retries))
    calls = target.by_run()
    assert all(calls[run_id] == [(1, 500), (2, 200)] for run_id in retries), calls
    figures = {
        "writer": writer.name,
        "reader": reader.name,
        "read": read,
        "other_items": first["other_items"],
        "formats": formats,
        "message_formats": message_formats,
        "written": written,
    }
    print("skew read figures:", {k: v for k, v in figures.items() if k != "written"})
    return figures


@pytest.mark.parametrize("stored_format", [1, 2], ids=["format1", "format2"])
def test_old_release_reads_every_item_the_new_release_writes(
    stack: Stack, old: OldRelease, new: NewRelease, target: CountingTarget, stored_format: int
) -> None:
    new.call("write_in_format", tables=tables_of(stack), stored_format=stored_format)
    figures = writes_then_reads(stack, new, old, target)
    formats, bodies = figures["formats"], figures["message_formats"]
    mark = stored_format if stored_format > 1 else 0  # format 1 is what the release before wrote: no mark
    assert formats["jobs"] == {mark: len(figures["written"]["jobs"])}  # the format asked for was written
    assert set(formats["runs"]) == {mark} and mark in formats["control"]
    assert set(bodies) == {stored_format}


def test_new_release_reads_every_item_the_old_release_writes(
    stack: Stack, old: OldRelease, new: NewRelease, target: CountingTarget
) -> None:
    writes_then_reads(stack, old, new, target)


# --- fencing across the releases ------------------------------------------------------------------------


def fencing(stack: Stack, stale: Release, current: Release, target: CountingTarget) -> None:
    """A run ``stale``'s worker leased and lost (its lease expired and ``current``'s reaper queued the next
    attempt), then leased by ``current``'s worker: the stale owner can neither record a result, keep its
    lease nor take the run again, while the current owner holds it (also once the row carries a format mark a
    later release may write) and after it recorded its result; its old message is a duplicate."""
    tables = tables_of(stack)
    job = stack.job_due_now("team-a", target.url("/target"))
    now = stack.clock.now()
    # Swept a few seconds on: the job's time is about now, and the store's clock, refined in the background,
    # may have moved back a little since the job was written (seen on a loaded host: the sweep found nothing).
    (run_id,) = current.call("sweep", tables=tables, now=iso(now + timedelta(seconds=5)))["run_ids"]
    (first_message,) = [m.body for m in stack.consumer.receive(10, wait_seconds=1)]
    assert json.loads(first_message)["attempt"] == 1

    def on_run(release: Release, command: str, owner: str, **args: Any) -> Any:
        """``command`` on the run as ``owner``, at the store's now (a lease or heartbeat for a minute)."""
        moment = stack.clock.now()
        if command in ("lease", "extend"):
            args.setdefault("lease_until", iso(moment + timedelta(minutes=1)))
        if command == "record":
            args.setdefault("status_code", 200)
        return release.call(command, tables=tables, run_id=run_id, owner=owner, now=iso(moment), **args)

    taken = on_run(stale, "lease", "stale", attempt=1, lease_until=iso(now + timedelta(seconds=1)))
    assert taken is not None and taken["status"] == "running" and taken["attempt"] == 1
    reaped = current.call("recover", tables=tables, now=iso(now + timedelta(minutes=5)))
    assert reaped["leases_expired"] == 1
    assert not on_run(stale, "record", "stale", status="succeeded")
    held = on_run(current, "lease", "current", attempt=2)
    assert held is not None and held["attempt"] == 2 and held["owner"] == "current"

    def stale_is_refused() -> None:
        for status in ("succeeded", "failed", "dead"):
            assert not on_run(stale, "record", "stale", status=status)
        for attempt in (1, 2):
            assert not on_run(stale, "extend", "stale", attempt=attempt)
            assert on_run(stale, "lease", "stale", attempt=attempt) is None
        (answer,) = stale.call("work", tables=tables, bodies=[first_message], owner="stale")
        assert answer == {"outcome": "duplicate", "run_id": run_id, "attempt": 1}

    stale_is_refused()
    run = stack.store.get_run(run_id)
    assert run is not None and (run.status, run.owner, run.attempt) == (RunStatus.RUNNING, "current", 2)
    stack.dynamodb.update_item(  # a format mark on the row, if the sweep wrote none (format 1)
        TableName=stack.names.runs,
        Key={"job_id": {"S": job.id}, "occurrence": {"S": run_id.split("@", 1)[1]}},
        UpdateExpression="SET fmt = if_not_exists(fmt, :one)",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )
    stale_is_refused()
    assert on_run(current, "extend", "current", attempt=2)
    assert on_run(current, "record", "current", status="succeeded", status_code=201)
    stale_is_refused()
    run = stack.store.get_run(run_id)
    assert run is not None and run.status is RunStatus.SUCCEEDED and run.attempt == 2
    # the current owner's result, never the stale one's
    assert run.result is not None and run.result.status_code == 201
    assert target.by_run() == {}  # the stale message called nothing


@pytest.mark.parametrize("stored_format", [1, 2], ids=["format1", "format2"])
def test_old_worker_cannot_record_after_new_worker_took_the_lease(
    stack: Stack, old: OldRelease, new: NewRelease, target: CountingTarget, stored_format: int
) -> None:
    new.call("write_in_format", tables=tables_of(stack), stored_format=stored_format)
    fencing(stack, stale=old, current=new, target=target)


def test_new_worker_cannot_record_after_old_worker_took_the_lease(
    stack: Stack, old: OldRelease, new: NewRelease, target: CountingTarget
) -> None:
    fencing(stack, stale=new, current=old, target=target)


def test_both_releases_polling_and_working_at_once_lose_and_repeat_nothing(
    stack: Stack, old: OldRelease, new: NewRelease, target: CountingTarget
) -> None:
    both = BothReleases(old, new)
    claim_and_run(stack, both, both, target, creator=both)
    print("skew races lost by one poller to the other:", both.races, "batches:", both.batches)


def test_a_field_the_old_release_does_not_know_inside_stored_json_fails_only_its_reads(
    stack: Stack, old: OldRelease, new: NewRelease, target: CountingTarget
) -> None:
    """The control of the readers above (they would see an incompatibility), and why a new field is written
    only once the upgrade is finalized (docs/stored-formats.md, rule 3): v0.1.0 refuses a field it does not
    know inside a job's spec or a carried run, where this release ignores it; a top-level one (a ``fmt``
    attribute or key) neither refuses."""
    tables = tables_of(stack)
    job = stack.job_due_now("team-a", target.url("/target"))
    key = {"job_id": {"S": job.id}}
    spec = json.loads(stack.dynamodb.get_item(TableName=stack.names.jobs, Key=key)["Item"]["spec"]["S"])
    stack.dynamodb.update_item(
        TableName=stack.names.jobs,
        Key=key,
        UpdateExpression="SET spec = :spec, fmt = :one",
        ExpressionAttributeValues={":spec": {"S": json.dumps({**spec, "later": 1})}, ":one": {"N": "1"}},
    )
    assert len(new.call("sweep", tables=tables, now=iso(stack.clock.now()))["run_ids"]) == 1
    (body,) = peek(stack, 1)
    message = json.loads(body)
    assert "run" in message  # a poller's message carries its run
    bodies = [
        json.dumps({**message, "fmt": 1}),
        json.dumps({**message, "run": {**message["run"], "later": 1}}),
    ]

    assert new.call("read_everything", tables=tables, bodies=bodies, team_id="team-a")["failures"] == []
    failures = old.call("read_everything", tables=tables, bodies=bodies, team_id="team-a")["failures"]
    # the job's item, the team's listing it is in (one job the release cannot read fails the page) and the
    # message whose carried run has the field; the run row and the message with a top-level field are read
    assert {failure.split(":")[0] for failure in failures} == {
        f"job_item job_id={job.id}",
        "jobs",
        "message 1",
    }
    assert all("Extra inputs are not permitted" in failure for failure in failures), failures
    print("skew control, what v0.1.0 refuses:", [failure.split("\n")[0] for failure in failures])
