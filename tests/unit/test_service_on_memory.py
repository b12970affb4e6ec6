"""``JobService`` and ``TeamAdmin`` on the in-memory twin (``InMemoryCatalog`` on a ``MemoryStore``,
``MemoryQueue``): the API's logic in milliseconds, no emulator, under the catalog's contract
(``tests/contract/test_catalog_contract.py``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from duetime.adapters.memory import InMemoryCatalog, MemoryQueue, MemoryStore
from duetime.api.service import JobService
from duetime.api.team_admin import TeamAdmin
from duetime.domain.clock import ManualClock
from duetime.domain.errors import BadRequest, Conflict, InvalidInput, QuotaExceeded, Unauthorized
from duetime.domain.models import RunStatus
from duetime.domain.tokens import TokenIn, TokenScope
from duetime.ports import RunMessage

from ..twin_support import T0

JOB: dict[str, Any] = {
    "name": "nightly sales report",
    "schedule": {"cron": "0 0 * * *", "timezone": "Europe/Berlin"},
    "target": {"url": "https://example.com/hook"},
    "labels": {"env": "prod"},
}


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def queue(clock: ManualClock) -> MemoryQueue:
    return MemoryQueue(clock)


@pytest.fixture
def service(store: MemoryStore, queue: MemoryQueue, clock: ManualClock) -> JobService:
    return JobService(InMemoryCatalog(store), store, queue, clock)


def bearer(token: str) -> str:
    return f"Bearer {token}"


def test_a_team_issues_and_revokes_named_tokens_each_authenticating_until_revoked(
    service: JobService,
) -> None:
    team, admin_token = service.create_team("alpha")
    caller = service.authenticate(bearer(admin_token))
    assert caller.team == team and caller.token.scope is TokenScope.ADMIN

    reader, reader_token = service.issue_token_for(caller, TokenIn(name="dashboard", scope=TokenScope.READ))
    assert service.authenticate(bearer(reader_token)).token.scope is TokenScope.READ
    assert [token.name for token in service.tokens(caller)] == ["admin", "dashboard"]

    service.revoke_token(caller, reader.token_id)

    with pytest.raises(Unauthorized):
        service.authenticate(bearer(reader_token))
    with pytest.raises(Conflict):  # the team's last admin token stays
        service.revoke_token(caller, caller.token.token_id)
    audit = TeamAdmin(service.catalog, service.clock).audit("alpha")
    assert [event.action for event in audit] == ["revoke-token", "issue-token", "create"]


def test_a_rotation_retires_every_older_token_and_the_team_is_read_from_the_store_too(
    service: JobService, store: MemoryStore
) -> None:
    _, first = service.create_team("alpha")
    admin = TeamAdmin(service.catalog, service.clock, actor="cli:test@host")

    team, second = admin.rotate_token("alpha")

    with pytest.raises(Unauthorized, match="rotated out"):
        service.authenticate(bearer(first))
    assert service.authenticate(bearer(second)).team == team
    assert store.get_team("alpha") == team  # what the poller and the worker read


def test_jobs_created_are_listed_searched_and_written_once_per_idempotency_key(service: JobService) -> None:
    team, _ = service.create_team("alpha")
    first = service.create_job(team, JOB, idempotency_key="k1")
    assert service.create_job(team, JOB, idempotency_key="k1").id == first.id
    other = service.create_job(team, {**JOB, "name": "backup", "labels": {"env": "dev"}})

    listed = service.list_jobs(team, 10, None)
    assert sorted(job.id for job in listed.items) == sorted([first.id, other.id])
    assert [job.id for job in service.list_jobs(team, 10, None, label="env:prod").items] == [first.id]
    assert [job.id for job in service.list_jobs(team, 10, None, q="sal rep").items] == [first.id]
    assert service.job_counts(team) == (2, 0)
    with pytest.raises(BadRequest):
        service.list_jobs(team, 10, "not a cursor")


def test_a_job_past_the_teams_quota_is_refused_naming_it(service: JobService) -> None:
    team, _ = service.create_team("alpha", exact_quota=1)
    service.create_job(team, {**JOB, "exact": True})

    with pytest.raises(QuotaExceeded, match="exact-time quota"):
        service.create_job(team, {**JOB, "exact": True})


PORT_RULE = "targets may use ports 80, 443 and 1024-65535, and the ports the installation adds with " + (
    "allowed_target_ports (DUETIME_ALLOWED_TARGET_PORTS)"
)
ON_PORT_22 = {"url": "http://93.184.216.34:22/hook"}  # a public address: no lookup, only the port refused


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"target": ON_PORT_22}, "target.url"),
        ({"notify": [{"type": "webhook", "events": ["failed"], **ON_PORT_22}]}, "notify.0.url"),
    ],
    ids=["a target", "a notification webhook"],
)
def test_a_url_on_a_port_targets_may_not_use_is_a_422_naming_its_field_and_the_setting(
    service: JobService, change: dict[str, Any], field: str
) -> None:
    team, _ = service.create_team("alpha")
    with pytest.raises(InvalidInput) as created:
        service.create_job(team, {**JOB, **change})
    job = service.create_job(team, JOB)
    with pytest.raises(InvalidInput) as updated:
        service.update_job(team, job.id, change)

    for refused in (created.value, updated.value):
        assert (refused.status, refused.field) == (422, field)
        assert refused.message == f"target port 22 refused: {PORT_RULE}"
    assert service.job_counts(team) == (1, 0)


def test_an_installation_allows_more_ports_to_targets_and_webhooks(
    store: MemoryStore, queue: MemoryQueue, clock: ManualClock
) -> None:
    service = JobService(InMemoryCatalog(store), store, queue, clock, allowed_target_ports=[22])
    team, _ = service.create_team("alpha")
    webhook = {"type": "webhook", "events": ["failed"], **ON_PORT_22}
    job = service.create_job(team, {**JOB, "target": ON_PORT_22, "notify": [webhook]})

    assert job.target.url == ON_PORT_22["url"]
    with pytest.raises(InvalidInput, match="target port 25 refused"):
        service.create_job(team, {**JOB, "target": {"url": "http://93.184.216.34:25/hook"}})


def test_an_edit_and_a_delete_are_in_the_jobs_history_newest_first(
    service: JobService, clock: ManualClock
) -> None:
    team, _ = service.create_team("alpha")
    job = service.create_job(team, JOB)
    clock.advance(5)
    service.update_job(team, job.id, {"paused": True})
    clock.advance(5)
    service.delete_job(team, job.id)

    history = service.job_history(team, job.id, 10, None)

    assert [entry.action for entry in history.items] == ["delete", "pause", "create"]


def test_a_triggered_run_is_queued_listed_and_cancelled_through_the_shared_tables(
    service: JobService, queue: MemoryQueue
) -> None:
    team, _ = service.create_team("alpha")
    job = service.create_job(team, JOB)

    run = service.trigger(team, job.id)

    assert queue.pending() == [RunMessage(run.run_id, 1)]
    assert [listed.run_id for listed in service.list_runs(team, job.id, 10, None).items] == [run.run_id]
    assert service.cancel_run(team, run.run_id).status is RunStatus.CANCELLED  # the store's write
    assert service.get_run(team, run.run_id).status is RunStatus.CANCELLED  # the catalog's read


# A request lands at any fraction of a second; jobs are scheduled from the whole second after it (the job's
# ``created_at``). A one-time ``at`` inside that gap was once accepted (later than ``now``) and then had no
# next fire: a job made and never run, with a 201. Whatever the fraction, an accepted job fires.
@pytest.mark.parametrize("fraction", [0.001, 0.4, 0.999])
@pytest.mark.parametrize("ahead", [0.2, 0.999, 1.0, 1.5, 2.0, 3.7])
def test_a_one_time_job_accepted_at_any_fraction_of_a_second_has_its_fire_and_one_too_soon_is_a_422(
    service: JobService, clock: ManualClock, fraction: float, ahead: float
) -> None:
    team, _ = service.create_team("alpha")
    clock.set(T0 + timedelta(seconds=fraction))
    at = clock.now() + timedelta(seconds=ahead)
    body = {**JOB, "schedule": {"at": at.isoformat()}}
    first_second = T0 + timedelta(seconds=1)  # the whole second after the request: the earliest fire
    kept = service.create_job(team, JOB)
    if at.replace(microsecond=0) <= first_second:
        with pytest.raises(InvalidInput) as created:
            service.create_job(team, body)
        with pytest.raises(InvalidInput) as updated:
            service.update_job(team, kept.id, {"schedule": body["schedule"]})
        for refused in (created.value, updated.value):
            assert (refused.status, refused.field) == (422, "schedule.at")
            assert first_second.strftime("%H:%M:%S") in refused.message
        assert service.job_counts(team) == (1, 0)
        return
    job = service.create_job(team, body)
    moved = service.update_job(team, kept.id, {"schedule": body["schedule"]})
    for accepted in (job, moved):
        assert accepted.state.next_nominal_at == at.replace(microsecond=0)
        assert accepted.state.next_fire_at is not None and accepted.state.next_fire_at > clock.now()
