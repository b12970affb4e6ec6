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
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from duetime.adapters.dynamodb import conditions as c
from duetime.adapters.dynamodb.codec import Item, stamped
from duetime.adapters.dynamodb.conditional import lost_race
from duetime.adapters.dynamodb.tables import TableNames
from duetime.domain.stored_format import FORMAT
from duetime.ports import ROLLING_DAY, SWITCHES_TO_ON_DEMAND_PER_DAY, SwitchLimitReached

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

LOG_KEY = {"pk": {"S": "table-modes"}, "sk": {"S": "table-modes"}}
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
        return _mode(self._describe(self.names.runs))

    def _describe(self, name: str) -> dict[str, Any]:
        table: dict[str, Any] = self.client.describe_table(TableName=name)["Table"]
        return table

    def switches_to_on_demand(self, since: datetime) -> list[datetime]:
        switches, _, _ = self._read_log()
        return [at for at in switches if at >= since]

    def switch_to_on_demand(self, now: datetime) -> None:
        switches, made, kept = self._read_log()
        recent = [at for at in switches if at > now - ROLLING_DAY]
        if len(recent) >= SWITCHES_TO_ON_DEMAND_PER_DAY:
            raise SwitchLimitReached(
                f"{len(recent)} switches to on demand since {(now - ROLLING_DAY).isoformat()}: AWS allows "
                f"{SWITCHES_TO_ON_DEMAND_PER_DAY} a table in a rolling 24 hours"
            )
        described = {name: self._describe(name) for name in self.tables}
        # a table a failed look switched already is left as it is, its kept capacities with it
        provisioned = {name: table for name, table in described.items() if _mode(table) == "provisioned"}
        capacities = {name: _capacities(table) for name, table in provisioned.items()}
        self._write_log([*recent, now], made, {**kept, **capacities})
        for name in provisioned:
            self.client.update_table(TableName=name, BillingMode="PAY_PER_REQUEST")

    def switch_to_provisioned(self) -> None:
        _, _, capacities = self._read_log()
        for name in self.tables:
            table = self._describe(name)
            if _mode(table) == "provisioned":  # switched back by a look that failed further on
                continue
            kept = capacities.get(name)
            if kept is None:
                raise RuntimeError(f"no capacity kept for {name}: it was not switched by duetime")
            self.client.update_table(**_back_to_provisioned(name, table, kept))

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


def _mode(table: dict[str, Any]) -> str:
    """A described table's capacity mode (a table never switched shows no summary: provisioned)."""
    return MODES[table.get("BillingModeSummary", {}).get("BillingMode", "PROVISIONED")]


def _capacities(table: dict[str, Any]) -> dict[str, Any]:
    """The read and write units a described table and each of its indexes are provisioned with."""
    return {
        "table": _units(table.get("ProvisionedThroughput", {})),
        "indexes": {
            index["IndexName"]: _units(index.get("ProvisionedThroughput", {}))
            for index in table.get("GlobalSecondaryIndexes", [])
        },
    }


def _back_to_provisioned(name: str, table: dict[str, Any], kept: dict[str, Any]) -> dict[str, Any]:
    """The UpdateTable request that puts ``name`` (as described, ``table``) in provisioned mode at ``kept``,
    sending only the indexes whose throughput differs from what it shows (module docstring)."""
    shown = _capacities(table)["indexes"]
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
    return request


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
