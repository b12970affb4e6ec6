"""An in-memory twin of the DynamoDB store and the SQS run queue, for logic tests that run in milliseconds.

``MemoryStore`` implements ``JobStore``, ``RunStore``, ``PollerLeaseStore`` and ``TeamStore``, and
``MemoryQueue`` implements ``RunQueue`` (with the consumer side ``SqsConsumer`` offers), under the same
contracts as ``DynamoStore`` and ``SqsRunQueue``: the same named conditions, a lost race as ``False`` or
``None``, instants stored to the whole second (poller leases to the millisecond) and compared as stored.
``MemoryAlerts`` keeps the alerts published, ``MemoryProvisionedWorkers`` the workers the prescaler asked
for, ``MemoryEventPollers`` the event source's provisioned mode it switched. ``InMemoryCatalog`` is the API's
catalog (``Catalog``) on a ``MemoryStore``'s tables, as ``DynamoCatalog`` is on ``DynamoStore``'s
(``tests/contract/test_catalog_contract.py``).
``tests/integration/test_store_contract.py`` holds the store and DynamoDB Local to one suite.

What it does not model: throughput and throttling, latency, AWS's size and count limits (item and
transaction bytes, 100 actions a transaction, 25 statements a batch), eventually consistent index reads
(the due and reap indexes here are always current), TTL expiry, SQS's at-least-once duplicates and
long polling. A test that passes on the twin says the logic is right under the contract; it says nothing
about cost, speed or limits, which only DynamoDB Local, LocalStack and AWS can show.
"""

from duetime.adapters.memory.alerts import MemoryAlerts
from duetime.adapters.memory.catalog import InMemoryCatalog
from duetime.adapters.memory.provisioned import MemoryEventPollers, MemoryProvisionedWorkers
from duetime.adapters.memory.queue import MemoryQueue
from duetime.adapters.memory.store import MemoryStore

__all__ = [
    "InMemoryCatalog",
    "MemoryAlerts",
    "MemoryEventPollers",
    "MemoryProvisionedWorkers",
    "MemoryQueue",
    "MemoryStore",
]
