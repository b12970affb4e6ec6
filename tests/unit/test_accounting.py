"""The bench's ledger applies AWS's billing rules to the requests duetime actually makes."""

from typing import Any

from duetime.adapters.dynamodb.tables import TableNames
from duetime_bench.accounting import Ledger, item_size

NAMES = TableNames("j", "r", "c")


class Model:
    def __init__(self, name: str) -> None:
        self.name = name


def bill(
    ledger: Ledger, operation: str, params: dict[str, Any], parsed: dict[str, Any] | None = None
) -> None:
    ledger._bill(model=Model(operation), parsed=parsed or {}, context={"ledger_params": params})


def test_item_size_counts_names_and_values() -> None:
    assert item_size({"pk": {"S": "abc"}}) == 5
    assert item_size({"n": {"N": "12345"}}) == 1 + 4


def test_a_transactional_put_costs_double_plus_each_index_it_enters() -> None:
    ledger = Ledger(NAMES)
    run = {
        "run_id": {"S": "x"},
        "job_id": {"S": "j"},
        "nominal_at": {"S": "t"},
        "reap_shard": {"S": "p01"},
        "reap_at": {"S": "t"},
    }
    bill(ledger, "TransactWriteItems", {"TransactItems": [{"Put": {"TableName": "r", "Item": run}}]})
    assert ledger.write_units == 2 + 1  # the item twice (transaction), and the reap index


def test_an_update_moving_an_index_key_costs_a_delete_and_a_put_and_a_removal_costs_one() -> None:
    ledger = Ledger(NAMES)
    bill(
        ledger,
        "UpdateItem",
        {
            "TableName": "r",
            "UpdateExpression": "SET #status = :s, reap_at = :lease",
            "ExpressionAttributeNames": {"#status": "status"},
        },
    )
    assert ledger.write_units == 1 + 2  # reap index key moves (status is projected there too)
    ledger.reset()
    bill(
        ledger,
        "UpdateItem",
        {
            "TableName": "r",
            "UpdateExpression": "SET #result = :r REMOVE reap_shard, reap_at",
            "ExpressionAttributeNames": {"#result": "result"},
        },
    )
    assert ledger.write_units == 1 + 1


def test_reads_round_up_to_4kb_and_eventually_consistent_ones_cost_half() -> None:
    ledger = Ledger(NAMES)
    bill(ledger, "Query", {"TableName": "j"}, {"Items": []})
    bill(
        ledger, "GetItem", {"TableName": "r", "ConsistentRead": True}, {"Item": {"run_id": {"S": "x" * 5000}}}
    )
    assert ledger.read_units == 0.5 + 2


def test_batched_statements_cost_each_the_single_write_it_is_and_failed_ones_nothing() -> None:
    from duetime.adapters.dynamodb import conditions, partiql
    from duetime.adapters.dynamodb.codec import string_attribute

    ledger = Ledger(NAMES)
    lease = partiql.update(
        "r",
        {"job_id": string_attribute("j"), "occurrence": string_attribute("o")},
        conditions.LEASE_HELD,
        {
            k: string_attribute("x")
            for k in (":running", ":owner", ":attempt", ":now", ":lease_expires_at", ":reap_at")
        },
        sets=("lease_expires_at", "reap_at"),
    )
    slot = partiql.insert(
        "c",
        {"pk": string_attribute("team#t#slots#0"), "sk": string_attribute("slot#00001")},
        conditions.SLOT_IS_NEW,
    )
    statements = [lease.request(), lease.request(), slot.request()]
    responses = [{}, {"Error": {"Code": "ConditionalCheckFailed"}}, {}]
    bill(ledger, "BatchExecuteStatement", {"Statements": statements}, {"Responses": responses})
    assert ledger.write_units == (1 + 2) + 1  # the lease moves the reap key (as UpdateItem); the slot put
