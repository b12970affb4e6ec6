"""Counting what a run costs, from the requests actually made (botocore event hooks).

* Requests: every DynamoDB and SQS call, by operation.
* DynamoDB units by AWS's documented billing rules, applied to the items actually written and read:
  - a write of an item costs ceil(size / 1 KB) write units, twice that inside a transaction;
  - every global secondary index the write touches costs ceil(index entry size / 1 KB) more: a put of an
    item carrying the index keys, an update that changes an index key (a delete plus a put: 2 writes),
    removes one (1), or changes a projected attribute (1);
  - a read costs ceil(size / 4 KB) read units per item for GetItem/BatchGetItem, and per 4 KB of all the
    items a Query returns; eventually consistent reads cost half.
  Item size is DynamoDB's: attribute names plus values. For an update the item's size after the write is
  taken from its ALL_NEW answer when it has one, otherwise the last size seen for that table.
* DynamoDB Local's own ReturnConsumedCapacity figures are summed beside them (the emulator's numbers are
  not AWS's bill, e.g. it charges a 2-item transaction 16 units).
"""

from __future__ import annotations

import functools
import math
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from duetime.adapters.dynamodb.tables import TableNames, table_definitions

if TYPE_CHECKING:
    from botocore.client import BaseClient

_NAMES_IN_EXPRESSION = re.compile(r"#?[A-Za-z_][A-Za-z0-9_]*")
_UPDATE = re.compile(r'^UPDATE "([^"]+)" (.*?) WHERE ', re.S)
_INSERT = re.compile(r'^INSERT INTO "([^"]+)" VALUE \{(.*)\}$', re.S)
_CLAUSE = re.compile(r'(SET|REMOVE) "([^"]+)"')
_QUOTED_NAME = re.compile(r"'([^']+)': \?")


def attribute_size(value: dict[str, Any]) -> int:
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(raw.encode())
    if kind == "N":  # about one byte per two significant digits, plus one
        return (len(raw.lstrip("-0").replace(".", "")) + 1) // 2 + 1
    if kind == "B":
        return len(raw)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + attribute_size(v) + 1 for k, v in raw.items())
    if kind == "L":
        return 3 + sum(attribute_size(v) + 1 for v in raw)
    return len(str(raw))


def item_size(item: dict[str, Any]) -> int:
    return sum(len(name.encode()) + attribute_size(value) for name, value in item.items())


@functools.lru_cache(maxsize=256)
def _touched(expression: str, aliases: tuple[tuple[str, str], ...]) -> tuple[frozenset[str], frozenset[str]]:
    """Attribute names an update expression SETs and REMOVEs (cached: the same expressions repeat)."""
    names = dict(aliases)
    expression = re.sub(r":\w+", "", expression)  # value placeholders are not attribute names
    set_part, _, remove_part = expression.partition(" REMOVE ")
    if set_part.startswith("REMOVE "):
        set_part, remove_part = "", set_part[len("REMOVE ") :]
    touched_set = frozenset(
        names.get(n, n) for n in _NAMES_IN_EXPRESSION.findall(set_part.removeprefix("SET "))
    )
    touched_remove = frozenset(names.get(n, n) for n in _NAMES_IN_EXPRESSION.findall(remove_part))
    return touched_set, touched_remove


@dataclass(frozen=True)
class IndexShape:
    name: str
    keys: frozenset[str]
    projects_all: bool
    projected: frozenset[str]  # non-key attributes the index carries (INCLUDE)


def _shapes(names: TableNames) -> dict[str, list[IndexShape]]:
    shapes: dict[str, list[IndexShape]] = {}
    for definition in table_definitions(names):
        indexes = []
        for index in definition.get("GlobalSecondaryIndexes", []):
            projection = index["Projection"]
            indexes.append(
                IndexShape(
                    index["IndexName"],
                    frozenset(k["AttributeName"] for k in index["KeySchema"]),
                    projection["ProjectionType"] == "ALL",
                    frozenset(projection.get("NonKeyAttributes", [])),
                )
            )
        shapes[definition["TableName"]] = indexes
    return shapes


