"""Contract suites: one set of tests per port, run against the in-memory twin and the emulator alike (as
APScheduler 4 runs one suite against every data store). Only the emulator parameters are marked
``integration`` and ask for the emulators, so ``pytest -m "not integration"`` runs the twin's halves alone."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from duetime.adapters.aws.clients import new_client
from duetime.adapters.dynamodb.tables import TableNames, create_tables

from ..emulators import require_emulators

TWIN = "memory"


def against(emulator: str) -> list[object]:
    """A contract's parameters: the twin, and ``emulator`` marked ``integration``."""
    return [TWIN, pytest.param(emulator, marks=pytest.mark.integration)]


@pytest.fixture
def emulators() -> tuple[str, str]:
    return require_emulators()


@pytest.fixture
def dynamodb_tables(emulators: tuple[str, str]) -> Iterator[tuple[Any, TableNames]]:
    """A client (the lean transport, as duetime runs) and a fresh set of duetime's tables on DynamoDB Local,
    named for this test alone, deleted after it."""
    client = new_client("dynamodb")
    prefix = f"c{uuid.uuid4().hex[:10]}"
    names = TableNames(f"{prefix}-jobs", f"{prefix}-runs", f"{prefix}-control")
    create_tables(client, names)
    yield client, names
    for table in (names.jobs, names.runs, names.control):
        client.delete_table(TableName=table)
