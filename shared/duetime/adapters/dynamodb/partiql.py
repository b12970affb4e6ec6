"""Many conditional writes in one request: PartiQL's BatchExecuteStatement.

A worker's batch of runs makes the same write to each run (take the lease, extend it, record the result)
and to each of its team's slots. BatchExecuteStatement carries up to 25 statements per request, each under
its own condition and each billed as the single write it is (unlike a transaction, which doubles the units
and fails all for one); statements succeed or fail one by one. A statement's condition is its ``WHERE``
clause after the key: the same named condition as the single-item write (``conditions.py``, its
``partiql`` form). A statement whose condition fails is a lost race, as with ``ConditionalCheckFailed``;
any other per-statement error (a throttle past the SDK's retries, an internal error) raises.

AWS's limits: 25 statements a request (``execute`` splits), and no two statements on one item in the same
request (``ValidationException``: "Provided list of item keys contains duplicates"; callers send each item
once).
"""

from __future__ import annotations

import functools
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from duetime.adapters.dynamodb.codec import Item
from duetime.adapters.dynamodb.conditions import Condition
from duetime.adapters.retrying import Backoff, resend

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import (
        AttributeValueTypeDef,
        BatchStatementRequestTypeDef,
        ParameterizedStatementTypeDef,
    )

BATCH_STATEMENTS_MAX = 25  # BatchExecuteStatement: statements per request
# Per-statement error codes of a passing kind (BatchStatementError), sent again by ``execute``.
RETRYABLE = frozenset(
    {
        "ThrottlingError",
        "ProvisionedThroughputExceeded",
        "RequestLimitExceeded",
        "InternalServerError",
        "TransactionConflict",
    }
)
STATEMENT_RETRIES = 3
RETRY_BASE_SECONDS = 0.05
# A random wait of up to 50, 100, 200 ms before the three retries (full jitter, ``retrying``): statements
# throttled together do not come back in step (AWS, BatchWriteItem's reference, on resending a batch's
# unprocessed part: "we strongly recommend that you use an exponential backoff algorithm").
STATEMENT_BACKOFF = Backoff(STATEMENT_RETRIES + 1, RETRY_BASE_SECONDS, RETRY_BASE_SECONDS * 4)
_PLACEHOLDER = re.compile(r":[a-z_][a-z0-9_]*")


