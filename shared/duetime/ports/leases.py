"""The pollers' group leases.

A part of ``duetime.ports``: every port, its docstrings the contract every adapter keeps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class PollerLease:
    """A partition group's poller lease as the store holds it (one item per group;
    ``duetime.scheduling.poller_lease`` describes the life of the invocations that share it). Instants are the
    store's clock."""

    group: str
    holder: str | None = None  # the invocation that claims the group's partitions; None: nobody
    term: int = 0  # +1 each time the lease changes hands (a fencing token, and a count of holders)
    since: datetime | None = None  # the holder claims from here (the agreed second, after a handover)
    expires_at: datetime | None = None  # unless renewed before then; after it, anyone may take the lease
    successor: str | None = None  # the one registered standby invocation
    handover_at: datetime | None = None  # a whole second the holder offered the lease to the successor at
    wakes: int = 0  # +1 each time a write made something due soon in the group (``duetime.scheduling.quiet``)

    def free_at(self, now: datetime) -> bool:
        """Nobody holds the lease at ``now``: never held, given back, or expired."""
        return self.holder is None or self.expires_at is None or self.expires_at < now


class PollerLeaseStore(Protocol):
    """The poller leases: who claims a partition group's due jobs, and from which instant.

    At any instant at most one invocation may claim a group: its holder, from ``since`` until the lease
    expires or until an accepted ``handover_at``. Every change below is one conditional write that returns
    the lease as it stands after the write, or None when the write's condition did not hold (a lost race:
    the caller reads the lease and acts on what it finds). ``now`` and every instant are the store's clock;
    a lease's expiry is judged by the ``now`` of the invocation that wants it.
    """

    def read_poller_lease(self, group: str) -> PollerLease:
        """The group's lease, read consistently (a group never leased has no holder and term 0)."""
        ...

    def read_poller_leases(self, groups: Sequence[str]) -> dict[str, PollerLease]:
        """Several leases at once (a holder's watch of its helpers' slices), each as ``read_poller_lease``
        reads it, by name: one consistent read of them all, not one each."""
        ...

    def acquire_poller_lease(self, group: str, me: str, now: datetime, until: datetime) -> PollerLease | None:
        """Take a free or expired lease (condition POLLER_LEASE_FREE): ``me`` holds it from ``now`` until
        ``until``, the term goes up by one, and any registered successor or open offer is cleared."""
        ...

    def renew_poller_lease(self, group: str, me: str, now: datetime, until: datetime) -> PollerLease | None:
        """Extend ``me``'s lease to ``until``, only while ``me`` holds it unexpired (POLLER_LEASE_HELD)."""
        ...

    def release_poller_lease(self, group: str, me: str) -> bool:
        """Give the lease back if ``me`` still holds it (POLLER_LEASE_MINE): it is free at once."""
        ...

    def register_poller_successor(self, group: str, me: str) -> PollerLease | None:
        """Register ``me`` as the one standby that takes over from the holder (POLLER_SUCCESSOR_VACANT)."""
        ...

    def withdraw_poller_successor(self, group: str, me: str) -> bool:
        """Unregister ``me`` as successor, with any offer made to it (POLLER_SUCCESSOR_IS_ME)."""
        ...

    def offer_poller_lease(
        self, group: str, me: str, successor: str, at: datetime, now: datetime, until: datetime
    ) -> PollerLease | None:
        """Hand over: the holder ``me`` offers the lease to the registered ``successor`` from the whole second
        ``at`` and renews its own lease to ``until`` (POLLER_HANDOVER_OFFERABLE). Until the offer is
        withdrawn, the holder claims nothing at or after ``at``."""
        ...

    def accept_poller_lease(
        self, group: str, me: str, holder: str, at: datetime, until: datetime
    ) -> PollerLease | None:
        """The successor ``me`` accepts the standing offer (POLLER_HANDOVER_OFFERED): it holds the lease
        from ``at`` (``since``) until ``until``, the term goes up by one, and the offer is cleared."""
        ...

    def withdraw_poller_offer(self, group: str, me: str, at: datetime) -> PollerLease | None:
        """The holder takes back an offer nobody accepted (POLLER_HANDOVER_UNANSWERED); the successor is
        unregistered too, and the holder keeps its lease."""
        ...

    def wake_poller_group(self, group: str) -> PollerLease:
        """Count a wake: a job write made something due soon in the group (``wakes`` + 1, unconditional).
        The lease as it stands after: when nobody holds it, the waker starts an invocation."""
        ...

    def release_quiet_poller_lease(self, group: str, me: str, wakes_seen: int) -> bool:
        """Give the lease back because the group is quiet, only if ``me`` still holds it and nobody woke the
        group since the holder read ``wakes_seen`` (POLLER_QUIET_UNWOKEN). Serialised with
        ``wake_poller_group`` on the one item: either the wake comes first and the holder stays, or the
        release comes first and the waker finds the lease free."""
        ...
