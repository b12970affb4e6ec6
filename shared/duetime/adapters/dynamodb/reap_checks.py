"""The reap index holds checks, not deadlines: when the reaper looks at a run next.

A run needs the reaper when its lease expires (running: its worker is gone) or its queue deadline passes
(waiting: its message was lost). The index used to hold exactly that instant, so every lease and every
heartbeat moved the run's entry: an index delete and put, 2 write units each time, and the index projected
the run's status, so even a write that left the key alone cost 1 more.

Now the entry is a *check*, an instant never later than the run could need the reaper:

* a run that starts waiting (claimed, re-queued, given back, or waiting to retry) gets the check
  ``min(queue deadline, the instant its message becomes visible + lease_check)``. A worker cannot take the
  lease before the message is visible, and a lease runs ``lease`` from when it is taken, so with
  ``lease_check`` no longer than the workers' lease, no lease taken in that wait expires before the check;
* leases and heartbeats leave the check alone, and the index projects nothing they change (only the run
  id), so they write nothing to it;
* at a check the reaper reads the run, consistently. A run whose lease expired or whose queue deadline
  passed is a candidate, as before. A run still alive gets its next check by a conditional write
  (``LEASE_OUTLIVES_CHECK`` or ``WAIT_OUTLIVES_CHECK``, ``conditions.py``): its lease expiry (running) or
  its next waiting check. A finished run has left the index.

The runs a claim creates together start with one entry for many, a reap ticket (``reap_tickets``), at the
same first check; at that check the runs still alive get entries of their own and go on as below.

So a dead worker's run is found when its lease expires, as before (once its check has moved to the expiry,
one reaper pass later at most), and a run that finishes within ``lease_check`` of its message pays 2 index
writes (in at the claim, out at the result) instead of 4. Only runs still running or waiting at their check
pay 2 more, once a lease length (a long call's heartbeats used to pay them every 20 s). The price: a reaper
pass reads each run at its check (one consistent BatchGetItem per page of entries).

``lease_check`` longer than the workers' lease (a configuration mistake) makes recovery later by the
difference, never lost: the run is still found at its check. And a pass moves at most a page of a shard's
checks: while many runs wait in the queue past their checks (a backlog), a dead worker's run among them is
found when the reaper reaches its check, at worst once the backlog has drained (RELIABILITY.md).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from duetime.domain.models import Run, RunStatus

DEFAULT_LEASE_CHECK = timedelta(seconds=60)  # the workers' default lease (``Settings.lease_seconds``)


def waiting_check(visible_at: datetime, queue_deadline: datetime, lease_check: timedelta) -> datetime:
    """The check of a run that starts waiting: its message is visible from ``visible_at``."""
    return min(queue_deadline, visible_at + lease_check)


def needs_reaper_at(run: Run) -> datetime | None:
    """When ``run`` needs the reaper if nobody acts: its lease expiry while running, its queue deadline while
    waiting; None for a finished run."""
    if run.status is RunStatus.RUNNING:
        return run.lease_expires_at
    if run.status in (RunStatus.QUEUED, RunStatus.RETRY_WAIT):
        return run.queue_deadline
    return None


def next_check(run: Run, now: datetime, lease_check: timedelta) -> datetime:
    """The next check of a run still alive at its check (``needs_reaper_at`` is ahead): a running run's lease
    expiry; a waiting run's next waiting check, its message visible from now or from its retry time."""
    if run.status is RunStatus.RUNNING:
        assert run.lease_expires_at is not None
        return run.lease_expires_at
    assert run.queue_deadline is not None
    visible_at = max(now, run.retry_at) if run.retry_at else now
    return waiting_check(visible_at, run.queue_deadline, lease_check)
