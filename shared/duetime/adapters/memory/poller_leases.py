"""The twin's poller leases (``PollerLeaseStore``): one record per partition group, each change one step
under the lock with the condition ``conditions.py`` names (POLLER_LEASE_FREE ... POLLER_HANDOVER_UNANSWERED).

Instants are kept to the millisecond (truncated) and compared as kept, as the DynamoDB store compares its
fixed-width millisecond strings. A condition on a field the lease lacks is false, as in DynamoDB.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime

from duetime.adapters.memory.stored import Tables, to_millisecond
from duetime.ports import PollerLease


def _before(stored: datetime | None, now: datetime) -> bool:
    return stored is not None and stored < to_millisecond(now)


def _after(stored: datetime | None, now: datetime) -> bool:
    return stored is not None and stored > to_millisecond(now)


def _taken(lease: PollerLease, me: str, since: datetime, until: datetime) -> PollerLease:
    """The lease in new hands: ``me`` holds it from ``since`` to ``until`` in the next term, with no
    successor and no open offer."""
    return replace(
        lease,
        holder=me,
        since=to_millisecond(since),
        expires_at=to_millisecond(until),
        term=lease.term + 1,
        successor=None,
        handover_at=None,
    )


class MemoryPollerLeases(Tables):
    """``PollerLeaseStore`` in memory (mixed into ``MemoryStore``)."""

    _poller_leases: dict[str, PollerLease]

    def _write(
        self,
        group: str,
        condition: Callable[[PollerLease], bool],
        change: Callable[[PollerLease], PollerLease],
    ) -> PollerLease | None:
        with self.lock:
            lease = self._poller_leases.get(group, PollerLease(group))
            if not condition(lease):
                return None
            self._poller_leases[group] = change(lease)
            return self._poller_leases[group]

    def read_poller_lease(self, group: str) -> PollerLease:
        with self.lock:
            return self._poller_leases.get(group, PollerLease(group))

    def read_poller_leases(self, groups: Sequence[str]) -> dict[str, PollerLease]:
        with self.lock:
            return {group: self._poller_leases.get(group, PollerLease(group)) for group in groups}

    def acquire_poller_lease(self, group: str, me: str, now: datetime, until: datetime) -> PollerLease | None:
        return self._write(
            group,
            lambda lease: lease.holder is None or _before(lease.expires_at, now),  # POLLER_LEASE_FREE
            lambda lease: _taken(lease, me, now, until),
        )

    def renew_poller_lease(self, group: str, me: str, now: datetime, until: datetime) -> PollerLease | None:
        return self._write(
            group,
            lambda lease: lease.holder == me and _after(lease.expires_at, now),  # POLLER_LEASE_HELD
            lambda lease: replace(lease, expires_at=to_millisecond(until)),
        )

    def release_poller_lease(self, group: str, me: str) -> bool:
        released = self._write(
            group,
            lambda lease: lease.holder == me,  # POLLER_LEASE_MINE
            lambda lease: replace(lease, holder=None, since=None, expires_at=None, handover_at=None),
        )
        return released is not None

    def register_poller_successor(self, group: str, me: str) -> PollerLease | None:
        return self._write(
            group,
            lambda lease: (  # POLLER_SUCCESSOR_VACANT
                lease.holder is not None and lease.holder != me and lease.successor in (None, me)
            ),
            lambda lease: replace(lease, successor=me),
        )

    def withdraw_poller_successor(self, group: str, me: str) -> bool:
        withdrawn = self._write(
            group,
            lambda lease: lease.successor == me,  # POLLER_SUCCESSOR_IS_ME
            lambda lease: replace(lease, successor=None, handover_at=None),
        )
        return withdrawn is not None

    def offer_poller_lease(
        self, group: str, me: str, successor: str, at: datetime, now: datetime, until: datetime
    ) -> PollerLease | None:
        return self._write(
            group,
            lambda lease: (  # POLLER_HANDOVER_OFFERABLE
                lease.holder == me
                and _after(lease.expires_at, now)
                and lease.successor == successor
                and lease.handover_at is None
            ),
            lambda lease: replace(lease, handover_at=to_millisecond(at), expires_at=to_millisecond(until)),
        )

    def accept_poller_lease(
        self, group: str, me: str, holder: str, at: datetime, until: datetime
    ) -> PollerLease | None:
        return self._write(
            group,
            lambda lease: (  # POLLER_HANDOVER_OFFERED
                lease.holder == holder and lease.successor == me and lease.handover_at == to_millisecond(at)
            ),
            lambda lease: _taken(lease, me, at, until),
        )

    def withdraw_poller_offer(self, group: str, me: str, at: datetime) -> PollerLease | None:
        return self._write(
            group,
            lambda lease: lease.holder == me and lease.handover_at == to_millisecond(at),  # UNANSWERED
            lambda lease: replace(lease, handover_at=None, successor=None),
        )

    def wake_poller_group(self, group: str) -> PollerLease:
        woken = self._write(group, lambda lease: True, lambda lease: replace(lease, wakes=lease.wakes + 1))
        assert woken is not None
        return woken

    def release_quiet_poller_lease(self, group: str, me: str, wakes_seen: int) -> bool:
        released = self._write(
            group,
            lambda lease: lease.holder == me and lease.wakes == wakes_seen,  # POLLER_QUIET_UNWOKEN
            lambda lease: replace(lease, holder=None, since=None, expires_at=None, handover_at=None),
        )
        return released is not None
