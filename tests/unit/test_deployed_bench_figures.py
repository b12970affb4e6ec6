"""Figures the deployed-stack precision bench derives from what it recorded (``duetime_bench.deployed``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import pytest

from duetime.domain.timeutil import iso_z
from duetime.ports import PollerLease
from duetime_bench import deployed
from duetime_bench.deployed import (
    LeaseSample,
    TargetCall,
    due_offsets,
    group_of,
    invocation_figures,
    lateness_figures,
    lease_changes,
    max_by_minute,
    near_handovers,
)

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def call(run_id: str, due: datetime, late: float) -> TargetCall:
    return TargetCall(run_id, iso_z(due), due.timestamp() + late)


def test_every_second_of_the_window_gets_a_job_when_there_are_enough() -> None:
    offsets = due_offsets(400, 360)
    assert len(offsets) == 400 and set(offsets) == set(range(360))


def test_fewer_jobs_than_seconds_still_hit_every_minute_boundary_once_a_second_at_most() -> None:
    offsets = due_offsets(300, 360)
    assert len(offsets) == len(set(offsets)) == 300
    assert {0, 59, 60, 119, 120, 179, 180, 239, 240, 299, 300, 359} <= set(offsets)
    assert all(0 <= o < 360 for o in offsets)
    assert max(b - a for a, b in pairwise(offsets)) <= 2  # spread, not bunched
    assert due_offsets(3, 360) == [0, 120, 240] and due_offsets(0, 360) == []


def test_lateness_is_the_first_arrival_minus_the_scheduled_second_and_lost_runs_are_counted() -> None:
    planned = {"a@1": at(0), "b@2": at(1), "c@3": at(2), "lost@4": at(3)}
    calls = [
        call("a@1", at(0), 0.25),
        call("b@2", at(1), 1.5),
        call("b@2", at(1), 70.0),  # a repeat: counted, not a new start
        call("c@3", at(2), 2.5),
        call("stranger@9", at(5), 0.1),
    ]
    figures, lateness = lateness_figures(planned, calls)
    assert lateness == pytest.approx({"a@1": 0.25, "b@2": 1.5, "c@3": 2.5})
    assert figures["runs_started"] == 3 and figures["lost"] == 1
    assert figures["repeats"] == 1 and figures["unexpected_calls"] == 1 and figures["target_calls"] == 5
    assert (figures["lateness_min_s"], figures["lateness_p50_s"], figures["lateness_max_s"]) == (
        0.25,
        1.5,
        2.5,
    )
    assert (figures["early"], figures["late_over_1s"], figures["late_over_2s"]) == (0, 2, 1)
    assert figures["wrong_scheduled_at"] == 0


def test_a_call_before_its_second_or_naming_another_second_is_reported() -> None:
    planned = {"a@1": at(10), "b@2": at(20)}
    calls = [call("a@1", at(10), -0.05), TargetCall("b@2", iso_z(at(21)), at(21).timestamp() + 0.1)]
    figures, lateness = lateness_figures(planned, calls)
    assert figures["early"] == 1 and figures["lateness_min_s"] == -0.05
    assert figures["wrong_scheduled_at"] == 1  # the header said 21, the job was due at 20
    assert lateness["b@2"] == pytest.approx(0.1)  # measured against the header, as the brief defines


def test_no_run_started_gives_no_percentiles_rather_than_nan() -> None:
    figures, _ = lateness_figures({"a@1": at(0)}, [])
    assert figures["lost"] == 1 and figures["lateness_p99_s"] is None
    json.dumps(figures, allow_nan=False)


def test_the_worst_lateness_of_each_minute() -> None:
    planned = {"a": at(0), "b": at(59), "c": at(61), "d": at(150)}
    assert max_by_minute(planned, {"a": 0.2, "b": 0.9, "d": 3.0}, T0) == [0.9, None, 3.0]


def lease(term: int, since: datetime | None, holder: str | None = "x", expires: float = 6) -> PollerLease:
    expires_at = None if since is None else since + timedelta(seconds=expires)
    return PollerLease("0-15", holder, term, since, expires_at)


def test_a_new_term_from_a_whole_second_is_a_handover_any_other_a_takeover() -> None:
    samples = [
        LeaseSample("0-15", at(0.3), lease(4, at(-30))),
        LeaseSample("0-15", at(1.3), lease(5, at(1))),  # accepted at the agreed second
        LeaseSample("0-15", at(2.3), lease(5, at(1))),
        LeaseSample("0-15", at(3.3), lease(7, at(3.217))),  # term 6 came and went unseen; 7 took it
        LeaseSample("16-31", at(0.5), lease(1, at(-50))),
        LeaseSample("16-31", at(1.5), lease(2, at(1.480))),
    ]
    changes = lease_changes(samples, at(0), at(60), every=1.0)
    assert changes.handovers == [("0-15", at(1))]
    assert sorted(changes.takeovers) == [("0-15", at(3.217)), ("16-31", at(1.48))]
    assert changes.unseen == 1


def test_changes_outside_the_window_are_left_out_and_unheld_time_is_counted() -> None:
    samples = [
        LeaseSample("0-15", at(-5), lease(1, at(-60))),
        LeaseSample("0-15", at(-4), lease(2, at(-4))),  # before the window
        LeaseSample("0-15", at(10), lease(2, at(-4), expires=10)),  # expired at 6: nobody claims
        LeaseSample("0-15", at(11), lease(2, at(-4), holder=None)),  # given back
        LeaseSample("0-15", at(12), lease(3, at(11.5))),
    ]
    changes = lease_changes(samples, at(0), at(60), every=1.0)
    assert changes.handovers == [] and changes.takeovers == [] and changes.free_takes == [("0-15", at(11.5))]
    assert changes.unheld_seconds == 2.0


def test_a_take_of_a_lease_given_back_or_still_unexpired_is_no_takeover() -> None:
    """A rested group's next tick takes the lease its holder gave back: not a holder that died."""
    samples = [
        LeaseSample("0-15", at(0), lease(1, at(-2))),  # held until 4
        LeaseSample("0-15", at(1), lease(2, at(0.8))),  # taken before 4: it was given back in between
        LeaseSample("0-15", at(20), lease(2, at(0.8), holder=None)),  # rested
        LeaseSample("0-15", at(61), lease(3, at(60.4))),  # the next tick
        LeaseSample("0-15", at(70), lease(3, at(60.4), expires=7)),  # stopped renewing at 67.4
        LeaseSample("0-15", at(71), lease(4, at(70.2))),  # taken over after it expired
    ]
    changes = lease_changes(samples, at(0), at(120), every=1.0)
    assert changes.free_takes == [("0-15", at(0.8)), ("0-15", at(60.4))]
    assert changes.takeovers == [("0-15", at(70.2))]


