"""AWS's request limits for DynamoDB and SQS, how duetime sizes its requests by them, and a strict mode that
rejects what AWS would reject.

The emulators are lenient where AWS is not. DynamoDB Local counts a transaction's 4 MB from the request's
bytes, so an ``Update`` of a 100 KB item costs it nothing, while AWS counts the items themselves: fifty
claims of jobs with 64 KiB bodies pass DynamoDB Local and fail on AWS, every tick. The store therefore sizes
its batches by AWS's rules (``item_size``, the ``*_MAX_*`` figures below), and ``enforce_aws_limits`` puts
a check on a client (a botocore ``before-call`` hook) that raises the ``ValidationException`` AWS would,
before the request leaves. Tests build every client that way (``tests/conftest.py``), and so do ``make
run`` and ``make test`` through ``DUETIME_STRICT_AWS_LIMITS=1``; production clients don't carry the check.

Sizes follow AWS's documented item-size rules: attribute names and string values count their UTF-8 bytes,
numbers about one byte per two significant digits plus one, binary values their bytes, booleans and nulls
one byte, lists and maps three bytes plus one per element. Where AWS says "MB" or "KB" the stricter
decimal reading is used, so a request that passes here passes there.
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import botocore.session
from botocore.client import BaseClient
from botocore.exceptions import ClientError

from duetime.adapters.retrying import UNPROCESSED, Sleep, resend

_Client = TypeVar("_Client", bound=BaseClient)

# DynamoDB
ITEM_MAX_BYTES = 400_000  # one item (400 KB)
TRANSACT_WRITE_MAX_ACTIONS = 100
TRANSACT_WRITE_MAX_BYTES = 4_000_000  # the aggregate size of the items in one TransactWriteItems (4 MB)
TRANSACT_GET_MAX_ITEMS = 100
BATCH_WRITE_MAX_REQUESTS = 25
BATCH_WRITE_MAX_BYTES = 16_000_000
BATCH_GET_MAX_KEYS = 100
PARTIQL_BATCH_MAX_STATEMENTS = 25
# A Query or Scan returns at most 1 MB a page (DynamoDB Local enforces this one too): readers follow
# LastEvaluatedKey rather than assume a short page means the end.
QUERY_PAGE_MAX_BYTES = 1_000_000

# SQS
SQS_MAX_MESSAGE_BYTES = 256 * 1024  # one message: body plus attributes
SQS_MAX_BATCH_BYTES = 256 * 1024  # all messages of one SendMessageBatch together
SQS_MAX_BATCH_ENTRIES = 10
SQS_MAX_DELAY_SECONDS = 900
SQS_MAX_VISIBILITY_SECONDS = 43_200
SQS_MAX_WAIT_SECONDS = 20

STRICT_ENV = "DUETIME_STRICT_AWS_LIMITS"
_MARK = "_duetime_strict_limits"


# --- sizes ----------------------------------------------------------------------------------------------


def _number_size(text: str) -> int:
    digits = text.lstrip("+-").replace(".", "").split("e")[0].split("E")[0].strip("0") or "0"
    return (len(digits) + 1) // 2 + 1


def value_size(value: Mapping[str, Any]) -> int:
    """The size DynamoDB bills for one attribute value (low-level ``{"S": ...}`` form)."""
    (kind, data), *_ = value.items()
    if kind == "S":
        return len(data.encode())
    if kind == "N":
        return _number_size(data)
    if kind == "B":
        return len(data if isinstance(data, bytes) else base64.b64decode(data))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(v.encode()) for v in data)
    if kind == "NS":
        return sum(_number_size(v) for v in data)
    if kind == "BS":
        return sum(len(v if isinstance(v, bytes) else base64.b64decode(v)) for v in data)
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in data)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(v) for k, v in data.items())
    raise ValueError(f"unknown DynamoDB type {kind!r}")


def item_size(item: Mapping[str, Mapping[str, Any]]) -> int:
    """An item's size by AWS's rules: every attribute's name plus its value."""
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


# --- the strict check -----------------------------------------------------------------------------------


def _refuse(operation: str, message: str) -> ClientError:
    return ClientError({"Error": {"Code": "ValidationException", "Message": message}}, operation)


def _checked_item_size(operation: str, item: Mapping[str, Mapping[str, Any]]) -> int:
    size = item_size(item)
    if size > ITEM_MAX_BYTES:
        raise _refuse(operation, f"Item size {size} has exceeded the maximum allowed size {ITEM_MAX_BYTES}")
    return size


