"""Capacity bought ahead: provisioned workers, event pollers and the tables' capacity modes.

A part of ``duetime.ports``: every port, its docstrings the contract every adapter keeps.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol


class ProvisionedWorkers(Protocol):
    """The worker's provisioned concurrency (on AWS: the worker alias's provisioned concurrency config)."""

    def provisioned(self) -> int:
        """The workers requested now (0 when none are provisioned), whether or not all are allocated yet."""
        ...

    def provision(self, workers: int) -> None:
        """Request exactly ``workers`` provisioned workers; 0 removes the provisioning. Raises when the
        platform refuses (e.g. over the account's unreserved concurrency); the caller asks again later."""
        ...


SQS_MIN_POLLERS = 2  # AWS: provisioned mode keeps at least 2 pollers on an SQS event source
SQS_MAX_MINIMUM_POLLERS = 200  # AWS: the largest MinimumPollers (MaximumPollers goes to 2,000)


class ProvisionedEventPollers(Protocol):
    """The worker's event source in provisioned mode (on AWS: the SQS event source mapping's
    ``ProvisionedPollerConfig``). Standard mode is 0 pollers: the event source starts a spike with 5
    concurrent batches and adds up to 300 a minute, capped by its MaximumConcurrency. In provisioned mode at
    least ``minimum`` event pollers are kept (each runs up to 10 concurrent batches), and the event source
    adds up to 1,000 concurrent batches a minute.

    AWS refuses MaximumConcurrency together with provisioned mode, so an implementation removes it when it
    switches on and puts the standard mode's cap back when it switches off."""

    def minimum_pollers(self) -> int:
        """The minimum pollers requested now; 0 in standard mode (whether or not the pollers are up yet:
        AWS does not say how long that takes)."""
        ...

    def provision_pollers(self, minimum: int) -> None:
        """Provisioned mode with at least ``minimum`` pollers (2 or more), or standard mode for 0. Raises when
        the platform refuses; the caller asks again at its next look."""
        ...


# AWS's limit on a table's switches from provisioned to on demand ("Considerations when switching capacity
# modes in DynamoDB"), which every ``TableCapacityModes`` enforces and the switcher plans around.
SWITCHES_TO_ON_DEMAND_PER_DAY = 4


ROLLING_DAY = timedelta(hours=24)


class TableCapacityModes(Protocol):
    """The capacity mode of the installation's tables (jobs, runs, control, and their indexes), switched
    together: ``provisioned`` (capacity units an hour, scaled by auto scaling) or ``on_demand`` (every
    request billed). AWS's limits, which an implementation enforces whatever the platform under it checks
    (DynamoDB Local checks none of them): a table switches from provisioned to on demand at most four
    times in a rolling 24 hours, and back at any time; a switch takes minutes, during which the table keeps
    the throughput it had. Switching back puts each table and index at the capacity it had before it left."""

    def mode(self) -> str:
        """``provisioned`` or ``on_demand``: what the tables are now (or are switching to)."""
        ...

    def switches_to_on_demand(self, since: datetime) -> list[datetime]:
        """When the tables were switched to on demand since ``since``, oldest first."""
        ...

    def switch_to_on_demand(self, now: datetime) -> None:
        """Every table on demand, its provisioned capacities kept for the way back. Raises
        ``SwitchLimitReached`` (nothing switched) when four switches to on demand lie within the 24 hours
        before ``now``; raises when the platform refuses (the caller looks again)."""
        ...

    def switch_to_provisioned(self) -> None:
        """Every table back in provisioned mode at the capacity it had before it was switched to on demand.
        Raises when the platform refuses."""
        ...


class SwitchLimitReached(Exception):
    """Four switches to on demand already lie within the rolling 24 hours (AWS's limit a table)."""