def test_a_partition_belongs_to_the_group_whose_ranges_hold_it() -> None:
    groups = ["0-15", "16-31", "32-39,48-63", "40"]
    assert [group_of(p, groups) for p in (0, 15, 16, 33, 40, 50, 41)] == [
        "0-15",
        "0-15",
        "16-31",
        "32-39,48-63",
        "40",
        "32-39,48-63",
        None,
    ]


def test_runs_due_near_a_handover_of_their_own_group() -> None:
    planned = {"a": at(10), "b": at(12), "c": at(13), "d": at(30)}
    groups = {"a": "0-15", "b": "0-15", "c": "0-15", "d": "16-31"}
    handovers = [("0-15", at(11)), ("0-15", at(45)), ("16-31", at(80))]
    near = near_handovers(planned, {"a": 0.3, "b": 1.2}, groups, handovers, within=2)
    assert near == {
        "runs": 3,
        "started": 2,
        "lateness_p50_s": pytest.approx(0.3),
        "lateness_p99_s": 1.2,
        "lateness_max_s": 1.2,
    }


def test_cold_starts_and_start_lateness_come_from_the_functions_log_lines() -> None:
    emf = {"_aws": {}, "service": "worker", "RunsStarted": [1.0, 1.0], "StartLateness": [0.4, 1.75]}
    lines = [
        "INIT_START Runtime Version: python:3.13.local",
        "START RequestId: 1 Version: 1",
        json.dumps(emf),
        "END RequestId: 1",
        "REPORT RequestId: 1\tDuration: 468.98 ms\tBilled Duration: 2023 ms\tInit Duration: 1553.62 ms",
        "START RequestId: 2 Version: 1",
        json.dumps({**emf, "StartLateness": 0.2}),
        '{"level": "INFO", "message": "not a metric"}',
        "REPORT RequestId: 2\tDuration: 38.0 ms\tBilled Duration: 38 ms",
    ]
    figures, lateness = invocation_figures(lines)
    assert figures == {"invocations": 2, "cold_starts": 1, "init_max_s": 1.554}
    assert lateness == [0.4, 1.75, 0.2]


def test_the_bench_builds_this_checkouts_lambda_asset_before_it_deploys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[list[str]] = []

    class Script:
        returncode = 0

        def __init__(self, argv: list[str], **_: Any) -> None:
            calls.append(argv)

        def communicate(self, timeout: float) -> tuple[str, None]:
            return "deployed", None

    def run(argv: list[str], env: dict[str, str], **_: Any) -> None:
        assert "MAKEFLAGS" not in env  # an outer make's flags stay out of the build
        calls.append(argv)

    monkeypatch.setenv("MAKEFLAGS", "-j4")
    monkeypatch.setattr(deployed.subprocess, "run", run)
    monkeypatch.setattr(deployed.subprocess, "Popen", Script)
    deployed.deploy(deployed.DEFAULT_PORT)
    assert calls[0][-1] == "lambda-assets-local" and calls[0][0] == "make"  # the asset first...
    assert calls[1] == [str(deployed.DEPLOY_SCRIPT), "--detach"]  # ...then the deploy that ships it
