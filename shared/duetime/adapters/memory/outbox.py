"""The twin's notification outbox (``ports.NotificationOutbox``), each write under the condition
``adapters/dynamodb/outbox.py`` names; instants to the second, as DynamoDB stores them."""

from __future__ import annotations

import dataclasses
from datetime import datetime

from duetime.adapters.memory.stored import Tables, maybe_second, to_second
from duetime.ports import Notice, PendingNotification


def _key(job_id: str, event: str, channel: str) -> tuple[str, str, str]:
    return (job_id, event, channel)


class MemoryOutbox(Tables):
    """``NotificationOutbox`` in memory (mixed into ``MemoryStore``)."""

    _outbox: dict[tuple[str, str, str], PendingNotification]

    def enqueue(self, notice: Notice) -> None:
        key = _key(notice.job_id, notice.event, notice.channel)
        at = to_second(notice.at)
        with self.lock:
            group = self._outbox.get(key)
            pending = group.pending if group else 0
            self._outbox[key] = PendingNotification(
                job_id=notice.job_id,
                event=notice.event,
                channel=notice.channel,
                team=notice.team,
                pending=pending + 1,
                first_at=group.first_at if group and pending > 0 else at,
                last_at=at,
                run_id=notice.run_id,
                attempt=notice.attempt,
                detail=notice.detail,
                due_at=group.due_at if group and group.due_at is not None else at,
                attempts=group.attempts if group else 0,
                sequence=group.sequence if group else 0,
                sending=group.sending if group else 0,
            )

    def due_notifications(self, now: datetime, limit: int) -> list[PendingNotification]:
        cutoff = to_second(now)
        with self.lock:
            due = [g for g in self._outbox.values() if g.due_at is not None and g.due_at < cutoff]
        return sorted(due, key=lambda g: (g.due_at or cutoff, g.job_id, g.event))[:limit]

    def _change(self, taken: PendingNotification, **changes: object) -> PendingNotification | None:
        """One write under NOTICE_DUE_AS_READ: the group's due time is still the one ``taken`` read."""
        key = _key(taken.job_id, taken.event, taken.channel)
        with self.lock:
            group = self._outbox.get(key)
            if group is None or group.due_at != taken.due_at:
                return None
            changed = dataclasses.replace(group, **changes)  # type: ignore[arg-type]
            self._outbox[key] = changed
            return changed

    def take(self, group: PendingNotification, until: datetime) -> PendingNotification | None:
        key = _key(group.job_id, group.event, group.channel)
        with self.lock:  # sending = if_not_exists(sending, pending)
            stored = self._outbox.get(key)
            sending = (stored.sending or stored.pending) if stored else 0
            return self._change(group, due_at=to_second(until), sending=sending)

    def delivered(self, taken: PendingNotification, quiet_until: datetime) -> bool:
        return self._settle(taken, due_at=to_second(quiet_until), sequence=taken.sequence + 1)

    def retry_later(self, taken: PendingNotification, due_at: datetime) -> bool:
        return self._change(taken, due_at=maybe_second(due_at), attempts=taken.attempts + 1) is not None

    def give_up(self, taken: PendingNotification) -> bool:
        return self._settle(taken, due_at=None)

    def _settle(self, taken: PendingNotification, **changes: object) -> bool:
        """The taken group's ``sending`` notices subtracted (those that came since stay), attempts reset."""
        key = _key(taken.job_id, taken.event, taken.channel)
        with self.lock:
            group = self._outbox.get(key)
            if group is None or group.due_at != taken.due_at:
                return False
            self._outbox[key] = dataclasses.replace(
                group,
                pending=group.pending - group.sending,
                sending=0,
                attempts=0,
                **changes,  # type: ignore[arg-type]
            )
            return True

    def rest(self, taken: PendingNotification) -> bool:
        key = _key(taken.job_id, taken.event, taken.channel)
        with self.lock:
            group = self._outbox.get(key)
            if group is None or group.due_at != taken.due_at or group.pending != 0:  # NOTICE_NONE_PENDING
                return False
            self._outbox[key] = dataclasses.replace(group, due_at=None)
            return True
