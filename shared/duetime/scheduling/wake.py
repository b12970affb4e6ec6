"""Waking a quiet partition group: the API's half of ``duetime.scheduling.quiet``.

A group whose poller found nothing due within the quiet horizon gives its lease back and stops until
EventBridge's next tick (at most a minute away). A job write that makes the job due before the next tick
could have loaded it (create, an edit that reschedules, resume) therefore wakes the job's group:

1. ``wake_poller_group`` counts the wake on the group's lease item (one unconditional UpdateItem), and
2. if the lease, as that write returns it, has no live holder, the group's poller is started at once
   (an asynchronous invocation with ``wake: true``, which returns at once if a holder is there by then).

A holder gives the lease back only if the wake count is still the one it read before it last looked at
the indexes (POLLER_QUIET_UNWOKEN), so a wake either keeps the holder or finds the lease free. A wake that
fails (throttled, the invoke refused) is logged and the write still succeeds: the job is then claimed at
the next tick, late by up to a minute, never lost.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime.domain.ids import partition_of
from duetime.domain.models import Job
from duetime.domain.partitions import group_label, parse_partitions
from duetime.ports import PollerLeaseStore
from duetime.ports.functions import PollerStarter

log = logging.getLogger(__name__)

# How far ahead a quiet group looks before it stops, and so how soon a job must be due for its write to
# wake the group: the next tick (a minute), the next invocation's start, and its preload's lead.
QUIET_HORIZON = timedelta(seconds=90)


def partition_groups(labels: Iterable[str]) -> dict[int, str]:
    """Each partition's group label (as its poller names the lease), from the deployed groups' labels."""
    groups: dict[int, str] = {}
    for label in labels:
        partitions = parse_partitions(label)
        for partition in partitions:
            groups[partition] = group_label(partitions)
    return groups


@dataclass
class GroupWaker:
    """Wakes the group of a job written due soon (module docstring)."""

    leases: PollerLeaseStore
    groups: Mapping[int, str]  # partition -> group label; a partition with no group is never woken
    starter: PollerStarter
    horizon: timedelta = QUIET_HORIZON

    def job_written(self, job: Job, now: datetime) -> bool:
        """Wake the job's group if the job is due within the horizon; whether it started an invocation."""
        fire_at = job.state.next_fire_at
        if job.paused or fire_at is None or fire_at > now + self.horizon:
            return False
        group = self.groups.get(partition_of(job.id))
        if group is None:
            return False
        try:
            lease = self.leases.wake_poller_group(group)
            if not lease.free_at(now):
                return False  # its holder saw the wake: it stays until the job is claimed
            self.starter.start(group)
            return True
        except Exception:
            log.warning("waking poller group %s failed; its next tick claims the job", group, exc_info=True)
            return False