@dataclass
class Ledger:
    names: TableNames
    requests: Counter[str] = field(default_factory=Counter)
    write_units: float = 0.0
    read_units: float = 0.0
    local_write_units: float = 0.0
    local_read_units: float = 0.0
    _last_size: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._indexes = _shapes(self.names)
        self._tables = set(self._indexes)

    def attach(self, client: BaseClient, service: str) -> None:
        events = client.meta.events
        events.register(f"before-call.{service}", self._count)
        if service == "dynamodb":
            events.register("provide-client-params.dynamodb", self._ask_capacity)
            events.register("after-call.dynamodb", self._bill)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.write_units = self.read_units = self.local_write_units = self.local_read_units = 0.0

    # --- hooks --------------------------------------------------------------------------------------------

    def _count(self, model: Any, **_: Any) -> None:
        with self._lock:
            self.requests[f"{model.service_model.service_name}:{model.name}"] += 1

    @staticmethod
    def _ask_capacity(params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        if "ReturnConsumedCapacity" in model.input_shape.members:
            params.setdefault("ReturnConsumedCapacity", "INDEXES")
        context["ledger_params"] = params

    def _bill(self, model: Any, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        params = context.get("ledger_params")
        if params is None or parsed.get("Error"):
            return
        operation = model.name
        write = read = 0.0
        if operation == "PutItem":
            write = self._put(params["TableName"], params["Item"], 1)
        elif operation == "UpdateItem":
            write = self._update(params, parsed.get("Attributes"), 1)
        elif operation == "DeleteItem":
            write = self._delete(params["TableName"], 1)
        elif operation == "TransactWriteItems":
            for entry in params["TransactItems"]:
                ((kind, body),) = entry.items()
                if kind == "Put":
                    write += self._put(body["TableName"], body["Item"], 2)
                elif kind == "Update":
                    write += self._update(body, None, 2)
                elif kind == "Delete":
                    write += self._delete(body["TableName"], 2)
                else:  # ConditionCheck: billed as a write of the checked item
                    write += 2 * math.ceil(self._last_size.get(body["TableName"], 1) / 1024)
        elif operation == "BatchWriteItem":
            for table, requests in params["RequestItems"].items():
                for request in requests:
                    if "PutRequest" in request:
                        write += self._put(table, request["PutRequest"]["Item"], 1)
                    else:
                        write += self._delete(table, 1)
        elif operation == "BatchExecuteStatement":  # each statement billed as the single write it is
            for statement, answer in zip(params["Statements"], parsed.get("Responses", []), strict=False):
                if "Error" not in answer:
                    write += self._statement(statement["Statement"], statement.get("Parameters", []))
        elif operation == "GetItem":
            read = self._read_items([parsed["Item"]] if parsed.get("Item") else [], params, per_item=True)
        elif operation == "BatchGetItem":
            for table, items in parsed.get("Responses", {}).items():
                read += self._read_items(items, params["RequestItems"][table], per_item=True)
        elif operation in ("Query", "Scan"):
            read = self._read_items(parsed.get("Items", []), params, per_item=False)
        local_write = local_read = 0.0
        consumed = parsed.get("ConsumedCapacity")
        for entry in consumed if isinstance(consumed, list) else [consumed] if consumed else []:
            local_write += entry.get("WriteCapacityUnits", 0.0) or 0.0
            local_read += entry.get("ReadCapacityUnits", 0.0) or 0.0
            if (
                "CapacityUnits" in entry
                and not entry.get("WriteCapacityUnits")
                and not entry.get("ReadCapacityUnits")
            ):
                if write:
                    local_write += entry["CapacityUnits"]
                else:
                    local_read += entry["CapacityUnits"]
        with self._lock:
            self.write_units += write
            self.read_units += read
            self.local_write_units += local_write
            self.local_read_units += local_read

    # --- the rules ----------------------------------------------------------------------------------------

    def _put(self, table: str, item: dict[str, Any], factor: int) -> float:
        size = item_size(item)
        self._last_size[table] = size
        units = factor * math.ceil(size / 1024)
        for index in self._indexes.get(table, []):
            if index.keys <= set(item):
                units += math.ceil((size if index.projects_all else 100) / 1024)
        return units

    def _update(self, request: dict[str, Any], after: dict[str, Any] | None, factor: int) -> float:
        table = request["TableName"]
        if after:
            self._last_size[table] = item_size(after)
        size = self._last_size.get(table, 1024)
        units = factor * math.ceil(size / 1024)
        touched_set, touched_remove = _touched(
            request.get("UpdateExpression", ""),
            tuple(sorted(request.get("ExpressionAttributeNames", {}).items())),
        )
        for index in self._indexes.get(table, []):
            entry = math.ceil((size if index.projects_all else 100) / 1024)
            if index.keys & touched_remove:
                units += entry  # the item leaves the index
            elif index.keys & touched_set:
                units += 2 * entry  # a key changes: delete the old entry, put the new one
            elif (index.projects_all and touched_set) or index.projected & (touched_set | touched_remove):
                units += entry  # a projected attribute changes in place
        return units

    def _statement(self, text: str, parameters: list[dict[str, Any]]) -> float:
        """A PartiQL UPDATE or INSERT (as ``partiql.py`` writes them), by the rules above."""
        if insert := _INSERT.match(text):
            names = _QUOTED_NAME.findall(insert.group(2))
            return self._put(insert.group(1), dict(zip(names, parameters, strict=False)), 1)
        if update := _UPDATE.match(text):
            sets = [name for kind, name in _CLAUSE.findall(update.group(2)) if kind == "SET"]
            removes = [name for kind, name in _CLAUSE.findall(update.group(2)) if kind == "REMOVE"]
            expression = ("SET " + ", ".join(f"{name} = :v" for name in sets)) if sets else ""
            if removes:
                expression += (" REMOVE " if expression else "REMOVE ") + ", ".join(removes)
            return self._update({"TableName": update.group(1), "UpdateExpression": expression}, None, 1)
        return 0.0

    def _delete(self, table: str, factor: int) -> float:
        size = self._last_size.get(table, 1024)
        return factor * math.ceil(size / 1024) + len(self._indexes.get(table, []))

    @staticmethod
    def _read_items(items: list[dict[str, Any]], request: dict[str, Any], per_item: bool) -> float:
        factor = 1.0 if request.get("ConsistentRead") else 0.5
        if per_item:
            return sum(factor * max(1, math.ceil(item_size(i) / 4096)) for i in items)
        return factor * max(1, math.ceil(sum(item_size(i) for i in items) / 4096))

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            dynamodb = sum(n for k, n in self.requests.items() if k.startswith("dynamodb:"))
            sqs = sum(n for k, n in self.requests.items() if k.startswith("sqs:"))
            return {
                "dynamodb_requests": dynamodb,
                "sqs_requests": sqs,
                "write_units": self.write_units,
                "read_units": self.read_units,
                "local_write_units": self.local_write_units,
                "local_read_units": self.local_read_units,
                "by_operation": dict(self.requests),
            }