def _key_of(action: Mapping[str, Any]) -> tuple[str, str] | None:
    if "Put" in action:
        return None  # the table's key names are not in the request; the others name their key
    body = next(iter(action.values()))
    return body["TableName"], json.dumps(body["Key"], sort_keys=True)


def _stored_sizes(
    client: Any, keys: Iterable[tuple[str, str]], sleep: Sleep = time.sleep
) -> dict[tuple[str, str], int]:
    """The current size of each (table, key) item; items that don't exist count 0."""
    by_table: dict[str, list[str]] = {}
    for table, key in keys:
        by_table.setdefault(table, []).append(key)
    sizes: dict[tuple[str, str], int] = {}
    for table, table_keys in by_table.items():
        for start in range(0, len(table_keys), BATCH_GET_MAX_KEYS):
            chunk = [json.loads(k) for k in table_keys[start : start + BATCH_GET_MAX_KEYS]]
            sizes.update(_sizes_of(client, table, chunk, sleep))
    return sizes


def _sizes_of(client: Any, table: str, keys: list[Any], sleep: Sleep) -> dict[tuple[str, str], int]:
    """The size of each item found for ``keys`` (one BatchGetItem; what it leaves unprocessed is sent again
    after a backoff, ``retrying.UNPROCESSED``), by (table, key)."""
    names = set().union(*(k.keys() for k in keys))
    sizes: dict[tuple[str, str], int] = {}

    def send(request: dict[str, Any]) -> dict[str, Any]:
        response = client.batch_get_item(RequestItems=request)
        for item in response.get("Responses", {}).get(table, []):
            key = json.dumps({n: item[n] for n in names if n in item}, sort_keys=True)
            sizes[(table, key)] = item_size(item)
        return response.get("UnprocessedKeys") or {}

    resend(send, {table: {"Keys": keys, "ConsistentRead": True}}, UNPROCESSED, sleep=sleep)
    return sizes


def _check_transact_write(client: Any, request: Mapping[str, Any]) -> None:
    op = "TransactWriteItems"
    actions = request.get("TransactItems", [])
    if len(actions) > TRANSACT_WRITE_MAX_ACTIONS:
        raise _refuse(op, f"{len(actions)} actions; a transaction holds at most {TRANSACT_WRITE_MAX_ACTIONS}")
    keys = [_key_of(a) for a in actions]
    named = [k for k in keys if k is not None]
    if len(set(named)) != len(named):
        raise _refuse(op, "Transaction request cannot include multiple operations on one item")
    total = 0
    for action in actions:
        if "Put" in action:
            total += _checked_item_size(op, action["Put"]["Item"])
    stored = _stored_sizes(client, named) if named else {}
    for action, key in zip(actions, keys, strict=True):
        if key is not None:
            # The item as stored; an Update may grow it by at most the values it sets.
            values = action.get("Update", {}).get("ExpressionAttributeValues", {})
            total += stored.get(key, 0) + sum(value_size(v) for v in values.values())
    if total > TRANSACT_WRITE_MAX_BYTES:
        raise _refuse(
            op, f"the items of the transaction add up to {total} bytes; AWS allows {TRANSACT_WRITE_MAX_BYTES}"
        )


def _check_batch_write(request: Mapping[str, Any]) -> None:
    op = "BatchWriteItem"
    writes = [w for table in request.get("RequestItems", {}).values() for w in table]
    if len(writes) > BATCH_WRITE_MAX_REQUESTS:
        raise _refuse(op, f"{len(writes)} writes; a batch holds at most {BATCH_WRITE_MAX_REQUESTS}")
    total = 0
    for write in writes:
        if "PutRequest" in write:
            total += _checked_item_size(op, write["PutRequest"]["Item"])
    if total > BATCH_WRITE_MAX_BYTES:
        raise _refuse(op, f"the batch's items add up to {total} bytes; AWS allows {BATCH_WRITE_MAX_BYTES}")


def _entries(operation: str, request: Mapping[str, Any]) -> tuple[int, int]:
    """(entries in the request, AWS's maximum) for the operations limited by a count alone."""
    if operation == "BatchGetItem":
        keys = sum(len(t.get("Keys", [])) for t in request.get("RequestItems", {}).values())
        return keys, BATCH_GET_MAX_KEYS
    if operation == "TransactGetItems":
        return len(request.get("TransactItems", [])), TRANSACT_GET_MAX_ITEMS
    if operation == "BatchExecuteStatement":
        return len(request.get("Statements", [])), PARTIQL_BATCH_MAX_STATEMENTS
    return 0, 0


