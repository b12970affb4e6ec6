"""Absence seen and labelled, on a running ``duetime local``: its pollers stopped for some minutes (``duetime
system pollers stop --local``, Lambda's reserved concurrency 0 as on AWS), the reconciler's alarms go to ALARM
(``duetime system alarms --local``), and after the pollers start again they clear, and each job's fire ledger
labels every time of the stop as it happened: run late (misfire ``run_all``), or one run late and the rest
skipped for the misfire (``run_once``), none left missed. About 6 minutes of real clocks (the alarms count
one-minute periods, as CloudWatch does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import urllib3

from .local_system import LocalSystem, isolated, start_local
from .local_system import wait_until as waiting

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("local-absence")]
HTTP = urllib3.PoolManager()
SETTINGS: dict[str, str] = {}


@pytest.fixture(scope="module")
def local() -> Iterator[LocalSystem]:
    SETTINGS.update(isolated(f"abs{uuid.uuid4().hex[:8]}"))
    system = start_local(SETTINGS)
    yield system
    assert system.stop() == 0, "\n".join(system.output[-30:])


def cli(local: LocalSystem, *args: str) -> Any:
    env = {**os.environ, **SETTINGS, "DUETIME_URL": local.url, "DUETIME_TOKEN": local.token}
    done = subprocess.run(
        [sys.executable, "-m", "duetime.cli", *args, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=90,
    )
    assert done.returncode == 0, (args, done.stderr)
    return json.loads(done.stdout)


def create(local: LocalSystem, name: str, misfire: str) -> dict[str, Any]:
    body = {
        "name": name,
        "schedule": {"cron": "* * * * *"},
        "exact": True,
        "misfire": misfire,
        "target": {"url": f"{local.url}/demo/target"},
    }
    response = HTTP.request(
        "POST",
        local.url + "/v1/jobs",
        body=json.dumps(body),
        headers={"Authorization": f"Bearer {local.token}", "Content-Type": "application/json"},
    )
    assert response.status == 201, response.data
    return dict(json.loads(response.data))


def alarms(local: LocalSystem) -> dict[str, str]:
    return {row["alarm"]: row["state"] for row in cli(local, "system", "alarms", "--local")}


def wait_until(what: str, predicate: Any, timeout: float, local: LocalSystem) -> Any:
    try:
        return waiting(predicate, timeout, local.output, interval=5)
    except AssertionError as exc:
        raise AssertionError(f"{what}: {exc}") from None


@pytest.mark.timeout(900)
def test_pollers_stopped_for_minutes_raise_the_absence_alarms_which_clear_and_the_ledger_labels_each_time(
    local: LocalSystem,
) -> None:
    run_all = create(local, "absence run_all", "run_all")
    run_once = create(local, "absence run_once", "run_once")
    switch = cli(local, "system", "pollers", "status", "--local", "--url", local.url)
    assert switch == [{"function": "poller", "stopped": False, "reserved_concurrency": None}]

    stopped = cli(local, "system", "pollers", "stop", "--local", "--url", local.url)
    assert stopped == [{"function": "poller", "stopped": True, "reserved_concurrency": 0}]
    stopped_at = datetime.now(UTC)
    # The poller invocation running when the stop came claims until its end (up to its run of 135 s), as on
    # AWS: reserved concurrency 0 throttles new invocations, never one under way.
    states = wait_until(
        "MissedFires and OldestUnclaimedDue in ALARM while the pollers are stopped",
        lambda: (s := alarms(local))["MissedFires"] == "ALARM" and s["OldestUnclaimedDue"] == "ALARM" and s,
        480,
        local,
    )
    assert states["EngineHeartbeat"] == "OK", states  # the reconciler still reports: the engine is watched

    started = cli(local, "system", "pollers", "start", "--local", "--url", local.url)
    assert started == [{"function": "poller", "stopped": False, "reserved_concurrency": None}]
    restarted_at = datetime.now(UTC)
    wait_until(
        "every alarm OK again after the pollers started",
        lambda: set(alarms(local).values()) == {"OK"},
        300,
        local,
    )

    window = ["--from", (stopped_at - timedelta(minutes=1)).isoformat(), "--to", restarted_at.isoformat()]
    labels = {}
    for job in (run_all, run_once):
        fires = wait_until(
            f"{job['name']}: every time of the stop claimed",
            lambda job=job: (
                (f := cli(local, "jobs", "fires", job["id"], *window)["fires"])
                and not [x for x in f if x["label"] in ("missed", "pending")]
                and f
            ),
            180,
            local,
        )
        labels[job["name"]] = Counter(f["label"] for f in fires)
        reasons = {f["reason"] for f in fires if f["label"] == "skipped"}
        assert reasons <= {"misfire"}, fires
    # run_all: every time of the stop ran, late; run_once: one of them ran, the rest skipped for the misfire
    assert labels["absence run_all"]["late"] >= 3 and "skipped" not in labels["absence run_all"], labels
    assert labels["absence run_once"]["skipped"] >= 2, labels
    assert labels["absence run_once"]["late"] + labels["absence run_once"]["on_time"] >= 1, labels
