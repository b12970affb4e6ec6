"""The tables' capacity mode from the forecast (``duetime.scheduling.table_modes``): provisioned for the
steady load, on demand from ``lead`` before a forecast spike to ``hold`` after it, never more than AWS's four
switches to on demand a rolling day. On the twins with a manual clock, the prescaler looking every 5 minutes
as its rule invokes it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from duetime.adapters.memory import (
    MemoryAlerts,
    MemoryProvisionedWorkers,
    MemoryQueue,
    MemoryStore,
)
from duetime.adapters.memory.table_modes import MemoryTableModes
from duetime.domain.clock import ManualClock
from duetime.domain.ids import PARTITIONS
from duetime.domain.models import Team
from duetime.ports import SwitchLimitReached
from duetime.scheduling.poller import Poller, PollerConfig
from duetime.scheduling.prescale import PrescalePolicy, Prescaler, TableModeNotSwitched
from duetime.scheduling.table_modes import TableModePolicy, TableModeSwitcher, decide_table_mode

from ..twin_support import T0, a_job

POLICY = TableModePolicy(busy_runs_per_minute=100, lead_minutes=20, hold_minutes=15, drained_runs=10)
LOOK = timedelta(minutes=5)


class World:
    def __init__(self) -> None:
        self.clock = ManualClock(T0)
        self.store = MemoryStore()
        self.store.put_team(Team(team_id="team-a", max_concurrency=1000))
        self.queue = MemoryQueue(self.clock)
        self.workers = MemoryProvisionedWorkers(self.clock)
        self.tables = MemoryTableModes("provisioned")
        self.switcher = TableModeSwitcher(self.tables, POLICY)
        prescale = PrescalePolicy(worker_starts_per_second=1, on_demand_workers=1, max_workers=8)
        self.prescaler = Prescaler(
            self.store, self.workers, self.queue, self.clock, prescale, tables=self.switcher
        )
        config = PollerConfig(partitions=list(range(PARTITIONS)), preload_lead=None, page_size=1000)
        self.poller = Poller(
            self.store, self.store, self.queue, MemoryAlerts(), self.clock, config, self.store
        )

    def spike_at(self, minutes_from_now: int, runs: int = 150) -> None:
        fire_at = self.clock.now() + timedelta(minutes=minutes_from_now)
        for _ in range(runs):
            self.store.put_job(
                a_job(fire_at, schedule={"cron": f"{fire_at.minute} {fire_at.hour} * * *"}), self.clock.now()
            )

    def looks(self, count: int) -> list[tuple[str, str, str]]:
        """``count`` looks 5 minutes apart: (minutes since T0, the tables' mode after, the action)."""
        seen = []
        for _ in range(count):
            tables = self.prescaler.tick().tables
            assert tables is not None
            minutes = int((self.clock.now() - T0).total_seconds() // 60)
            seen.append((f"+{minutes}", tables["mode_after"], tables["action"]))
            self.clock.advance(LOOK.total_seconds())
        return seen


@pytest.fixture
def world() -> World:
    return World()


def test_tables_go_on_demand_20_to_25_minutes_before_a_forecast_spike_and_back_15_minutes_after_it(
    world: World,
) -> None:
    world.spike_at(42)  # T0 + 42 min: seen once it is within lead + one look (25 minutes)
    before = world.looks(4)  # +0 .. +15
    assert before == [
        ("+0", "provisioned", "stay"),
        ("+5", "provisioned", "stay"),
        ("+10", "provisioned", "stay"),
        ("+15", "provisioned", "stay"),
    ]
    assert world.looks(1) == [("+20", "on_demand", "to_on_demand")]  # 22 minutes ahead
    world.clock.set(T0 + timedelta(minutes=42, seconds=1))
    world.poller.claim()  # the spike's runs are queued ...
    world.queue.delete([m.receipt_handle for m in world.queue.receive(max_messages=10_000)])  # ... and taken
    world.clock.set(T0 + timedelta(minutes=45))
    after = world.looks(5)  # +45 .. +65: the busy minute ended at +43, the hold at +58
    assert after == [
        ("+45", "on_demand", "stay"),
        ("+50", "on_demand", "stay"),
        ("+55", "on_demand", "stay"),
        ("+60", "provisioned", "to_provisioned"),
        ("+65", "provisioned", "stay"),
    ]
    assert world.tables.history == ["on_demand", "provisioned"]


def test_the_workers_still_look_10_minutes_ahead_while_the_tables_look_25(world: World) -> None:
    world.spike_at(22)
    decision = world.prescaler.tick()
    assert decision.tables is not None and decision.tables["action"] == "to_on_demand"
    assert decision.busiest_runs == 0 and decision.provisioned_after == 0  # no worker provisioned yet


def test_tables_stay_on_demand_while_runs_wait_in_the_queue() -> None:
    action = decide_table_mode(POLICY, "on_demand", 0, None, waiting_runs=11, switches_in_last_day=1, now=T0)
    assert action == "stay"
    drained = decide_table_mode(POLICY, "on_demand", 0, None, waiting_runs=10, switches_in_last_day=1, now=T0)
    assert drained == "to_provisioned"


def test_after_a_fourth_switch_in_a_day_the_tables_stay_on_demand_so_no_spike_meets_the_limit() -> None:
    # a fourth switch within 24 hours: going back would leave no switch for the next spike
    assert (
        decide_table_mode(POLICY, "on_demand", 0, None, 0, switches_in_last_day=4, now=T0) == "held_by_limit"
    )
    # and were the tables provisioned by hand meanwhile, a busy minute is not switched for: it is reported
    assert (
        decide_table_mode(POLICY, "provisioned", 500, None, 0, switches_in_last_day=4, now=T0)
        == "held_by_limit"
    )


def test_five_spikes_in_a_day_switch_four_times_and_the_fifth_finds_the_tables_already_on_demand(
    world: World,
) -> None:
    modes = []
    for spike in range(5):
        start = T0 + timedelta(hours=3 * spike)
        world.clock.set(start)
        world.spike_at(22)
        modes += [t for _, t, _ in world.looks(1)]
        world.clock.set(start + timedelta(minutes=22, seconds=1))
        world.poller.claim()
        world.queue.delete([m.receipt_handle for m in world.queue.receive(max_messages=10_000)])
        world.clock.set(start + timedelta(minutes=45))
        world.looks(2)
    assert world.tables.history == ["on_demand", "provisioned"] * 3 + ["on_demand"]
    assert world.tables.mode() == "on_demand"
    assert modes == ["on_demand"] * 5  # every spike met on-demand tables
    assert len(world.tables.switches_to_on_demand(T0)) == 4


def test_the_twin_refuses_a_fifth_switch_to_on_demand_within_24_hours_and_allows_it_after() -> None:
    tables = MemoryTableModes()
    for hour in range(4):
        tables.switch_to_on_demand(T0 + timedelta(hours=hour))
        tables.switch_to_provisioned()
    with pytest.raises(SwitchLimitReached):
        tables.switch_to_on_demand(T0 + timedelta(hours=23))
    assert tables.mode() == "provisioned"
    tables.switch_to_on_demand(T0 + timedelta(hours=24, seconds=1))  # the first has aged out
    assert tables.mode() == "on_demand"


def test_a_refused_switch_fails_the_look_once_the_rest_is_set_and_the_next_look_switches(
    world: World,
) -> None:
    world.tables.refuse = 1
    world.spike_at(22)
    with pytest.raises(TableModeNotSwitched) as refused:  # the invocation fails: PrescalerErrors
        world.prescaler.tick()
    first = refused.value.decision
    assert first.tables is not None
    assert first.tables["error"] == "RuntimeError: refused: the table is being updated"
    assert first.action == "keep"  # the workers' part of the look was done
    assert world.tables.mode() == "provisioned"
    world.clock.advance(LOOK.total_seconds())
    second = world.prescaler.tick()
    assert second.tables is not None and second.tables["action"] == "to_on_demand"
    assert world.tables.mode() == "on_demand"


def test_without_provisioned_tables_the_prescaler_reports_no_table_mode() -> None:
    clock = ManualClock(T0)
    store = MemoryStore()
    prescaler = Prescaler(store, MemoryProvisionedWorkers(clock), MemoryQueue(clock), clock)
    assert prescaler.tick().tables is None
    assert prescaler.horizon_minutes() == 10


def test_a_lead_shorter_than_aws_takes_to_switch_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="lead_minutes"):
        TableModePolicy(lead_minutes=2)


def test_a_new_prescaler_process_holds_the_tables_on_demand_as_long_after_a_switch_as_the_one_that_switched(
    world: World,
) -> None:
    world.spike_at(22)
    world.looks(1)  # switched at +0 for a spike at +22
    fresh = TableModeSwitcher(world.tables, POLICY)  # a new Lambda environment: it saw no spike
    # the switch's horizon (+25) and the hold (15) and the minute itself: back from +41
    assert fresh.look({}, 0, T0 + timedelta(minutes=40)).action == "stay"
    assert fresh.look({}, 0, T0 + timedelta(minutes=41)).action == "to_provisioned"
