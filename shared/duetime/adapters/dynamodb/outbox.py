"""The notification outbox in the runs table (``ports.NotificationOutbox``,
``duetime.execution.notifications``).

One item per (job, event, channel): key ``~notify-<job id>`` / ``<event>#<channel id>``, holding the pending
count, the count of the notification being delivered (``sending``), the first and latest notice, the delivery
attempts and the notifications ``delivered`` so far. While it
is due it sits in the reap index under the shard ``notify`` at ``reap_at`` = its due time (one shard for the
installation: notices are rare, and every poller group reads it with one Query a reap pass). Its ``ttl``
moves 30 days past its latest notice.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from duetime.adapters.dynamodb import conditions as c
from duetime.adapters.dynamodb.codec import Item, number_attribute, string_attribute, time_attribute
from duetime.adapters.dynamodb.conditional import conditional_write
from duetime.adapters.dynamodb.reads import batch_get
from duetime.adapters.dynamodb.store_part import StorePart
from duetime.adapters.dynamodb.tables import REAP_INDEX
from duetime.domain.timeutil import parse_iso_z
from duetime.ports import Notice, PendingNotification
from duetime.ports.notifications import channel_id

KEY_PREFIX = "~notify-"
SHARD = "notify"
KEEP = timedelta(days=30)


def _key(job_id: str, event: str, channel: str) -> Item:
    return {
        "job_id": string_attribute(KEY_PREFIX + job_id),
        "occurrence": string_attribute(f"{event}#{channel_id(channel)}"),
    }


def _group(item: Item) -> PendingNotification:
    last_at = parse_iso_z(item["last_at"]["S"])
    return PendingNotification(
        job_id=item["job_id"]["S"].removeprefix(KEY_PREFIX),
        event=item["event"]["S"],
        channel=item["channel"]["S"],
        team=item["team"]["S"],
        pending=int(item["pending"]["N"]),
        first_at=parse_iso_z(item["first_at"]["S"]) if "first_at" in item else last_at,
        last_at=last_at,
        run_id=item["last_run_id"]["S"],
        attempt=int(item["attempt"]["N"]),
        detail=item["detail"]["S"],
        due_at=parse_iso_z(item["reap_at"]["S"]) if "reap_at" in item else None,
        attempts=int(item.get("attempts", {"N": "0"})["N"]),
        sequence=int(item.get("delivered", {"N": "0"})["N"]),
        sending=int(item.get("sending", {"N": "0"})["N"]),
    )


class DynamoOutbox(StorePart):
    """``NotificationOutbox`` on DynamoDB (mixed into ``DynamoStore``)."""

    def enqueue(self, notice: Notice) -> None:
        self.client.update_item(
            TableName=self.names.runs,
            Key=_key(notice.job_id, notice.event, notice.channel),
            UpdateExpression=(
                "SET team = :team, event = :event, channel = :channel, last_at = :at, last_run_id = :run, "
                "attempt = :attempt, detail = :detail, #ttl = :ttl, first_at = if_not_exists(first_at, :at), "
                "reap_shard = :shard, reap_at = if_not_exists(reap_at, :at) ADD pending :one"
            ),
            ExpressionAttributeNames={"#ttl": "ttl"},
            ExpressionAttributeValues={
                ":team": string_attribute(notice.team),
                ":event": string_attribute(notice.event),
                ":channel": string_attribute(notice.channel),
                ":at": time_attribute(notice.at),
                ":run": string_attribute(notice.run_id),
                ":attempt": number_attribute(notice.attempt),
                ":detail": string_attribute(notice.detail[:1024] or "-"),
                ":ttl": number_attribute(int((notice.at + KEEP).timestamp())),
                ":shard": string_attribute(SHARD),
                ":one": number_attribute(1),
            },
        )

    def due_notifications(self, now: datetime, limit: int) -> list[PendingNotification]:
        response = self.client.query(
            TableName=self.names.runs,
            IndexName=REAP_INDEX,
            KeyConditionExpression="reap_shard = :shard AND reap_at < :now",
            ExpressionAttributeValues={":shard": string_attribute(SHARD), ":now": time_attribute(now)},
            Limit=limit,
        )
        keys = [{"job_id": e["job_id"], "occurrence": e["occurrence"]} for e in response.get("Items", [])]
        items = batch_get(self.client, self.names.runs, keys, consistent=True) if keys else []
        due = [
            _group(item)
            for item in items
            if "reap_at" in item and item["reap_at"]["S"] < time_attribute(now)["S"]
        ]
        return sorted(due, key=lambda g: (g.due_at or now, g.job_id, g.event))

    def take(self, group: PendingNotification, until: datetime) -> PendingNotification | None:
        update = "SET reap_at = :until, sending = if_not_exists(sending, pending)"
        item = self._write(group, update, {":until": time_attribute(until)}, returns=True)
        return _group(item) if item is not None else None

    def delivered(self, taken: PendingNotification, quiet_until: datetime) -> bool:
        update = (
            "SET reap_at = :quiet, attempts = :zero ADD pending :minus, delivered :one "
            "REMOVE first_at, sending"
        )
        values = {
            ":quiet": time_attribute(quiet_until),
            ":zero": number_attribute(0),
            ":minus": number_attribute(-taken.sending),
            ":one": number_attribute(1),
        }
        return self._write(taken, update, values) is not None

    def retry_later(self, taken: PendingNotification, due_at: datetime) -> bool:
        return (
            self._write(
                taken,
                "SET reap_at = :due ADD attempts :one",
                {":due": time_attribute(due_at), ":one": number_attribute(1)},
            )
            is not None
        )

    def give_up(self, taken: PendingNotification) -> bool:
        update = "SET attempts = :zero ADD pending :minus REMOVE reap_at, reap_shard, first_at, sending"
        return (
            self._write(
                taken, update, {":zero": number_attribute(0), ":minus": number_attribute(-taken.sending)}
            )
            is not None
        )

    def rest(self, taken: PendingNotification) -> bool:
        update = "REMOVE reap_at, reap_shard, sending"
        return (
            self._write(taken, update, {":zero": number_attribute(0)}, condition=c.NOTICE_NONE_PENDING)
            is not None
        )

    def _write(
        self,
        group: PendingNotification,
        update: str,
        values: Item,
        condition: c.Condition = c.NOTICE_DUE_AS_READ,
        returns: bool = False,
    ) -> Item | None:
        """One conditional update of a group whose due time is still ``group.due_at``: the item after it
        (``returns``) or an empty one; None on a lost race."""
        assert group.due_at is not None, "only a due group is written by a deliverer"
        response = conditional_write(
            self.client.update_item,
            TableName=self.names.runs,
            Key=_key(group.job_id, group.event, group.channel),
            UpdateExpression=update,
            ConditionExpression=condition.expression,
            ExpressionAttributeValues={**values, ":seen": time_attribute(group.due_at)},
            ReturnValues="ALL_NEW" if returns else "NONE",
        )
        return None if response is None else response.get("Attributes", {})
