"""Creating jobs in tests the way the service creates them: through ``JobService.create_job`` (validation,
the target guard, the team's exact quota, the partition's low-water mark, one transaction), with the
service's clock set to the instant the test wants the job created at."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from duetime.adapters.dynamodb.catalog import DynamoCatalog
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.clock import ManualClock
from duetime.models import Job, Team
from duetime.ports import RunMessage
from duetime.service import JobService


class _NoQueue:
    """Creating a job queues nothing; a service that tried would fail the test here."""

    def send(self, messages: Sequence[RunMessage], delay_seconds: int = 0) -> None:
        raise AssertionError(f"creating a job queued {messages}")


def create_job(store: DynamoStore, team: str, body: dict[str, Any], now: datetime) -> Job:
    """The job ``POST /v1/jobs`` would create for ``team`` at ``now`` (the team is created if missing;
    private target addresses are allowed, as ``duetime local`` allows them)."""
    record = store.get_team(team)
    if record is None:
        record = Team(team_id=team)
        store.put_team(record)
    catalog = DynamoCatalog(store.client, store.names)
    service = JobService(catalog, store, _NoQueue(), ManualClock(now), allow_private_targets=True)
    return service.create_job(record, body)
