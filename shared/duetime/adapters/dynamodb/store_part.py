"""What every part of ``DynamoStore`` holds: the client, table names, reap check and claim pool."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import TYPE_CHECKING

from duetime.adapters.dynamodb import partiql
from duetime.adapters.dynamodb.tables import TableNames

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

    pass


class StorePart:
    """The state ``DynamoStore.__init__`` sets, declared once for the parts it is mixed from."""

    client: DynamoDBClient
    names: TableNames
    lease_check: timedelta  # reap_checks: a waiting run's check after its message is visible
    _claim_pool: ThreadPoolExecutor  # a few batched writes at once (claims, low-water marks)
    # The stored format to write an item in now (``duetime.upgrades.written_format``: the installation's).
    write_format: Callable[[], int]

    def _execute_in_parallel(self, statements: Sequence[partiql.Statement]) -> list[bool]:
        """``partiql.execute`` for many statements, a request of 25 per thread of the claim pool."""
        size = partiql.BATCH_STATEMENTS_MAX
        chunks = [statements[i : i + size] for i in range(0, len(statements), size)]
        if len(chunks) <= 1:
            return partiql.execute(self.client, statements) if statements else []
        results = self._claim_pool.map(lambda chunk: partiql.execute(self.client, chunk), chunks)
        return [written for chunk in results for written in chunk]
