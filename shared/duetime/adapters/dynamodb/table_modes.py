"""The tables' capacity mode on DynamoDB: ``duetime.ports.TableCapacityModes`` by UpdateTable, with a log of
the switches in the control table.

The log is one item, ``("table-modes", "table-modes")``: ``switches`` (the times the tables were switched to
on demand, ISO 8601, the last 24 hours' kept), ``switches_made`` (a count that only grows: the write's
condition), the ``capacities`` each table and index had when they left provisioned mode (read with
DescribeTable just before), and ``fmt`` (the installation's stored format, as every item). It is
written *before* the tables are switched, under ``TABLE_MODES_AS_READ``: a look that lost the race
switches nothing. A switch that then fails leaves a switch counted that did not happen: the limit is kept
on the safe side.

DynamoDB Local takes BillingMode changes but checks none of AWS's limits (six switches a minute pass), and
keeps a GSI's throughput through on-demand mode, refusing an update that "equals the current value": the
way back sends only what differs from what DescribeTable shows (on AWS an on-demand table's indexes show 0,
so all of them).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from duetime.adapters.dynamodb import conditions as c
from duetime.adapters.dynamodb.codec import Item, stamped
from duetime.adapters.dynamodb.conditional import lost_race
from duetime.adapters.dynamodb.tables import TableNames
from duetime.domain.stored_format import FORMAT
from duetime.ports import SwitchLimitReached

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

LOG_KEY = {"pk": {"S": "table-modes"}, "sk": {"S": "table-modes"}}
SWITCHES_PER_DAY = 4  # AWS: provisioned -> on demand, a table, in a rolling 24 hours
ROLLING_DAY = timedelta(hours=24)
MODES = {"PROVISIONED": "provisioned", "PAY_PER_REQUEST": "on_demand"}


class DynamoTableModes:
    """Implements ``duetime.ports.TableCapacityModes`` for the jobs, runs and control tables of ``names``."""

    def __init__(
        self, client: Any, names: TableNames, write_format: Callable[[], int] = lambda: FORMAT
    ) -> None:
        self.client = client
        self.names = names
        self.write_format = write_format
        self.tables = [names.jobs, names.runs, names.control]

    def mode(self) -> str:
        return self._mode_of(self.names.runs)

    def _mode_of(self, name: str) -> str:
        table = self.client.describe_table(TableName=name)["Table"]
        return MODES[table.get("BillingModeSummary", {}).get("BillingMode", "PROVISIONED")]

    def switches_to_on_demand(self, since: datetime) -> list[datetime]:
        switches, _, _ = self._read_log()
        return [at for at in switches if at >= since]

    def switch_to_on_demand(self, now: datetime) -> None:
        switches, made, _ = self._read_log()
        recent = [at for at in switches if at > now - ROLLING_DAY]
        if len(recent) >= SWITCHES_PER_DAY:
            raise SwitchLimitReached(
                f"{len(recent)} switches to on demand since {(now - ROLLING_DAY).isoformat()}: AWS allows "
                f"{SWITCHES_PER_DAY} a table in a rolling 24 hours"
            )
        provisioned = [name for name in self.tables if self._mode_of(name) == "provisioned"]
        kept = self._read_log()[2]
        capacities = {name: self._capacities(name) for name in provisioned}
        self._write_log([*recent, now], made, {**kept, **capacities})
        for name in provisioned:  # a table a failed look switched already is left as it is
            self.client.update_table(TableName=name, BillingMode="PAY_PER_REQUEST")

    def switch_to_provisioned(self) -> None:
        _, _, capacities = self._read_log()
        for name in self.tables:
            if self._mode_of(name) == "provisioned":  # switched back by a look that failed further on
                continue
            kept = capacities.get(name)
            if kept is None:
                raise RuntimeError(f"no capacity kept for {name}: it was not switched by duetime")
            self._back_to_provisioned(name, kept)

    def _back_to_provisioned(self, name: str, kept: dict[str, Any]) -> None:
        """``name`` in provisioned mode at ``kept`` (its and its indexes' units), sending the indexes whose
        throughput differs from what DescribeTable shows (module docstring)."""
        table = self.client.describe_table(TableName=name)["Table"]
        shown = {
            index["IndexName"]: _units(index.get("ProvisionedThroughput", {}))
            for index in table.get("GlobalSecondaryIndexes", [])
        }
        updates = [
            {"Update": {"IndexName": index, "ProvisionedThroughput": _throughput(units)}}
            for index, units in kept["indexes"].items()
            if shown.get(index) != units
        ]
        request: dict[str, Any] = {
            "TableName": name,
            "BillingMode": "PROVISIONED",
            "ProvisionedThroughput": _throughput(kept["table"]),
        }
        if updates:
            request["GlobalSecondaryIndexUpdates"] = updates
        self.client.update_table(**request)

    def _capacities(self, name: str) -> dict[str, Any]:
        """The read and write units ``name`` and each of its indexes are provisioned with now."""
        table = self.client.describe_table(TableName=name)["Table"]
        return {
            "table": _units(table.get("ProvisionedThroughput", {})),
            "indexes": {
                index["IndexName"]: _units(index.get("ProvisionedThroughput", {}))
                for index in table.get("GlobalSecondaryIndexes", [])
            },
        }

    def _read_log(self) -> tuple[list[datetime], int, dict[str, Any]]:
        item = self.client.get_item(TableName=self.names.control, Key=LOG_KEY, ConsistentRead=True).get(
            "Item", {}
        )
        return item_to_switch_log(item)

    def _write_log(self, switches: list[datetime], made: int, capacities: dict[str, Any]) -> None:
        """The log with one more switch, under ``TABLE_MODES_AS_READ``; a lost race raises (nothing
        switched: the next look reads the other's log)."""
        item: Item = {
            "pk": {"S": "table-modes"},
            "sk": {"S": "table-modes"},
            "switches": {"L": [{"S": at.isoformat()} for at in switches]},
            "switches_made": {"N": str(made + 1)},
            "capacities": cast("AttributeValueTypeDef", _to_attribute(capacities)),
        }
        try:
            self.client.put_item(
                TableName=self.names.control,
                Item=stamped(item, self.write_format()),
                ConditionExpression=c.TABLE_MODES_AS_READ.expression,
                ExpressionAttributeNames={"#switches_made": "switches_made"},
                ExpressionAttributeValues={":switches_made": {"N": str(made)}},
            )
        except ClientError as exc:
            if lost_race(exc):
                raise RuntimeError("another look switched the tables meanwhile") from None
            raise


def item_to_switch_log(item: dict[str, Any]) -> tuple[list[datetime], int, dict[str, Any]]:
    """The switch log's item read (an empty item: no switch yet): the switches to on demand (oldest
    first), the count made, the capacities kept. Attributes it does not know are left alone."""
    switches = [datetime.fromisoformat(v["S"]) for v in item.get("switches", {}).get("L", [])]
    made = int(item.get("switches_made", {}).get("N", "0"))
    capacities = _from_attribute(item["capacities"]) if "capacities" in item else {}
    return sorted(switches), made, capacities


def _units(throughput: dict[str, Any]) -> dict[str, int]:
    return {
        "read": int(throughput.get("ReadCapacityUnits", 0)),
        "write": int(throughput.get("WriteCapacityUnits", 0)),
    }


def _throughput(units: dict[str, int]) -> dict[str, int]:
    """DynamoDB's ProvisionedThroughput for ``units``; at least 1 of each (AWS's minimum)."""
    return {"ReadCapacityUnits": max(1, units["read"]), "WriteCapacityUnits": max(1, units["write"])}


def _to_attribute(capacities: dict[str, Any]) -> dict[str, Any]:
    def units(u: dict[str, int]) -> dict[str, Any]:
        return {"M": {"read": {"N": str(u["read"])}, "write": {"N": str(u["write"])}}}

    return {
        "M": {
            name: {
                "M": {
                    "table": units(kept["table"]),
                    "indexes": {"M": {index: units(u) for index, u in kept["indexes"].items()}},
                }
            }
            for name, kept in capacities.items()
        }
    }


def _from_attribute(attribute: dict[str, Any]) -> dict[str, Any]:
    """The capacities kept, read past what a later release adds (an entry that is not a map is not a
    table's nor an index's)."""

    def maps(a: dict[str, Any]) -> dict[str, Any]:
        return {k: v["M"] for k, v in a.get("M", {}).items() if isinstance(v, dict) and "M" in v}

    def units(a: dict[str, Any]) -> dict[str, int]:
        return {key: int(a[key]["N"]) for key in ("read", "write")}

    return {
        name: {
            "table": units(maps({"M": kept})["table"]),
            "indexes": {index: units(u) for index, u in maps(kept.get("indexes", {})).items()},
        }
        for name, kept in maps(attribute).items()
    }
