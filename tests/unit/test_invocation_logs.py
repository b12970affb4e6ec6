"""Each poller invocation logs first the fan-out it runs with, and each helper invocation the minute it serves
(``duetime.scheduling.fan_out.POLLER_INVOCATION_LOG``, ``HELPER_INVOCATION_LOG``): structured fields the
deployed spike bench reads back to prove which mode ran (``duetime_bench.deployed_spike``)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from duetime import wiring
from duetime.adapters.memory import MemoryStore
from duetime.domain.clock import ManualClock
from duetime.ports.functions import HelperAssignment
from duetime.scheduling.fan_out import FanOutPolicy, FanOutSetting
from duetime.scheduling.poller import Poller, PollerConfig
from duetime_bench.deployed_spike import helper_invocations, poller_invocations

from ..lambda_support import LambdaContext, load_handler
from .test_fan_out import Launches
from .test_poller_lease_loop import NoAlerts, Queue

NOW = datetime(2026, 12, 3, 0, 0, 10, tzinfo=UTC)
MINUTE = datetime(2026, 12, 3, 0, 1, tzinfo=UTC)


def poller(helpers: Launches | None) -> Poller:
    store = MemoryStore()
    config = PollerConfig(partitions=list(range(16)))
    return Poller(
        store,
        store,
        Queue(),
        NoAlerts(),
        ManualClock(NOW),
        config,
        leases=store,
        helpers=helpers,
        fan_out=FanOutPolicy(holder_rows=300),
    )


@pytest.fixture
def lines() -> Iterator[Any]:
    """``lines(module)``: a handler module's log lines from here on (its logger's stream, whatever it was
    created on: Powertools keeps one logger a service for the process)."""
    streams: list[tuple[Any, Any]] = []

    def capture(module: ModuleType) -> Any:
        buffer = io.StringIO()
        handler = module.logger.registered_handler
        streams.append((handler, handler.setStream(buffer)))
        return lambda: buffer.getvalue().splitlines()

    yield capture
    for handler, stream in streams:
        handler.setStream(stream)


class Shift:
    """A shift that serves nothing: what the handlers log before serving is the subject."""

    def __init__(self, setting: FanOutSetting) -> None:
        self.setting = setting

    def fan_out_setting(self) -> FanOutSetting:
        return self.setting

    def serve(self, *args: Any, **kwargs: Any) -> Any:
        return SimpleNamespace(summary=lambda: {})

    def serve_helper(self, *args: Any, **kwargs: Any) -> Any:
        return SimpleNamespace(summary=lambda: {})


def test_a_poller_with_a_helper_function_runs_with_fan_out_on_and_its_holder_rows() -> None:
    with_helpers = poller(Launches())
    on = FanOutSetting(helpers=True, holder_rows=300)
    assert with_helpers.fan_out_setting() == on
    assert with_helpers.for_partitions([0, 1]).fan_out_setting() == on  # each group's invocation


def test_a_poller_without_a_helper_function_runs_with_fan_out_off_whatever_its_holder_rows() -> None:
    assert poller(None).fan_out_setting() == FanOutSetting(helpers=False, holder_rows=None)


@pytest.mark.parametrize(
    "setting", [FanOutSetting(helpers=True, holder_rows=300), FanOutSetting(helpers=False)], ids=["on", "off"]
)
def test_every_poller_invocation_logs_the_fan_out_it_runs_with_and_its_group(
    setting: FanOutSetting, monkeypatch: pytest.MonkeyPatch, lines: Any
) -> None:
    module = load_handler("poller")
    logged_lines = lines(module)
    monkeypatch.setattr(wiring, "poller_shift", lambda: Shift(setting))
    event = {"detail": {"partitions": "0-15", "run_seconds": 1}}
    module.handler(event, LambdaContext())
    module.handler(event, LambdaContext())
    logged = poller_invocations(logged_lines())
    assert [(i.fan_out, i.group) for i in logged] == [(setting, "0-15")] * 2
    assert all(abs(i.at - datetime.now(UTC).timestamp()) < 60 for i in logged)  # when it was logged


def test_every_helper_invocation_logs_the_partitions_and_minute_it_was_started_for(
    monkeypatch: pytest.MonkeyPatch, lines: Any
) -> None:
    module = load_handler("poller", "helper")
    logged_lines = lines(module)
    monkeypatch.setattr(wiring, "poller_shift", lambda: Shift(FanOutSetting(helpers=False)))
    assignment = HelperAssignment(
        group="0-15", partitions=[2, 3], minute=MINUTE, serve_until=MINUTE + timedelta(seconds=150)
    )
    module.handler({"helper": assignment.model_dump(mode="json")}, LambdaContext())
    logged = helper_invocations(logged_lines())
    assert [(i.partitions, i.minute) for i in logged] == [((2, 3), MINUTE)]
