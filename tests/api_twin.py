"""The api function on the in-memory twin, for tests that call the API in-process: a service on a
``MemoryStore`` and ``InMemoryCatalog`` with a manual clock, served by ``duetime.api.app``, and one team."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from duetime.adapters.memory import InMemoryCatalog, MemoryQueue, MemoryStore
from duetime.api import app as api
from duetime.api.service import JobService
from duetime.domain.clock import ManualClock
from duetime.domain.rate_limit import InMemoryRateLimiter


@dataclass
class TwinApi:
    service: JobService
    token: str  # team ``team_id``'s admin token
    clock: ManualClock
    store: MemoryStore
    catalog: InMemoryCatalog
    queue: MemoryQueue


@contextmanager
def serving_twin(now: datetime, team_id: str = "alpha") -> Iterator[TwinApi]:
    """The app serving a fresh twin until the block ends (then the app's defaults again)."""
    store = MemoryStore()
    clock = ManualClock(now)
    catalog = InMemoryCatalog(store)
    queue = MemoryQueue(clock)
    service = JobService(catalog, store, queue, clock)
    _, token = service.create_team(team_id)
    limiter = InMemoryRateLimiter()
    api.use_service(lambda: service)
    api.use_rate_limiter(lambda: limiter)
    try:
        yield TwinApi(service, token, clock, store, catalog, queue)
    finally:
        api.use_service(None)  # type: ignore[arg-type]
        api.use_rate_limiter(None)
