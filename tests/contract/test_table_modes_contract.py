"""The tables' capacity mode (``TableCapacityModes``), on the twin and on DynamoDB Local alike: the switch to
on demand and back, and AWS's limit of four switches to on demand in a rolling 24 hours, which DynamoDB Local
does not check and both implementations enforce themselves."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from duetime.adapters.dynamodb.table_modes import DynamoTableModes
from duetime.adapters.dynamodb.tables import TableNames
from duetime.adapters.memory.table_modes import MemoryTableModes
from duetime.ports import SwitchLimitReached, TableCapacityModes

from .conftest import TWIN, against

T0 = datetime(2026, 12, 7, 5, 0, 0, tzinfo=UTC)


def provisioned(client: Any, names: TableNames, units: int = 5) -> None:
    """Each table and index in provisioned mode at ``units`` (as the stack's ``capacity_mode=provisioned``
    creates them), each index one unit less than its table so a restore that mixed them up shows."""
    for name in (names.jobs, names.runs, names.control):
        table = client.describe_table(TableName=name)["Table"]
        client.update_table(
            TableName=name,
            BillingMode="PROVISIONED",
            ProvisionedThroughput={"ReadCapacityUnits": units, "WriteCapacityUnits": units},
            GlobalSecondaryIndexUpdates=[
                {
                    "Update": {
                        "IndexName": index["IndexName"],
                        "ProvisionedThroughput": {
                            "ReadCapacityUnits": units - 1,
                            "WriteCapacityUnits": units - 1,
                        },
                    }
                }
                for index in table.get("GlobalSecondaryIndexes", [])
            ],
        )


@pytest.fixture(params=against("dynamodb"))
def tables(request: pytest.FixtureRequest) -> Iterator[TableCapacityModes]:
    if request.param == TWIN:
        yield MemoryTableModes("provisioned")
        return
    client, names = request.getfixturevalue("dynamodb_tables")
    provisioned(client, names)
    yield DynamoTableModes(client, names)


def test_the_tables_switch_to_on_demand_and_back(tables: TableCapacityModes) -> None:
    assert tables.mode() == "provisioned"
    tables.switch_to_on_demand(T0)
    assert tables.mode() == "on_demand"
    assert tables.switches_to_on_demand(T0 - timedelta(hours=1)) == [T0]
    tables.switch_to_provisioned()
    assert tables.mode() == "provisioned"


def test_a_fifth_switch_to_on_demand_within_a_rolling_day_is_refused_and_switches_nothing(
    tables: TableCapacityModes,
) -> None:
    for hour in range(4):
        tables.switch_to_on_demand(T0 + timedelta(hours=hour))
        tables.switch_to_provisioned()
    with pytest.raises(SwitchLimitReached):
        tables.switch_to_on_demand(T0 + timedelta(hours=23, minutes=59))
    assert tables.mode() == "provisioned"
    assert len(tables.switches_to_on_demand(T0)) == 4
    tables.switch_to_on_demand(T0 + timedelta(hours=24, seconds=1))  # the first switch has aged out
    assert tables.mode() == "on_demand"


@pytest.mark.integration
def test_the_way_back_puts_each_table_and_index_at_the_capacity_it_had(
    dynamodb_tables: tuple[Any, TableNames],
) -> None:
    client, names = dynamodb_tables
    provisioned(client, names, units=7)
    tables = DynamoTableModes(client, names)
    tables.switch_to_on_demand(T0)
    tables.switch_to_provisioned()
    for name in (names.jobs, names.runs, names.control):
        table = client.describe_table(TableName=name)["Table"]
        assert table["BillingModeSummary"]["BillingMode"] == "PROVISIONED"
        assert table["ProvisionedThroughput"]["WriteCapacityUnits"] == 7
        for index in table.get("GlobalSecondaryIndexes", []):
            assert index["ProvisionedThroughput"]["WriteCapacityUnits"] == 6, index["IndexName"]


@pytest.mark.integration
def test_two_looks_at_once_never_both_count_themselves_under_the_limit(
    dynamodb_tables: tuple[Any, TableNames],
) -> None:
    """The log is written under ``TABLE_MODES_AS_READ``: a look that read it before another's switch loses
    the race and switches nothing."""
    client, names = dynamodb_tables
    provisioned(client, names)
    first, second = DynamoTableModes(client, names), DynamoTableModes(client, names)
    stale = second._read_log()  # read before the first look switches
    first.switch_to_on_demand(T0)
    with pytest.raises(RuntimeError, match="another look"):
        second._write_log([*stale[0], T0], stale[1], stale[2])
    assert len(first.switches_to_on_demand(T0 - timedelta(hours=1))) == 1


def billing_mode(client: Any, table: str) -> str:
    return str(client.describe_table(TableName=table)["Table"]["BillingModeSummary"]["BillingMode"])


class RefusesAnUpdate:
    """A DynamoDB client whose ``refuse_at``-th UpdateTable fails, as AWS's does for a table being updated."""

    def __init__(self, client: Any, refuse_at: int) -> None:
        self.client, self.refuse_at, self.updates = client, refuse_at, 0

    def update_table(self, **request: Any) -> Any:
        self.updates += 1
        if self.updates == self.refuse_at:
            raise RuntimeError("ResourceInUseException: the table is being updated")
        return self.client.update_table(**request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


@pytest.mark.integration
def test_a_switch_that_stopped_half_way_is_finished_by_the_next_one_without_touching_what_it_switched(
    dynamodb_tables: tuple[Any, TableNames],
) -> None:
    """A look that switched the jobs table and failed on the next (a table being updated) left the tables in
    two modes: the next switch switches only what is left, each way (AWS refuses a switch to the mode a
    table is in), and the capacities come back from the first look's log."""
    client, names = dynamodb_tables
    provisioned(client, names, units=6)
    everything = (names.jobs, names.runs, names.control)
    with pytest.raises(RuntimeError, match="being updated"):
        DynamoTableModes(RefusesAnUpdate(client, refuse_at=2), names).switch_to_on_demand(T0)
    tables = DynamoTableModes(client, names)
    assert [billing_mode(client, n) for n in everything] == ["PAY_PER_REQUEST", "PROVISIONED", "PROVISIONED"]
    tables.switch_to_on_demand(T0 + timedelta(minutes=5))
    assert {billing_mode(client, n) for n in everything} == {"PAY_PER_REQUEST"}
    with pytest.raises(RuntimeError, match="being updated"):
        DynamoTableModes(RefusesAnUpdate(client, refuse_at=2), names).switch_to_provisioned()
    tables.switch_to_provisioned()
    assert {billing_mode(client, n) for n in everything} == {"PROVISIONED"}
    for name in everything:
        assert (
            client.describe_table(TableName=name)["Table"]["ProvisionedThroughput"]["WriteCapacityUnits"] == 6
        )