def _check_dynamodb(client: Any, operation: str, request: Mapping[str, Any]) -> None:
    if operation == "TransactWriteItems":
        _check_transact_write(client, request)
    elif operation == "BatchWriteItem":
        _check_batch_write(request)
    elif operation == "PutItem":
        _checked_item_size(operation, request["Item"])
    entries, allowed = _entries(operation, request)
    if entries > allowed:
        raise _refuse(operation, f"{entries} entries; AWS allows at most {allowed}")


def message_size(entry: Mapping[str, Any]) -> int:
    """An SQS message's size: its body plus each attribute's name, type and value."""
    size = len(entry.get("MessageBody", "").encode())
    for name, attribute in (entry.get("MessageAttributes") or {}).items():
        size += len(name.encode()) + len(attribute.get("DataType", "").encode())
        size += len(attribute.get("StringValue", "").encode())
        binary = attribute.get("BinaryValue")
        size += len(base64.b64decode(binary)) if isinstance(binary, str) else len(binary or b"")
    return size


def _check_message(operation: str, entry: Mapping[str, Any]) -> int:
    size = message_size(entry)
    if size > SQS_MAX_MESSAGE_BYTES:
        raise _refuse(operation, f"a message of {size} bytes; SQS allows {SQS_MAX_MESSAGE_BYTES}")
    delay = entry.get("DelaySeconds", 0)
    if not 0 <= delay <= SQS_MAX_DELAY_SECONDS:
        raise _refuse(operation, f"DelaySeconds {delay} is outside 0..{SQS_MAX_DELAY_SECONDS}")
    return size


def _check_sqs(operation: str, request: Mapping[str, Any]) -> None:
    if operation == "SendMessage":
        _check_message(operation, request)
    elif operation in ("SendMessageBatch", "DeleteMessageBatch", "ChangeMessageVisibilityBatch"):
        entries = request.get("Entries", [])
        if not 1 <= len(entries) <= SQS_MAX_BATCH_ENTRIES:
            raise _refuse(operation, f"{len(entries)} entries; a batch holds 1..{SQS_MAX_BATCH_ENTRIES}")
        if len({e["Id"] for e in entries}) != len(entries):
            raise _refuse(operation, "batch entry ids must be distinct")
        if operation == "SendMessageBatch":
            total = sum(_check_message(operation, e) for e in entries)
            if total > SQS_MAX_BATCH_BYTES:
                raise _refuse(operation, f"a batch of {total} bytes; SQS allows {SQS_MAX_BATCH_BYTES}")
    elif operation == "ChangeMessageVisibility":
        if not 0 <= request.get("VisibilityTimeout", 0) <= SQS_MAX_VISIBILITY_SECONDS:
            raise _refuse(operation, f"VisibilityTimeout is outside 0..{SQS_MAX_VISIBILITY_SECONDS}")
    elif operation == "ReceiveMessage":
        if not 1 <= request.get("MaxNumberOfMessages", 1) <= SQS_MAX_BATCH_ENTRIES:
            raise _refuse(operation, f"MaxNumberOfMessages is outside 1..{SQS_MAX_BATCH_ENTRIES}")
        if not 0 <= request.get("WaitTimeSeconds", 0) <= SQS_MAX_WAIT_SECONDS:
            raise _refuse(operation, f"WaitTimeSeconds is outside 0..{SQS_MAX_WAIT_SECONDS}")


def enforce_aws_limits(client: _Client) -> _Client:
    """Make ``client`` refuse, as AWS would, DynamoDB and SQS requests over AWS's limits (see the module
    docstring); other services' clients are returned unchanged. Idempotent; returns the client."""
    service = client.meta.service_model.service_name
    if service not in ("dynamodb", "sqs") or getattr(client, _MARK, False):
        return client

    readers: list[Any] = []

    def reader() -> Any:
        """A client of its own for the check's reads, so that hooks on ``client`` (a benchmark's request
        ledger) never see them."""
        if not readers:
            readers.append(
                botocore.session.get_session().create_client(
                    "dynamodb", endpoint_url=client.meta.endpoint_url, region_name=client.meta.region_name
                )
            )
        return readers[0]

    def check(model: Any, params: Mapping[str, Any], **_: Any) -> None:
        body = params.get("body") or b"{}"
        request = json.loads(body) if isinstance(body, bytes | str) else {}
        if service == "dynamodb":
            _check_dynamodb(reader(), model.name, request)
        else:
            _check_sqs(model.name, request)

    client.meta.events.register(f"before-call.{service}", check)
    setattr(client, _MARK, True)
    return client


def strict_limits_wanted(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``DUETIME_STRICT_AWS_LIMITS`` asks for the check (``make run``, ``make test``)."""
    return (environ if environ is not None else os.environ).get(STRICT_ENV, "") not in ("", "0", "false")
