"""The tables' capacity mode from the forecast: provisioned capacity for the steady load, on demand for a
forecast spike.

Provisioned capacity (scaled by auto scaling at 70% of what is used) bills a write unit a second about a
third of what on demand bills for as many writes (``duetime plan`` prices both, ``capacity.bill``), but it
follows a load minutes behind it: a spike such as the seed's midnight (500,000 runs in a minute, ~38,000 write
units a second on the runs table) would be throttled for as long as auto scaling takes to catch up, and
raising provisioned capacity to the spike's level for the hour it falls in would cost more than the spike's
writes on demand. So with the stack's ``capacity_mode=provisioned`` the prescaler (every 5 minutes) also
looks ``lead`` ahead in the due index, and:

* **to on demand** when a minute within ``lead`` (and the one look after it) holds more runs than
  ``busy_runs_per_minute`` (what the provisioned tables take in a minute, the stack's setting): AWS takes
  "several minutes" to switch a table, keeping its provisioned throughput meanwhile, so the switch is made
  at least ``lead`` before the spike; an on-demand table then takes at once what it took at its previous
  peak, and the warm throughput the stack pre-warms;
* **back to provisioned** once no busy minute lies within ``hold`` behind nor ``lead`` ahead, and the queue
  holds no more than ``drained_runs`` waiting runs; but **never** while four switches to on demand lie
  within the last 24 hours: AWS allows a table four such switches in a rolling day (and the way back at
  any time), so after a fourth spike the tables stay on demand until a switch ages out, and the next spike
  always finds them on demand or able to switch. An installation's own policy never meets the limit.

A spike nobody forecast (jobs written into a minute less than ``lead`` before it) meets provisioned
capacity: its claims are throttled and retried, and its runs start late, never lost (the due index keeps
each job until its claim succeeds); ``capacity.bill.unforeseen_spike_delay`` models how late.

Sources: "Considerations when switching capacity modes in DynamoDB", Amazon DynamoDB Developer Guide,
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-switching-capacity-modes.html (four
switches from provisioned to on demand in a rolling 24 hours, back at any time; the switch "can take several
minutes" and delivers the previously provisioned throughput meanwhile; on a global table, as TableV2 makes,
auto scaling comes back with AWS's recommended settings after a switch back).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from duetime.domain.timeutil import minute_bucket
from duetime.ports import ROLLING_DAY, SWITCHES_TO_ON_DEMAND_PER_DAY, TableCapacityModes

log = logging.getLogger(__name__)

TableModeAction = Literal["to_on_demand", "to_provisioned", "stay", "held_by_limit"]


class TableModePolicy(BaseModel):
    """When the tables switch (module docstring)."""

    model_config = ConfigDict(frozen=True)

    busy_runs_per_minute: int = Field(default=20_000, ge=1)
    lead_minutes: int = Field(default=20, ge=5, le=50)
    hold_minutes: int = Field(default=15, ge=0, le=120)
    drained_runs: int = Field(default=10_000, ge=0)
    look_every_minutes: int = Field(default=5, ge=1)  # the prescaler's rule

    @property
    def horizon_minutes(self) -> int:
        """How far ahead the forecast must reach: the lead, and the look after it."""
        return self.lead_minutes + self.look_every_minutes


@dataclass(frozen=True)
class TableModeDecision:
    mode_before: str
    mode_after: str
    action: TableModeAction
    busiest_ahead: int
    switches_in_last_day: int
    error: str | None = None

    def summary(self) -> dict[str, Any]:
        return asdict(self)


def busy_ahead(
    policy: TableModePolicy, forecast: Mapping[str, int], now: datetime
) -> tuple[int, datetime | None]:
    """The most runs of one minute from ``now``'s to ``horizon_minutes`` ahead (forecast: minute bucket ->
    due rows), and the start of the latest busy minute among them (None: none)."""
    most, latest = 0, None
    for m in range(policy.horizon_minutes + 1):
        minute = (now + timedelta(minutes=m)).replace(second=0, microsecond=0)
        runs = forecast.get(minute_bucket(minute), 0)
        most = max(most, runs)
        if runs > policy.busy_runs_per_minute:
            latest = minute
    return most, latest


def decide_table_mode(
    policy: TableModePolicy,
    mode: str,
    busiest_ahead: int,
    last_busy: datetime | None,
    waiting_runs: int,
    switches_in_last_day: int,
    now: datetime,
) -> TableModeAction:
    """What to do with the tables' mode: ``to_on_demand`` ahead of a busy minute; ``to_provisioned`` once
    none is near and the queue is drained; ``held_by_limit`` when the way back would leave no switch for a
    next spike (four in the last 24 hours), or the way there is refused by it; else ``stay``.
    ``last_busy``: the start of the latest busy minute seen (None: none remembered); the hold counts from its
    end."""
    busy = busiest_ahead > policy.busy_runs_per_minute
    if mode == "provisioned":
        if not busy:
            return "stay"
        if switches_in_last_day >= SWITCHES_TO_ON_DEMAND_PER_DAY:
            return "held_by_limit"
        return "to_on_demand"
    recent = last_busy is not None and now - last_busy < timedelta(minutes=1 + policy.hold_minutes)
    if busy or recent or waiting_runs > policy.drained_runs:
        return "stay"
    if switches_in_last_day >= SWITCHES_TO_ON_DEMAND_PER_DAY:
        return "held_by_limit"
    return "to_provisioned"


class TableModeSwitcher:
    """Switches ``tables`` as ``decide_table_mode`` says, one look at a time (the prescaler's). Remembers the
    latest busy minute it saw (a look sees only ahead; the hold counts from that minute's end). A new
    process that finds the tables on demand takes the latest switch's horizon as that minute (the spike
    it switched for came no later)."""

    def __init__(self, tables: TableCapacityModes, policy: TableModePolicy | None = None) -> None:
        self.tables = tables
        self.policy = policy or TableModePolicy()
        self.last_busy: datetime | None = None

    def look(self, forecast: Mapping[str, int], waiting_runs: int, now: datetime) -> TableModeDecision:
        """Read the mode and the switches of the last 24 hours, decide, switch. A refusal is logged and
        returned as ``error`` (the next look decides again); nothing raises."""
        busiest, latest_busy = busy_ahead(self.policy, forecast, now)
        if latest_busy is not None and (self.last_busy is None or latest_busy > self.last_busy):
            self.last_busy = latest_busy
        try:
            mode = self.tables.mode()
            recent = self.tables.switches_to_on_demand(now - ROLLING_DAY)
            switches = len(recent)
            if self.last_busy is None and mode == "on_demand" and recent:
                # a process that saw no spike (a new one): the latest switch's spike came at most a horizon
                # after it, and the hold counts from there
                self.last_busy = recent[-1] + timedelta(minutes=self.policy.horizon_minutes)
            action = decide_table_mode(
                self.policy, mode, busiest, self.last_busy, waiting_runs, switches, now
            )
            if action == "to_on_demand":
                self.tables.switch_to_on_demand(now)
            elif action == "to_provisioned":
                self.tables.switch_to_provisioned()
        except (
            Exception
        ) as exc:  # SwitchLimitReached, a platform's refusal  # the next look (5 minutes) decides again
            error = f"{type(exc).__name__}: {exc}"
            log.warning("the tables' capacity mode was not switched (%s)", error)
            return TableModeDecision("unknown", "unknown", "stay", busiest, -1, error)
        after = {"to_on_demand": "on_demand", "to_provisioned": "provisioned"}.get(action, mode)
        return TableModeDecision(mode, after, action, busiest, switches + (action == "to_on_demand"))