class StatementFailed(Exception):
    """A statement of a batch failed for a reason other than its condition."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


@dataclass(frozen=True)
class Statement:
    text: str
    parameters: list[AttributeValueTypeDef]

    def request(self) -> BatchStatementRequestTypeDef:
        """The statement as a batch names it (BatchExecuteStatement)."""
        return {"Statement": self.text, "Parameters": self.parameters}

    def in_transaction(self) -> ParameterizedStatementTypeDef:
        """The statement as a transaction names it (ExecuteTransaction): the same two fields."""
        return {"Statement": self.text, "Parameters": self.parameters}


def update(
    table: str,
    key: Item,
    condition: Condition,
    values: Item,
    sets: Sequence[str] = (),
    removes: Sequence[str] = (),
    set_from: Mapping[str, str] | None = None,
) -> Statement:
    """``UPDATE table SET a = :a ... REMOVE b ... WHERE <key> AND (<condition>)``. ``sets`` are attribute
    names set from the value of the same name (``lease_expires_at`` from ``:lease_expires_at``);
    ``set_from`` names another value where the condition already uses that name (``attempt`` from
    ``:next_attempt`` while the condition compares ``:attempt``). The item must exist: a PartiQL UPDATE
    never creates one (a missing item fails like the condition)."""
    assert condition.partiql, f"{condition.name} has no PartiQL form"
    text, names = _update_text(
        table, tuple(key), condition.partiql, tuple(sets), tuple(removes), tuple((set_from or {}).items())
    )
    bound = {**values, **{f":key_{name}": value for name, value in key.items()}}
    return Statement(text, [bound[name] for name in names])


@functools.lru_cache(maxsize=256)
def _update_text(
    table: str,
    key: tuple[str, ...],
    condition: str,
    sets: tuple[str, ...],
    removes: tuple[str, ...],
    set_from: tuple[tuple[str, str], ...],
) -> tuple[str, tuple[str, ...]]:
    """``update``'s statement with ``?`` for its values, and the values' names in order. A batch's
    statements share one text (a worker's ten leases, a claim's run rows), so it is built once."""
    assignments = {**{name: f":{name}" for name in sets}, **dict(set_from)}
    clauses = [f'SET "{name}" = {value}' for name, value in assignments.items()]
    clauses += [f'REMOVE "{name}"' for name in removes]
    where = " AND ".join(f'"{name}" = :key_{name}' for name in key)
    text = f'UPDATE "{table}" {" ".join(clauses)} WHERE {where} AND ({condition})'
    return _PLACEHOLDER.sub("?", text), tuple(_PLACEHOLDER.findall(text))


def insert(table: str, item: Item, condition: Condition) -> Statement:
    """``INSERT INTO table VALUE {...}``: fails (as a lost race) when an item with that key exists, which
    is its ``condition`` (named for the reader; PartiQL's INSERT carries it by itself)."""
    assert condition.expression.startswith("attribute_not_exists("), condition.name
    return Statement(_insert_text(table, tuple(item)), list(item.values()))


@functools.lru_cache(maxsize=256)
def _insert_text(table: str, names: tuple[str, ...]) -> str:
    """``insert``'s statement with ``?`` for the values of ``names``, in order. The rows of one kind (a
    claim's runs, their watches) share their attributes and so one text, built once."""
    fields = ", ".join(f"'{name}': ?" for name in names)
    return f'INSERT INTO "{table}" VALUE {{{fields}}}'


def execute(
    client: DynamoDBClient,
    statements: Sequence[Statement],
    sleep: Callable[[float], object] = time.sleep,
    rng: random.Random | None = None,
) -> list[bool]:
    """Run ``statements``, 25 per request; for each, True when it was written, False when its condition
    failed (or, for an INSERT, its item existed). A statement that failed otherwise (``outcomes``) raises
    ``StatementFailed``, after every statement was made: each is a write of its own."""
    written: list[bool] = []
    for outcome in outcomes(client, statements, sleep, rng):
        if isinstance(outcome, StatementFailed):
            raise outcome
        written.append(outcome)
    return written


def outcomes(
    client: DynamoDBClient,
    statements: Sequence[Statement],
    sleep: Callable[[float], object] = time.sleep,
    rng: random.Random | None = None,
) -> list[bool | StatementFailed]:
    """Run ``statements``, 25 per request; for each, True when it was written, False when its condition
    failed (or, for an INSERT, its item existed), or the ``StatementFailed`` that stopped it.

    A statement that failed for a passing reason (throttled, an internal error, a conflict with a
    transaction: the SDK retries a whole request, never a statement of one) is sent again, alone with the
    others that failed so, up to ``STATEMENT_RETRIES`` times with jittered backoff: a throttled key at the
    midnight peak costs its statement a few tens of milliseconds, not its run's lease. Any other failure,
    or one that outlasts the retries, is that statement's ``StatementFailed``; the request itself failing
    (the SDK's retries spent) raises."""
    done: list[bool | StatementFailed] = [False] * len(statements)

    def send(pending: list[int]) -> list[int]:
        """One request of the ``pending`` statements; those that failed for a passing reason, to send again
        (each holding its failure meanwhile: its outcome if the retries run out)."""
        response = client.batch_execute_statement(Statements=[statements[i].request() for i in pending])
        again: list[int] = []
        for index, answer in zip(pending, response["Responses"], strict=True):
            error = answer.get("Error")
            code = (error or {}).get("Code", "?")
            if error is None:
                done[index] = True
            elif code in ("ConditionalCheckFailed", "DuplicateItem"):
                done[index] = False
            else:
                done[index] = StatementFailed(code, (error or {}).get("Message", ""))
                if code in RETRYABLE:
                    again.append(index)
        return again

    for start in range(0, len(statements), BATCH_STATEMENTS_MAX):
        first = list(range(start, min(start + BATCH_STATEMENTS_MAX, len(statements))))
        resend(send, first, STATEMENT_BACKOFF, sleep=sleep, rng=rng)
    return done


TRANSACTION_STATEMENTS_MAX = 100  # ExecuteTransaction: statements per request
# A statement of a cancelled transaction whose condition (or an INSERT's "no such item") failed: a lost race.
# AWS names an INSERT's existing item DuplicateItem; DynamoDB Local names it ValidationError.
CONDITION_FAILED = frozenset({"ConditionalCheckFailed", "DuplicateItem", "ValidationError"})


def transact(client: DynamoDBClient, statements: Sequence[Statement]) -> list[bool] | None:
    """Run ``statements`` as one transaction (ExecuteTransaction: all or none). None when it committed;
    when it was cancelled, for each statement whether its condition failed (True: that statement's lost
    race; the others were fine). A cancellation for any other reason (a conflict with another transaction,
    a throttle past the SDK's retries) raises ``StatementFailed``: nothing was written."""
    assert len(statements) <= TRANSACTION_STATEMENTS_MAX, len(statements)
    try:
        client.execute_transaction(
            TransactStatements=[statement.in_transaction() for statement in statements]
        )
    except client.exceptions.TransactionCanceledException as exc:
        codes = [reason.get("Code", "None") for reason in exc.response.get("CancellationReasons", [])]
        if len(codes) != len(statements) or any(
            code not in CONDITION_FAILED and code != "None" for code in codes
        ):
            raise StatementFailed("TransactionCanceled", f"reasons {codes}") from exc
        return [code in CONDITION_FAILED for code in codes]
    return None
