"""A DynamoStore on tables of its own in DynamoDB Local, for tests that read its tables and indexes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from duetime.adapters.aws.clients import new_client
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.dynamodb.tables import TableNames, create_tables


@contextmanager
def store_on_fresh_tables(lease_check: timedelta) -> Iterator[DynamoStore]:
    client = new_client("dynamodb")  # as duetime runs: the lean transport
    prefix = f"r{uuid.uuid4().hex[:10]}"
    names = TableNames(f"{prefix}-jobs", f"{prefix}-runs", f"{prefix}-control")
    create_tables(client, names)
    try:
        yield DynamoStore(client, names, lease_check=lease_check)
    finally:
        for table in (names.jobs, names.runs, names.control):
            client.delete_table(TableName=table)
