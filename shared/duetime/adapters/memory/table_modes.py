"""``MemoryTableModes``: the twin of the tables' capacity mode (``duetime.ports.TableCapacityModes``), with
AWS's limit of four switches to on demand in a rolling 24 hours enforced as the DynamoDB adapter enforces
it. A switch is instant (on AWS it takes minutes)."""

from __future__ import annotations

import threading
from datetime import datetime

from duetime.ports import ROLLING_DAY, SWITCHES_TO_ON_DEMAND_PER_DAY, SwitchLimitReached, TableCapacityModes


class MemoryTableModes:
    """Starts in ``mode``; ``refuse`` makes the next ``refuse`` switches fail as AWS may (the table being
    updated), changing nothing."""

    def __init__(self, mode: str = "provisioned") -> None:
        self._mode = mode
        self._switches: list[datetime] = []
        self._lock = threading.Lock()
        self.refuse = 0
        self.history: list[str] = []  # every mode switched to, in order

    def mode(self) -> str:
        with self._lock:
            return self._mode

    def switches_to_on_demand(self, since: datetime) -> list[datetime]:
        with self._lock:
            return [at for at in self._switches if at >= since]

    def switch_to_on_demand(self, now: datetime) -> None:
        with self._lock:
            recent = [at for at in self._switches if at > now - ROLLING_DAY]
            if len(recent) >= SWITCHES_TO_ON_DEMAND_PER_DAY:
                raise SwitchLimitReached(f"{len(recent)} switches to on demand in the last 24 hours")
            self._refused()
            self._switches.append(now)
            self._mode = "on_demand"
            self.history.append("on_demand")

    def switch_to_provisioned(self) -> None:
        with self._lock:
            self._refused()
            self._mode = "provisioned"
            self.history.append("provisioned")

    def _refused(self) -> None:
        if self.refuse:
            self.refuse -= 1
            raise RuntimeError("refused: the table is being updated")


def _implements_the_port(tables: MemoryTableModes) -> TableCapacityModes:
    """Never called: mypy checks here that the twin keeps ``TableCapacityModes``' signature."""
    return tables
