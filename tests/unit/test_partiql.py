"""Batched conditional writes (``adapters/dynamodb/partiql.py``): each statement's own outcome, 25 a request,
and a statement failed for a passing reason sent again alone instead of failing its batch."""

from __future__ import annotations

import random
from typing import Any

import pytest

from duetime.adapters.dynamodb import conditions, partiql
from duetime.adapters.dynamodb.codec import string_attribute


def statement(run: int) -> partiql.Statement:
    return partiql.update(
        "runs",
        {"job_id": string_attribute(f"job-{run}"), "occurrence": string_attribute("o")},
        conditions.SLOT_HELD.for_slots([0]),
        {":run_0": string_attribute(f"run-{run}"), ":until_0": string_attribute("t")},
        sets=("until_0",),
    )


class Client:
    """Answers each statement from ``script``: per job id, the error codes of its successive tries (None: it
    is written); keeps every request."""

    def __init__(self, script: dict[str, list[str | None]]) -> None:
        self.script = script
        self.requests: list[list[str]] = []

    def batch_execute_statement(self, Statements: list[dict[str, Any]]) -> dict[str, Any]:
        jobs = [request["Parameters"][1]["S"] for request in Statements]  # the key's job id (after the SET)
        assert len(Statements) <= 25
        self.requests.append(jobs)
        answers = []
        for job in jobs:
            tries = self.script.get(job, [None])
            code = tries.pop(0) if len(tries) > 1 else tries[0]
            answers.append({} if code is None else {"Error": {"Code": code, "Message": "m"}})
        return {"Responses": answers}


def test_each_statement_has_its_own_outcome_and_25_go_in_a_request() -> None:
    client = Client({"job-3": ["ConditionalCheckFailed"]})
    written = partiql.execute(client, [statement(i) for i in range(30)], sleep=lambda _: None)
    assert written == [i != 3 for i in range(30)]
    assert [len(request) for request in client.requests] == [25, 5]


def test_a_throttled_statement_is_sent_again_alone_after_a_pause() -> None:
    client = Client({"job-1": ["ThrottlingError", None]})
    pauses: list[float] = []
    written = partiql.execute(client, [statement(i) for i in range(3)], sleep=pauses.append)
    assert written == [True, True, True]
    assert client.requests == [["job-0", "job-1", "job-2"], ["job-1"]]
    assert len(pauses) == 1 and 0 < pauses[0] <= partiql.RETRY_BASE_SECONDS


class Highest(random.Random):
    """Draws the top of every range: each backoff is its ceiling."""

    def uniform(self, a: float, b: float) -> float:
        return b


def test_the_pauses_before_the_retries_are_full_jitter_doubling_from_the_base() -> None:
    client = Client({"job-0": ["ThrottlingError", "ThrottlingError", "ThrottlingError", None]})
    pauses: list[float] = []
    written = partiql.execute(client, [statement(0)], sleep=pauses.append, rng=Highest())
    assert written == [True]
    base = partiql.RETRY_BASE_SECONDS
    assert pauses == [base, 2 * base, 4 * base]  # the ceilings; a real draw is anywhere from 0 up to each
    seeded: list[float] = []
    partiql.execute(
        Client({"job-0": ["ThrottlingError", "ThrottlingError", None]}),
        [statement(0)],
        sleep=seeded.append,
        rng=random.Random(5),
    )
    assert len(seeded) == 2 and all(0 <= p <= c for p, c in zip(seeded, pauses, strict=False))


def test_a_statement_throttled_past_the_retries_fails_the_call() -> None:
    client = Client({"job-0": ["ProvisionedThroughputExceeded"]})
    with pytest.raises(partiql.StatementFailed) as failed:
        partiql.execute(client, [statement(0)], sleep=lambda _: None)
    assert failed.value.code == "ProvisionedThroughputExceeded"
    assert len(client.requests) == partiql.STATEMENT_RETRIES + 1


def test_a_statement_refused_for_good_fails_the_call_at_once() -> None:
    client = Client({"job-1": ["ValidationError"]})
    with pytest.raises(partiql.StatementFailed):
        partiql.execute(client, [statement(i) for i in range(2)], sleep=lambda _: None)
    assert len(client.requests) == 1


def test_a_statement_refused_for_good_is_its_own_outcome_and_every_other_statement_is_made() -> None:
    client = Client({"job-1": ["ValidationError"]})
    done = partiql.outcomes(client, [statement(i) for i in range(30)], sleep=lambda _: None)
    assert isinstance(done[1], partiql.StatementFailed) and done[1].code == "ValidationError"
    assert done[:1] + done[2:] == [True] * 29
    assert [len(request) for request in client.requests] == [25, 5]


def test_a_write_to_several_slots_of_an_item_binds_each_slots_holder_and_holds_all_their_conditions() -> None:
    statement = partiql.update(
        "control",
        {"pk": string_attribute("team#t#slots#0"), "sk": string_attribute("slot#00005")},
        conditions.SLOT_HELD.for_slots([1, 3]),
        {":run_1": string_attribute("r1"), ":run_3": string_attribute("r3")},
        removes=("holder_1", "until_1", "holder_3", "until_3"),
    )
    assert statement.text.endswith('AND (("holder_1" = ?) AND ("holder_3" = ?))')
    assert [p["S"] for p in statement.parameters] == ["team#t#slots#0", "slot#00005", "r1", "r3"]


class Cancelled(Exception):
    def __init__(self, codes: list[str]) -> None:
        super().__init__("TransactionCanceledException")
        self.response = {"CancellationReasons": [{"Code": code} for code in codes]}


class TransactingClient:
    """``execute_transaction`` cancelled with the given reasons (or committed, with none)."""

    class exceptions:
        TransactionCanceledException = Cancelled

    def __init__(self, codes: list[str] | None) -> None:
        self.codes = codes
        self.sent: list[Any] = []

    def execute_transaction(self, TransactStatements: list[Any]) -> dict[str, Any]:
        self.sent.append(TransactStatements)
        if self.codes is not None:
            raise Cancelled(self.codes)
        return {}


def test_a_transaction_reports_which_statements_lost_their_race() -> None:
    statements = [statement(1), statement(2), statement(3)]
    assert partiql.transact(TransactingClient(None), statements) is None  # committed
    lost = partiql.transact(
        TransactingClient(["DuplicateItem", "None", "ConditionalCheckFailed"]), statements
    )
    assert lost == [True, False, True]
    local = partiql.transact(TransactingClient(["ValidationError", "None", "None"]), statements)
    assert local == [True, False, False]  # DynamoDB Local's name for an INSERT's existing item


@pytest.mark.parametrize(
    "codes", [["TransactionConflict", "None", "None"], ["None", "ThrottlingError", "None"]]
)
def test_a_transaction_cancelled_for_another_reason_raises(codes: list[str]) -> None:
    with pytest.raises(partiql.StatementFailed, match="TransactionCanceled"):
        partiql.transact(TransactingClient(codes), [statement(1), statement(2), statement(3)])
