"""One contract for every catalog (``duetime.ports.Catalog``): the tests below run against the in-memory twin
(``InMemoryCatalog`` on a ``MemoryStore``) and DynamoDB Local (``DynamoCatalog`` on ``DynamoStore``'s
tables) alike. They read as the port's contract: teams, named tokens and the audit trail; jobs with their
quotas, idempotency keys, versions, search and history; a job's runs; cursors.

What the twin is for: logic tests of ``JobService`` and ``TeamAdmin`` without emulators
(``tests/unit/test_service_on_memory.py``). What it cannot show: DynamoDB's limits, costs and eventual
consistency, which stay the business of the integration tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from duetime.adapters.dynamodb.catalog import DynamoCatalog
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.adapters.memory import InMemoryCatalog, MemoryStore
from duetime.api.team_admin import hash_token
from duetime.domain.calendars import Calendar, CalendarSource, calendar_change
from duetime.domain.catalog import (
    AuditEvent,
    CalendarGone,
    IdempotencyMismatch,
    IdempotencyRecord,
    InvalidCursor,
    KeyTaken,
    QuotaExceeded,
)
from duetime.domain.claim_plan import PlannedRun, new_run
from duetime.domain.ids import make_manual_run_id
from duetime.domain.job_history import change
from duetime.domain.models import CronSchedule, Exclusion, Job, Run, RunResult, RunStatus, Team
from duetime.domain.tokens import ApiToken, TokenScope

from ..twin_support import a_job, at
from .conftest import TWIN, against

DEADLINE = timedelta(minutes=10)


@dataclass
class Subject:
    """A catalog under contract, and the store that shares its tables (to move runs as a worker would)."""

    catalog: Any  # InMemoryCatalog | DynamoCatalog
    store: Any  # MemoryStore | DynamoStore


def _memory() -> Iterator[Subject]:
    store = MemoryStore()
    yield Subject(InMemoryCatalog(store), store)


@pytest.fixture(params=against("dynamodb"))
def subject(request: pytest.FixtureRequest) -> Iterator[Subject]:
    if request.param == TWIN:
        yield from _memory()
        return
    client, names = request.getfixturevalue("dynamodb_tables")
    yield Subject(DynamoCatalog(client, names), DynamoStore(client, names))


@pytest.fixture
def catalog(subject: Subject) -> Any:
    return subject.catalog


def a_token(team_id: str, name: str = "admin", generation: int = 0, **fields: Any) -> ApiToken:
    return ApiToken(
        token_hash=hash_token(f"{team_id}-{name}-{generation}"),
        team_id=team_id,
        generation=generation,
        name=name,
        scope=fields.pop("scope", TokenScope.ADMIN),
        created_at=fields.pop("created_at", at(0.4)),
        created_by=fields.pop("created_by", "cli:test@host"),
    )


def an_event(team_id: str, action: str = "update", **detail: Any) -> AuditEvent:
    return AuditEvent(team_id, action, at(0.4), "cli:test@host", detail)


def a_team(catalog: Any, team_id: str = "team-a", **limits: Any) -> Team:
    team = Team(team_id=team_id, name=team_id, **limits)
    assert catalog.create_team(team, a_token(team_id), an_event(team_id, "create"))
    return team


def write(catalog: Any, team: Team, job: Job, key: str | None = None, body: str = "body") -> str:
    record = IdempotencyRecord(team.team_id, key, body, job.id) if key else None
    job_id: str = catalog.insert_job(job, team, at(0), record, change(None, job, at(0), "api"))
    return job_id


def edited(job: Job, **fields: Any) -> Job:
    return job.model_copy(
        update={**fields, "state": job.state.model_copy(update={"version": job.state.version + 1})}
    )


def every(listing: Any, limit: int = 2) -> list[Any]:
    """Every item of a listing (``listing(limit, cursor)``), page by page."""
    items: list[Any] = []
    cursor = None
    for _ in range(100):
        page = listing(limit, cursor)
        assert len(page.items) <= limit
        items += page.items
        cursor = page.cursor
        if cursor is None:
            return items
    raise AssertionError("the listing never ended")


def a_run(job: Job, seconds: float, manual: bool = False) -> Run:
    nominal = at(seconds)
    run_id = make_manual_run_id(job.id, nominal) if manual else None
    return new_run(job, PlannedRun(nominal, nominal), nominal, nominal + DEADLINE, run_id)


# --- teams and tokens -----------------------------------------------------------------------------------


def test_a_new_team_is_written_at_revision_1_with_its_first_token_its_audit_row_and_no_jobs(
    catalog: Any,
) -> None:
    team = a_team(catalog)

    assert catalog.get_team("team-a") == team
    assert catalog.team_revision("team-a") == (team, 1)
    assert catalog.job_counts("team-a") == (0, 0)
    assert catalog.list_teams() == [team]
    first = a_token("team-a", created_at=at(0))  # kept to the second
    assert catalog.token_record(first.token_hash) == first
    assert catalog.team_tokens("team-a") == [first]
    assert catalog.audit_events("team-a") == [AuditEvent("team-a", "create", at(0), "cli:test@host", {})]


def test_a_team_id_taken_is_refused_and_nothing_of_the_second_team_is_written(catalog: Any) -> None:
    team = a_team(catalog)
    other = Team(team_id="team-a", name="another", max_jobs=3)

    assert not catalog.create_team(other, a_token("team-a", "second"), an_event("team-a", "create"))

    assert catalog.get_team("team-a") == team
    assert catalog.token_record(a_token("team-a", "second").token_hash) is None
    assert len(catalog.audit_events("team-a")) == 1


def test_unknown_teams_and_tokens_are_none_and_list_teams_gives_every_team_by_id(catalog: Any) -> None:
    assert catalog.get_team("nobody") is None
    assert catalog.team_revision("nobody") is None
    assert catalog.token_record(hash_token("nothing")) is None
    assert catalog.team_tokens("nobody") == []
    assert catalog.list_teams() == []
    teams = [a_team(catalog, team_id) for team_id in ("team-c", "team-a", "team-b")]
    assert catalog.list_teams() == sorted(teams, key=lambda team: team.team_id)


def test_a_team_change_is_written_over_the_settings_it_was_read_from_as_the_next_revision(
    catalog: Any,
) -> None:
    team = a_team(catalog)
    after = team.model_copy(update={"max_concurrency": 7})

    assert catalog.replace_team(team, 1, after, an_event("team-a", max_concurrency=(50, 7)))

    assert catalog.team_revision("team-a") == (after, 2)
    assert catalog.get_team("team-a") == after
    newest = catalog.audit_events("team-a")[0]
    assert (newest.action, newest.detail) == ("update", {"max_concurrency": [50, 7]})  # as JSON gives it back


def test_a_change_computed_from_settings_changed_since_is_a_lost_race_and_writes_nothing(
    catalog: Any,
) -> None:
    team = a_team(catalog)
    first = team.model_copy(update={"max_concurrency": 7})
    assert catalog.replace_team(team, 1, first, an_event("team-a"))

    stale = team.model_copy(update={"disabled": True})
    assert not catalog.replace_team(team, 1, stale, an_event("team-a", "disable"))

    assert catalog.team_revision("team-a") == (first, 2)
    assert [event.action for event in catalog.audit_events("team-a")] == ["update", "create"]


def test_two_changes_from_one_revision_that_agree_on_the_settings_are_serialised_by_the_audit_row(
    catalog: Any,
) -> None:
    team = a_team(catalog)
    assert catalog.replace_team(
        team, 1, team, an_event("team-a", "issue-token"), issue=a_token("team-a", "ci")
    )

    assert not catalog.replace_team(
        team, 1, team, an_event("team-a", "issue-token"), issue=a_token("team-a", "x")
    )

    assert catalog.token_record(a_token("team-a", "x").token_hash) is None
    assert [token.name for token in catalog.team_tokens("team-a")] == sorted(
        ["admin", "ci"], key=lambda name: a_token("team-a", name).token_id
    )


def test_a_token_issued_with_a_change_authenticates_and_is_listed_until_a_change_revokes_it(
    catalog: Any,
) -> None:
    team = a_team(catalog)
    reader = a_token("team-a", "reader", scope=TokenScope.READ, created_at=at(2), created_by="")
    assert catalog.replace_team(team, 1, team, an_event("team-a", "issue-token"), issue=reader)

    kept = a_token("team-a", "reader", scope=TokenScope.READ, created_at=at(2), created_by="unknown")
    assert catalog.token_record(reader.token_hash) == kept
    assert kept in catalog.team_tokens("team-a")

    assert catalog.replace_team(team, 2, team, an_event("team-a", "revoke-token"), revoke=reader)
    assert catalog.token_record(reader.token_hash) is None
    assert [token.name for token in catalog.team_tokens("team-a")] == ["admin"]
    assert catalog.team_revision("team-a") == (team, 3)


def test_revoking_a_token_that_is_gone_or_issuing_one_that_exists_is_refused_and_writes_nothing(
    catalog: Any,
) -> None:
    team = a_team(catalog)
    gone = a_token("team-a", "gone")
    assert not catalog.replace_team(team, 1, team, an_event("team-a", "revoke-token"), revoke=gone)
    assert not catalog.replace_team(team, 1, team, an_event("team-a", "issue-token"), issue=a_token("team-a"))
    assert catalog.team_revision("team-a") == (team, 1)
    assert len(catalog.audit_events("team-a")) == 1


def test_audit_events_are_the_newest_first_at_most_limit_to_the_second(catalog: Any) -> None:
    team = a_team(catalog)
    for revision, concurrency in enumerate((2, 3, 4), start=1):
        after = team.model_copy(update={"max_concurrency": concurrency})
        assert catalog.replace_team(team, revision, after, an_event("team-a", max_concurrency=concurrency))
        team = after

    events = catalog.audit_events("team-a", limit=2)

    assert [event.detail for event in events] == [{"max_concurrency": 4}, {"max_concurrency": 3}]
    assert all(event.at == at(0) for event in events)
    assert len(catalog.audit_events("team-a")) == 4


# --- jobs -----------------------------------------------------------------------------------------------


def test_a_new_job_is_written_with_the_teams_counts_and_its_history(catalog: Any) -> None:
    team = a_team(catalog)
    exact, loose = a_job(at(60)), a_job(at(60), exact=False)

    assert write(catalog, team, exact) == exact.id
    assert write(catalog, team, loose) == loose.id

    stored = catalog.get_job(exact.id)
    assert (stored.id, stored.team, stored.name, stored.exact, stored.state.version) == (
        exact.id,
        "team-a",
        "twin",
        True,
        0,
    )
    assert catalog.job_counts("team-a") == (2, 1)
    assert catalog.exact_jobs("team-a") == 1
    assert [entry.action for entry in catalog.job_history(exact.id, 10, None).items] == ["create"]
    assert catalog.get_job("no-such-job") is None


def test_a_second_create_with_the_same_idempotency_key_returns_the_first_job(catalog: Any) -> None:
    team = a_team(catalog)
    first, again = a_job(at(60)), a_job(at(60))
    assert write(catalog, team, first, key="k1") == first.id

    assert write(catalog, team, again, key="k1") == first.id

    assert catalog.get_job(again.id) is None
    assert catalog.job_counts("team-a") == (1, 1)


def test_an_idempotency_key_used_with_another_request_is_refused_and_nothing_is_written(catalog: Any) -> None:
    team = a_team(catalog)
    first, other = a_job(at(60)), a_job(at(60))
    write(catalog, team, first, key="k1")

    with pytest.raises(IdempotencyMismatch):
        write(catalog, team, other, key="k1", body="another body")

    assert catalog.get_job(other.id) is None
    assert catalog.job_counts("team-a") == (1, 1)


def test_a_job_write_past_max_jobs_is_refused_and_nothing_is_written(catalog: Any) -> None:
    team = a_team(catalog, max_jobs=1)
    write(catalog, team, a_job(at(60), exact=False))
    over = a_job(at(60), exact=False)

    with pytest.raises(QuotaExceeded) as refused:
        write(catalog, team, over, key="k2")

    assert (refused.value.team_id, refused.value.which) == ("team-a", "jobs")
    assert catalog.get_job(over.id) is None
    assert catalog.job_counts("team-a") == (1, 0)
    assert catalog.job_history(over.id, 10, None).items == []
    with pytest.raises(QuotaExceeded):  # the key was not kept either: the same request is refused again
        write(catalog, team, over, key="k2")


def test_an_exact_job_past_exact_quota_is_refused_naming_exact(catalog: Any) -> None:
    team = a_team(catalog, exact_quota=1)
    write(catalog, team, a_job(at(60)))
    over = a_job(at(60))

    with pytest.raises(QuotaExceeded) as refused:
        write(catalog, team, over)

    assert refused.value.which == "exact"
    assert catalog.get_job(over.id) is None
    assert catalog.job_counts("team-a") == (1, 1)
    write(catalog, team, a_job(at(60), exact=False))  # a job that is not exact still fits
    assert catalog.job_counts("team-a") == (2, 1)


def test_a_job_is_replaced_only_from_the_version_and_team_read(catalog: Any) -> None:
    team = a_team(catalog)
    job = a_job(at(60), exact=False)
    write(catalog, team, job)
    renamed = edited(job, name="renamed")

    assert catalog.replace_job(job, renamed, team, at(1), change(job, renamed, at(1), "api"))
    assert catalog.get_job(job.id).name == "renamed"
    assert catalog.get_job(job.id).state.version == 1

    assert not catalog.replace_job(job, edited(job, name="stale"), team, at(2))  # version 0 is gone
    other_team = renamed.model_copy(update={"team": "team-b"})
    assert not catalog.replace_job(other_team, edited(other_team, name="theirs"), team, at(2))
    assert catalog.get_job(job.id).name == "renamed"
    assert [entry.action for entry in catalog.job_history(job.id, 10, None).items] == ["update", "create"]


def test_making_a_job_exact_moves_the_exact_count_and_is_refused_at_the_quota(catalog: Any) -> None:
    team = a_team(catalog, exact_quota=1)
    job, other = a_job(at(60), exact=False), a_job(at(60), exact=False)
    write(catalog, team, job)
    write(catalog, team, other)

    exact = edited(job, exact=True)
    assert catalog.replace_job(job, exact, team, at(1))
    assert catalog.job_counts("team-a") == (2, 1)

    with pytest.raises(QuotaExceeded) as refused:
        catalog.replace_job(other, edited(other, exact=True), team, at(1))
    assert refused.value.which == "exact"
    assert not catalog.get_job(other.id).exact

    assert catalog.replace_job(exact, edited(exact, exact=False), team, at(2))
    assert catalog.job_counts("team-a") == (2, 0)


def test_a_removed_job_is_gone_with_its_counts_and_its_history_stays(catalog: Any) -> None:
    team = a_team(catalog)
    job = a_job(at(60))
    write(catalog, team, job)

    assert not catalog.remove_job(edited(job), team)  # a version that is not the stored one
    assert catalog.remove_job(job, team, change(job, None, at(5), "api"))

    assert catalog.get_job(job.id) is None
    assert catalog.job_counts("team-a") == (0, 0)
    assert [entry.action for entry in catalog.job_history(job.id, 10, None).items] == ["delete", "create"]
    assert not catalog.remove_job(job, team)  # gone already


def test_team_jobs_pages_through_every_job_of_the_team_by_id_and_none_of_another(catalog: Any) -> None:
    team, other = a_team(catalog), a_team(catalog, "team-b")
    jobs = [a_job(at(60)) for _ in range(5)]
    for job in jobs:
        write(catalog, team, job)
    write(catalog, other, a_job(at(60), team="team-b"))

    listed = every(lambda limit, cursor: catalog.team_jobs("team-a", limit, cursor))

    assert [job.id for job in listed] == sorted(job.id for job in jobs)
    assert catalog.team_jobs("team-c", 10, None).items == []


def test_a_cursor_of_another_listing_or_not_a_cursor_is_refused(catalog: Any) -> None:
    team, other = a_team(catalog), a_team(catalog, "team-b")
    jobs = [a_job(at(60)) for _ in range(3)]
    for job in jobs:
        write(catalog, team, job)
    write(catalog, other, a_job(at(60), team="team-b"))
    cursor = catalog.team_jobs("team-a", 1, None).cursor
    assert cursor is not None

    with pytest.raises(InvalidCursor):
        catalog.team_jobs("team-b", 1, cursor)
    with pytest.raises(InvalidCursor):
        catalog.job_runs(jobs[0].id, 1, cursor)
    with pytest.raises(InvalidCursor):
        catalog.job_history(jobs[0].id, 1, cursor)
    with pytest.raises(InvalidCursor):
        catalog.search_jobs("team-a", 1, cursor, ("env", "prod"), [])
    for garbage in ("not a cursor", "e30=", "W10=", "bnVsbA=="):  # text, {}, [], null
        with pytest.raises(InvalidCursor):
            catalog.team_jobs("team-a", 1, garbage)


def test_search_by_label_finds_the_teams_jobs_labelled_so_and_follows_their_edits(catalog: Any) -> None:
    team, other = a_team(catalog), a_team(catalog, "team-b")
    prod = [a_job(at(60), labels={"env": "prod"}) for _ in range(3)]
    for job in prod:
        write(catalog, team, job)
    write(catalog, team, a_job(at(60), labels={"env": "dev"}))
    write(catalog, other, a_job(at(60), team="team-b", labels={"env": "prod"}))

    def search(limit: int, cursor: str | None) -> Any:
        return catalog.search_jobs("team-a", limit, cursor, ("env", "prod"), [])

    assert sorted(job.id for job in every(search)) == sorted(job.id for job in prod)

    assert catalog.replace_job(prod[0], edited(prod[0], labels={"env": "dev"}), team, at(1))
    assert catalog.remove_job(prod[1], team)
    assert [job.id for job in every(search)] == [prod[2].id]


def test_search_by_name_words_finds_the_jobs_a_word_of_whose_name_begins_with_every_search_word(
    catalog: Any,
) -> None:
    team = a_team(catalog)
    report = a_job(at(60), name="Nightly sales report", labels={"env": "prod"})
    sales = a_job(at(60), name="sales export")
    other = a_job(at(60), name="nightly backup")
    for job in (report, sales, other):
        write(catalog, team, job)

    def found(words: list[str], label: tuple[str, str] | None = None) -> set[str]:
        jobs = every(
            lambda limit, cursor: catalog.search_jobs("team-a", limit, cursor, label, words), limit=1
        )
        return {job.id for job in jobs}

    assert found(["sal"]) == {report.id, sales.id}
    assert found(["night", "rep"]) == {report.id}
    assert found(["nigh"], ("env", "prod")) == {report.id}
    assert found(["zzz"]) == set()

    assert catalog.replace_job(sales, edited(sales, name="purchases export"), team, at(1))
    assert found(["sal"]) == {report.id}


def test_job_history_is_the_jobs_changes_newest_first_page_by_page(catalog: Any) -> None:
    team = a_team(catalog)
    job = a_job(at(60), exact=False)
    write(catalog, team, job)
    current = job
    for second, name in ((1, "one"), (2, "two"), (3, "three")):
        after = edited(current, name=name)
        assert catalog.replace_job(
            current, after, team, at(second), change(current, after, at(second), "api")
        )
        current = after

    history = every(lambda limit, cursor: catalog.job_history(job.id, limit, cursor))

    assert [entry.at for entry in history] == [at(3), at(2), at(1), at(0)]
    assert history[0].fields == {"name": {"from": "two", "to": "three"}}
    assert (history[0].job_id, history[0].team, history[0].actor) == (job.id, "team-a", "api")
    assert catalog.job_history("no-such-job", 10, None).items == []


# --- runs -----------------------------------------------------------------------------------------------


def test_a_run_inserted_by_hand_is_read_back_and_another_with_its_id_is_refused(catalog: Any) -> None:
    team = a_team(catalog)
    job = a_job(at(60))
    write(catalog, team, job)
    run = a_run(job, 1.5, manual=True)

    assert catalog.insert_run(run)
    assert not catalog.insert_run(run.model_copy(update={"attempt": 3}))

    stored = catalog.get_run(run.run_id)
    assert (stored.run_id, stored.status, stored.attempt, stored.nominal_at) == (
        run.run_id,
        RunStatus.QUEUED,
        1,
        at(1),  # to the second
    )
    assert catalog.get_run(f"{job.id}@2026-01-01T00:00:00Z") is None


def test_insert_runs_skips_the_run_ids_that_exist_and_returns_the_runs_written_in_order(catalog: Any) -> None:
    team = a_team(catalog)
    job = a_job(at(60))
    write(catalog, team, job)
    runs = [a_run(job, 60 * i) for i in range(4)]
    assert catalog.insert_run(runs[1])

    written = catalog.insert_runs(runs)

    assert [run.run_id for run in written] == [runs[0].run_id, runs[2].run_id, runs[3].run_id]
    assert catalog.insert_runs(runs) == []


def test_a_jobs_runs_are_listed_newest_first_page_by_page_and_no_other_jobs(catalog: Any) -> None:
    team = a_team(catalog)
    job, other = a_job(at(60)), a_job(at(60))
    write(catalog, team, job)
    write(catalog, team, other)
    runs = [a_run(job, 60 * i) for i in range(3)] + [a_run(job, 150, manual=True)]
    catalog.insert_runs(runs)
    catalog.insert_runs([a_run(other, 0)])

    listed = every(lambda limit, cursor: catalog.job_runs(job.id, limit, cursor))

    assert [run.run_id for run in listed] == [runs[3].run_id, runs[2].run_id, runs[1].run_id, runs[0].run_id]


def test_a_failed_run_is_requeued_for_one_more_attempt_and_an_unfinished_one_is_not(subject: Subject) -> None:
    catalog, store = subject.catalog, subject.store
    team = a_team(catalog)
    job = a_job(at(60))
    write(catalog, team, job)
    run = a_run(job, 0)
    catalog.insert_run(run)
    assert catalog.requeue_run(run, at(1), at(601)) is None  # queued: not ended

    leased = store.acquire_lease(run.run_id, 1, "worker-a", at(1), at(61))
    assert leased is not None
    failed = RunResult(status_code=500, duration_ms=5)
    assert store.record_result(leased, "worker-a", RunStatus.FAILED, failed, at(2))

    queued = catalog.requeue_run(catalog.get_run(run.run_id), at(3), at(603))

    assert queued is not None
    assert (queued.status, queued.attempt, queued.queue_deadline) == (RunStatus.QUEUED, 2, at(603))
    assert (queued.owner, queued.lease_expires_at, queued.finished_at, queued.retry_at) == (None,) * 4
    assert queued.max_attempts >= 2
    assert catalog.get_run(run.run_id) == queued
    assert catalog.requeue_run(queued, at(4), at(604)) is None  # queued again: not ended


# --- the jobs that use a calendar ------------------------------------------------------------------------

CRON_PARIS = {"cron": "0 9 * * *", "timezone": "Europe/Paris"}


def a_calendar(catalog: Any, name: str, team: str = "team-a") -> Calendar:
    calendar = Calendar(
        name=name,
        source=CalendarSource.model_validate({"dates": ["2026-12-25"]}),
        team=team,
        version=1,
        created_at=at(0),
        updated_at=at(0),
    )
    assert catalog.create_calendar(calendar, calendar_change(None, calendar, at(0), "tok"))
    return calendar


def excluding(*names: str) -> dict[str, Any]:
    return {"schedule": CRON_PARIS, "exclude": {"calendars": list(names)}}


def test_a_job_is_listed_among_the_users_of_each_calendar_it_uses_until_it_stops(catalog: Any) -> None:
    team = a_team(catalog)
    a_calendar(catalog, "closed")
    a_calendar(catalog, "eves")
    job = a_job(at(60), **excluding("closed", "eves"))
    write(catalog, team, job)
    assert catalog.calendar_users("team-a", "closed", 10) == [job.id]
    assert catalog.calendar_users("team-a", "eves", 10) == [job.id]
    assert catalog.calendar_users("team-b", "closed", 10) == []

    changed = edited(job, exclude=Exclusion(calendars=["eves"]))
    assert catalog.replace_job(job, changed, team, at(1), None)
    assert catalog.calendar_users("team-a", "closed", 10) == []
    assert catalog.calendar_users("team-a", "eves", 10) == [job.id]

    assert catalog.remove_job(changed, team, None)
    assert catalog.calendar_users("team-a", "eves", 10) == []


def test_a_job_naming_a_calendar_the_team_lacks_is_refused_and_nothing_is_written(catalog: Any) -> None:
    team = a_team(catalog)
    a_calendar(catalog, "closed")
    job = a_job(at(60), **excluding("closed", "gone"))
    with pytest.raises(CalendarGone) as refused:
        write(catalog, team, job)
    assert refused.value.name == "gone"
    assert catalog.get_job(job.id) is None
    assert catalog.calendar_users("team-a", "closed", 10) == []
    assert catalog.job_counts("team-a") == (0, 0)

    plain = a_job(at(60))
    write(catalog, team, plain)
    with pytest.raises(CalendarGone):
        gone = Exclusion(calendars=["gone"])
        catalog.replace_job(
            plain, edited(plain, schedule=CronSchedule(**CRON_PARIS), exclude=gone), team, at(1), None
        )
    assert catalog.get_job(plain.id).exclude is None


def test_a_calendar_in_use_is_not_deleted_and_is_once_its_last_job_stops_using_it(catalog: Any) -> None:
    team = a_team(catalog)
    calendar = a_calendar(catalog, "closed")
    job = a_job(at(60), **excluding("closed"))
    write(catalog, team, job)
    assert not catalog.remove_calendar(calendar, calendar_change(calendar, None, at(2), "tok"))
    assert catalog.get_calendar("team-a", "closed") is not None

    # An update keeps the count of its users: the calendar is still in use after it.
    after = calendar.model_copy(update={"version": 2, "description": "changed"})
    assert catalog.replace_calendar(calendar, after, calendar_change(calendar, after, at(3), "tok"))
    assert not catalog.remove_calendar(after, calendar_change(after, None, at(4), "tok"))

    assert catalog.remove_job(job, team, None)
    assert catalog.remove_calendar(after, calendar_change(after, None, at(5), "tok"))
    assert catalog.get_calendar("team-a", "closed") is None


# --- job keys --------------------------------------------------------------------------------------------


def test_a_jobs_key_finds_it_and_goes_with_it_when_it_is_deleted(catalog: Any) -> None:
    team = a_team(catalog)
    job = a_job(at(60), key="billing/nightly")
    write(catalog, team, job)
    assert catalog.job_id_by_key("team-a", "billing/nightly") == job.id
    assert catalog.job_id_by_key("team-b", "billing/nightly") is None
    assert catalog.remove_job(job, team, None)
    assert catalog.job_id_by_key("team-a", "billing/nightly") is None


def test_a_key_another_job_has_is_refused_and_nothing_is_written(catalog: Any) -> None:
    team = a_team(catalog)
    first = a_job(at(60), key="report")
    write(catalog, team, first)
    second = a_job(at(60), key="report")
    with pytest.raises(KeyTaken):
        write(catalog, team, second)
    assert catalog.get_job(second.id) is None and catalog.job_counts("team-a") == (1, 1)

    keyless = a_job(at(60), exact=False)
    write(catalog, team, keyless)
    with pytest.raises(KeyTaken):
        catalog.replace_job(keyless, edited(keyless, key="report"), team, at(1), None)
    assert catalog.get_job(keyless.id).key is None
    assert catalog.replace_job(keyless, edited(keyless, key="other"), team, at(1), None)
    assert catalog.job_id_by_key("team-a", "other") == keyless.id
    assert catalog.job_id_by_key("team-a", "report") == first.id
