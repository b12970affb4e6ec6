"""The reconciler's reads on DynamoDB (``WaitingRuns``) and its record of reports (``ReconcilerRecord``):
control-table items under the partition key ``reconciler``, sorted by the report's instant, each with its
figures; ``ttl`` forgets one a day after it was written. A report is one unconditional PutItem (a tick
writes its own instant; nothing is guarded), so no condition is named for it."""

from __future__ import annotations

from datetime import datetime, timedelta

from duetime.adapters.dynamodb.codec import (
    Item,
    item_to_run,
    number_attribute,
    reap_shard,
    run_key,
    stamped,
    string_attribute,
    time_attribute,
)
from duetime.adapters.dynamodb.reads import batch_get
from duetime.adapters.dynamodb.reap_tickets import is_ticket, listed_run_ids
from duetime.adapters.dynamodb.store_part import StorePart
from duetime.adapters.dynamodb.tables import REAP_INDEX, RUN_TTL_ATTRIBUTE
from duetime.domain.models import RunStatus
from duetime.domain.timeutil import parse_iso_z
from duetime.ports import ReconcilerReport

RECONCILER_PK = "reconciler"
REPORTS_KEPT_FOR = timedelta(days=1)


class DynamoReconciler(StorePart):
    """``WaitingRuns`` and ``ReconcilerRecord`` (mixed into ``DynamoStore``)."""

    def oldest_queued_fire(self, partition: int, limit: int) -> datetime | None:
        """One Query of the reap index (``Limit``), one BatchGetItem of the runs and tickets it names, and
        one of the runs those tickets list; eventually consistent reads throughout."""
        response = self.client.query(
            TableName=self.names.runs,
            IndexName=REAP_INDEX,
            KeyConditionExpression="reap_shard = :shard",
            ExpressionAttributeValues={":shard": string_attribute(reap_shard(partition))},
            Limit=limit,
        )
        keys = [{"job_id": e["job_id"], "occurrence": e["occurrence"]} for e in response.get("Items", [])]
        if not keys:
            return None
        items = batch_get(self.client, self.names.runs, keys)
        listed = [run_key(run_id) for item in items if is_ticket(item) for run_id in listed_run_ids(item)]
        runs = [item for item in items if not is_ticket(item)]
        if listed:
            runs += [
                item for item in batch_get(self.client, self.names.runs, listed) if "reap_at" not in item
            ]
        fires = [run.fire_at for run in map(item_to_run, runs) if run.status is RunStatus.QUEUED]
        return min(fires, default=None)

    def record_reconciliation(self, report: ReconcilerReport) -> None:
        item: Item = {
            "pk": string_attribute(RECONCILER_PK),
            "sk": time_attribute(report.at),
            "figures": {"M": {name: {"N": repr(float(v))} for name, v in report.values.items()}},
            RUN_TTL_ATTRIBUTE: number_attribute(int((report.at + REPORTS_KEPT_FOR).timestamp())),
        }
        self.client.put_item(TableName=self.names.control, Item=stamped(item, self.write_format()))

    def recent_reconciliations(self, limit: int) -> list[ReconcilerReport]:
        response = self.client.query(
            TableName=self.names.control,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": string_attribute(RECONCILER_PK)},
            ScanIndexForward=False,
            Limit=limit,
        )
        return [item_to_report(item) for item in response.get("Items", [])]


def item_to_report(item: Item) -> ReconcilerReport:
    """A report as stored; a figure that is not a number (none is, so far) is left out, not a failed read."""
    figures = item.get("figures", {}).get("M", {})
    return ReconcilerReport(
        parse_iso_z(item["sk"]["S"]), {name: float(v["N"]) for name, v in figures.items() if "N" in v}
    )
