"""Creating jobs in tests the way the service creates them: through ``JobService.create_job`` (validation,
the target guard, the team's exact quota, the partition's low-water mark, one transaction), with the
service's clock set to the instant the test wants the job created at."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from duetime.adapters.dynamodb.catalog import DynamoCatalog
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.memory import MemoryStore
from duetime.api.service import JobService
from duetime.domain.claim_plan import initial_state
from duetime.domain.clock import ManualClock
from duetime.domain.ids import new_job_id
from duetime.domain.models import Job, JobSpec, Team
from duetime.domain.timeutil import ceil_seconds
from duetime.ports import RunMessage
from duetime.wiring import run_budget


class _NoQueue:
    """Creating a job queues nothing; a service that tried would fail the test here."""

    def send(self, messages: Sequence[RunMessage], delay_seconds: int = 0) -> None:
        raise AssertionError(f"creating a job queued {messages}")


def create_job(store: DynamoStore | MemoryStore, team: str, body: dict[str, Any], now: datetime) -> Job:
    """The job ``POST /v1/jobs`` would create for ``team`` at ``now`` (the team is created if missing;
    private target addresses are allowed, as ``duetime local`` allows them). On the in-memory twin, which has
    no catalog: the same job (spec validated as the service validates it, initial state from ``now``),
    written as the catalog writes it."""
    if isinstance(store, MemoryStore):
        spec = JobSpec.model_validate(body, context={"now": now})
        stamp = ceil_seconds(now)
        job = Job(**spec.model_dump(), id=new_job_id(), team=team, created_at=stamp, updated_at=stamp)
        job = job.model_copy(update={"state": initial_state(job, stamp)})
        store.put_job(job, now)
        return job
    record = store.get_team(team)
    if record is None:
        record = Team(team_id=team)
        store.put_team(record)
    catalog = DynamoCatalog(store.client, store.names)
    clock = ManualClock(now)
    budget = run_budget(catalog)
    service = JobService(catalog, store, _NoQueue(), clock, allow_private_targets=True, run_budget=budget)
    return service.create_job(record, body)
