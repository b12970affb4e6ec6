"""The DynamoDB store: jobs, runs, team slots, poller leases, deadlines and the notification outbox, through
the low-level client. ``DynamoStore`` is composed of one part per seam, as the in-memory twin
(``adapters.memory``) is.

Every write names its condition (``conditions.py``). ``ConditionalCheckFailed`` is a lost race and comes
back as ``False``/``None``; anything else is a real error and propagates.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import TYPE_CHECKING

from duetime.adapters.dynamodb.alerts import DynamoAlerts
from duetime.adapters.dynamodb.claims import DynamoClaims
from duetime.adapters.dynamodb.jobs import DynamoJobs
from duetime.adapters.dynamodb.outbox import DynamoOutbox
from duetime.adapters.dynamodb.poller_leases import DynamoPollerLeases
from duetime.adapters.dynamodb.quarantine_record import DynamoQuarantineRecord
from duetime.adapters.dynamodb.reap_checks import DEFAULT_LEASE_CHECK
from duetime.adapters.dynamodb.reap_index import DynamoReapIndex
from duetime.adapters.dynamodb.reconciler import DynamoReconciler
from duetime.adapters.dynamodb.runs import DynamoRuns
from duetime.adapters.dynamodb.tables import TableNames
from duetime.adapters.dynamodb.teams import DynamoTeams
from duetime.adapters.dynamodb.worker_batches import FreedSlots
from duetime.domain.stored_format import first_format
from duetime.ports import (
    DeadlineStore,
    JobStore,
    NotificationOutbox,
    PollerLeaseStore,
    RunStore,
    TeamStore,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

    pass


class DynamoStore(
    DynamoJobs,
    DynamoClaims,
    DynamoRuns,
    DynamoReapIndex,
    DynamoTeams,
    DynamoPollerLeases,
    DynamoOutbox,
    DynamoAlerts,
    DynamoQuarantineRecord,
    DynamoReconciler,
):
    """Implements ``JobStore``, ``RunStore``, ``TeamStore``, ``PollerLeaseStore``, ``DeadlineStore`` and
    ``NotificationOutbox`` (see ``duetime.ports`` for the contracts)."""

    def __init__(
        self,
        client: DynamoDBClient,
        names: TableNames | None = None,
        claim_concurrency: int = 4,
        lease_check: timedelta = DEFAULT_LEASE_CHECK,
        write_format: Callable[[], int] = first_format,
    ) -> None:
        self.client = client
        self.names = names or TableNames()
        self.lease_check = lease_check  # a waiting run's reap check: its message visible + this
        self.write_format = write_format  # an item's stored format, asked as it is written
        self._marks_known: set[int] = set()  # partitions whose low-water mark is known to exist
        self.freed_slots = FreedSlots()  # slots its workers freed lately: a batch's first guess
        # A midnight second holds thousands of claims: their batched writes go out a few requests at a time.
        self._claim_pool = ThreadPoolExecutor(max_workers=claim_concurrency, thread_name_prefix="claim")


def _implements_the_ports(
    store: DynamoStore,
) -> tuple[JobStore, RunStore, TeamStore, PollerLeaseStore, DeadlineStore, NotificationOutbox]:
    """Never called: mypy checks here that ``DynamoStore`` keeps every port's signatures."""
    return store, store, store, store, store, store
