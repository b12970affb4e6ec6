"""One conditional write, where a failed condition is a lost race (a normal outcome), not an error."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from botocore.exceptions import ClientError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

_Request = ParamSpec("_Request")
_Response = TypeVar("_Response")


def lost_race(exc: ClientError) -> bool:
    """Whether a client error is a write's condition that failed."""
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


def conditional_write(
    write: Callable[_Request, _Response], /, *args: _Request.args, **request: _Request.kwargs
) -> _Response | None:
    """Make one conditional write (``write(**request)``, checked as the client method's own call); its
    response, or None when the condition failed (a lost race). Any other error propagates."""
    try:
        return write(*args, **request)
    except ClientError as exc:
        if lost_race(exc):
            return None
        raise


def transaction_committed(client: DynamoDBClient, items: Sequence[TransactWriteItemTypeDef]) -> bool:
    """Make one transaction: True when it committed, False when a condition cancelled it (a lost race or a
    taken key: normal outcomes). Any other error propagates."""
    try:
        client.transact_write_items(TransactItems=items)
        return True
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "TransactionCanceledException":
            return False
        raise
