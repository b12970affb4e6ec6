"""``InMemoryCatalog``: the in-memory twin of ``DynamoCatalog`` (``duetime.ports.Catalog``).

It works on a ``MemoryStore``'s tables, under its one lock, as ``DynamoCatalog`` works on ``DynamoStore``'s:
a job it writes is one the store's claim sees, a run it creates one the store's worker writes lease, a team
it creates one ``TeamStore.get_team`` reads. What the store has no table for (team revisions and job counts,
tokens, the directory, audit rows, idempotency keys, job history) it keeps itself, under the same lock, so
each write is one atomic step like DynamoDB's transaction: every condition checked first, then all of it
written, or none of it.

Values come back as DynamoDB gives them back: instants to the second (tokens' ``created_at``, audit rows',
history entries', jobs' and runs'), ``detail`` and ``fields`` through JSON, ``created_by`` ``"unknown"``
when empty. The search index is read from the jobs themselves (DynamoDB's index items are written in the
same transaction as the job, so the two never differ). Cursors are the twin's own opaque text, taken back
only by the listing that returned it; a page's cursor is None once nothing follows (DynamoDB may return one
more, empty, page). Not modelled: TTL expiry (audit rows, history and idempotency keys are kept forever),
``DynamoStore.put_team`` moving a team's revision (the twin's store has no revision), size limits.
``tests/contract/test_catalog_contract.py`` holds the twin and DynamoDB Local to one suite.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Sequence
from datetime import datetime

from duetime.adapters.memory.calendars import MemoryCalendars
from duetime.adapters.memory.pages import decode_cursor, json_value, page
from duetime.adapters.memory.store import MemoryStore
from duetime.adapters.memory.stored import distinct, to_second
from duetime.domain.catalog import (
    AuditEvent,
    IdempotencyMismatch,
    IdempotencyRecord,
    InvalidCursor,
    KeyTaken,
    Page,
    QuotaExceeded,
)
from duetime.domain.ids import RUN_ID_SEPARATOR
from duetime.domain.job_history import JobChange
from duetime.domain.labels import matches_words, name_words
from duetime.domain.models import Job, Run, RunStatus, Team
from duetime.domain.tokens import ApiToken
from duetime.ports import Catalog


def _stored_token(token: ApiToken) -> ApiToken:
    created_at = to_second(token.created_at) if token.created_at else None
    return dataclasses.replace(token, created_at=created_at, created_by=token.created_by or "unknown")


def _stored_event(event: AuditEvent) -> AuditEvent:
    return dataclasses.replace(event, at=to_second(event.at), detail=json_value(event.detail))


def _occurrence(run: Run) -> str:
    return run.run_id.partition(RUN_ID_SEPARATOR)[2]


class InMemoryCatalog(MemoryCalendars):
    """``duetime.ports.Catalog`` in memory, on ``store``'s tables (a new ``MemoryStore`` by default),
    thread-safe (the store's lock)."""

    def __init__(self, store: MemoryStore | None = None) -> None:
        self.store = store or MemoryStore()
        self.lock = self.store.lock
        self._revisions: dict[str, int] = {}  # team id -> revision (a team ``put_team`` made: 0)
        self._counts: dict[str, tuple[int, int]] = {}  # team id -> (jobs, exact-time jobs)
        self._directory: set[str] = set()
        self._tokens: dict[str, ApiToken] = {}  # token hash -> token (the row ``token_record`` reads)
        self._listed: dict[str, dict[str, ApiToken]] = {}  # team id -> token id -> token (its list)
        self._audit: dict[str, dict[int, AuditEvent]] = {}  # team id -> revision -> event
        self._keys: dict[tuple[str, str], IdempotencyRecord] = {}
        self._history: dict[str, list[tuple[str, JobChange]]] = {}  # job id -> (sort key, change)
        self._calendars = {}
        self._calendar_versions = {}
        self._calendar_history = {}
        self._calendar_users = {}
        self._job_keys: dict[tuple[str, str], str] = {}  # (team, key) -> the job that has it

    # --- teams and tokens -------------------------------------------------------------------------------

    def create_team(self, team: Team, token: ApiToken, audit: AuditEvent | None = None) -> bool:
        with self.lock:
            if team.team_id in self.store._teams or not self._token_is_new(token):  # TEAM_IS_NEW
                return False
            if audit is not None and 1 in self._audit.get(team.team_id, {}):
                return False
            self.store.put_team(team)
            self._revisions[team.team_id] = 1
            self._counts[team.team_id] = (0, 0)
            self._directory.add(team.team_id)
            self._add_token(token)
            if audit is not None:
                self._audit.setdefault(team.team_id, {})[1] = _stored_event(audit)
            return True

    def _token_is_new(self, token: ApiToken) -> bool:
        listed = self._listed.get(token.team_id, {})
        return token.token_hash not in self._tokens and token.token_id not in listed

    def _token_exists(self, token: ApiToken) -> bool:
        listed = self._listed.get(token.team_id, {})
        return token.token_hash in self._tokens and token.token_id in listed

    def _add_token(self, token: ApiToken) -> None:
        stored = _stored_token(token)
        self._tokens[token.token_hash] = stored
        self._listed.setdefault(token.team_id, {})[token.token_id] = stored

    def token_record(self, token_hash: str) -> ApiToken | None:
        with self.lock:
            return self._tokens.get(token_hash)

    def team_tokens(self, team_id: str) -> list[ApiToken]:
        with self.lock:
            listed = self._listed.get(team_id, {})
            return [listed[token_id] for token_id in sorted(listed)]

    def get_team(self, team_id: str) -> Team | None:
        return self.store.get_team(team_id)

    def team_revision(self, team_id: str) -> tuple[Team, int] | None:
        with self.lock:
            team = self.store.get_team(team_id)
            return None if team is None else (team, self._revisions.get(team_id, 0))

    def list_teams(self) -> list[Team]:
        with self.lock:
            teams = [self.store.get_team(team_id) for team_id in sorted(self._directory)]
        return [team for team in teams if team is not None]

    def replace_team(
        self,
        before: Team,
        revision: int,
        after: Team,
        audit: AuditEvent,
        issue: ApiToken | None = None,
        revoke: ApiToken | None = None,
    ) -> bool:
        with self.lock:
            stored = self.store._teams.get(before.team_id)
            if stored is None or stored.model_dump_json() != before.model_dump_json():
                return False  # TEAM_UNCHANGED_SINCE_READ
            if revision + 1 in self._audit.get(audit.team_id, {}):
                return False  # the audit row is new (TEAM_IS_NEW)
            if issue is not None and not self._token_is_new(issue):
                return False
            if revoke is not None and not self._token_exists(revoke):  # TOKEN_EXISTS
                return False
            self.store.put_team(after)
            self._revisions[before.team_id] = revision + 1
            self._audit.setdefault(audit.team_id, {})[revision + 1] = _stored_event(audit)
            if issue is not None:
                self._add_token(issue)
            if revoke is not None:
                del self._tokens[revoke.token_hash]
                del self._listed[revoke.team_id][revoke.token_id]
            return True

    def audit_events(self, team_id: str, limit: int = 100) -> list[AuditEvent]:
        with self.lock:
            events = self._audit.get(team_id, {})
            return [events[revision] for revision in sorted(events, reverse=True)[:limit]]

    # --- jobs -------------------------------------------------------------------------------------------

    def job_counts(self, team_id: str) -> tuple[int, int]:
        with self.lock:
            return self._counts.get(team_id, (0, 0))

    def exact_jobs(self, team_id: str) -> int:
        return self.job_counts(team_id)[1]

    def _quota_left(self, team: Team, jobs: int, exact: int) -> str | None:
        """Which quota a count move would break (JOB_QUOTA_LEFT, EXACT_QUOTA_LEFT), or None; a team that is
        not there breaks the first quota the move grows, as its missing row fails DynamoDB's update."""
        held_jobs, held_exact = self._counts.get(team.team_id, (0, 0))
        if jobs > 0 and (team.team_id not in self.store._teams or held_jobs >= team.max_jobs):
            return "jobs"
        if exact > 0 and (team.team_id not in self.store._teams or held_exact >= team.exact_quota):
            return "exact"
        return None

    def _move_counts(self, team_id: str, jobs: int, exact: int) -> None:
        held_jobs, held_exact = self._counts.get(team_id, (0, 0))
        self._counts[team_id] = (held_jobs + jobs, held_exact + exact)

    def _record(self, change: JobChange | None) -> None:
        if change is None:
            return
        key = f"{change.at.isoformat(timespec='milliseconds')}#{secrets.token_hex(4)}"
        stored = dataclasses.replace(change, at=to_second(change.at), fields=json_value(change.fields))
        self._history.setdefault(change.job_id, []).append((key, stored))

    def insert_job(
        self,
        job: Job,
        team: Team,
        now: datetime,
        idempotency: IdempotencyRecord | None,
        change: JobChange | None = None,
    ) -> str:
        exact = 1 if job.exact else 0
        with self.lock:
            if idempotency is not None:
                earlier = self._keys.get((idempotency.team, idempotency.key))
                if earlier is not None:
                    if earlier.request_hash != idempotency.request_hash:
                        raise IdempotencyMismatch(idempotency.key)
                    return earlier.job_id
            if job.id in self.store._jobs:  # JOB_IS_NEW
                raise RuntimeError(f"job insert cancelled: job {job.id} exists")
            broken = self._quota_left(team, +1, exact)
            if broken is not None:
                raise QuotaExceeded(team.team_id, broken)
            self._check_key(None, job)
            self._count_calendar_uses(None, job)
            self._move_key(None, job)
            self.store.put_job(job, now)
            self._move_counts(team.team_id, +1, exact)
            self._record(change)
            if idempotency is not None:
                self._keys[idempotency.team, idempotency.key] = idempotency
            return job.id

    def get_job(self, job_id: str) -> Job | None:
        return self.store.get_job(job_id)

    def job_id_by_key(self, team_id: str, key: str) -> str | None:
        with self.lock:
            return self._job_keys.get((team_id, key))

    def _check_key(self, before: Job | None, after: Job | None) -> None:
        """JOB_KEY_IS_FREE for a key ``after`` takes (``KeyTaken``), checked before anything is written."""
        new = after.key if after else None
        taking = after is not None and new is not None and new != (before.key if before else None)
        if taking and after is not None and new is not None and (after.team, new) in self._job_keys:
            raise KeyTaken(after.team, new)

    def _move_key(self, before: Job | None, after: Job | None) -> None:
        """What DynamoDB's job write does to the key items, under the lock, once ``_check_key`` passed."""
        old = before.key if before else None
        new = after.key if after else None
        job = after or before
        assert job is not None
        if old is not None and old != new:
            del self._job_keys[job.team, old]
        if new is not None:
            self._job_keys[job.team, new] = job.id

    def _version_is(self, job: Job) -> bool:
        """JOB_VERSION_IS: the stored job is ``job``'s version, of ``job``'s team."""
        row = self.store._jobs.get(job.id)
        return row is not None and row.job.state.version == job.state.version and row.job.team == job.team

    def replace_job(
        self, before: Job, after: Job, team: Team, now: datetime, change: JobChange | None = None
    ) -> bool:
        exact = (1 if after.exact else -1) if after.exact != before.exact else 0
        with self.lock:
            if exact > 0 and self._quota_left(team, 0, exact) is not None:
                raise QuotaExceeded(team.team_id, "exact")
            if not self._version_is(before) or (exact and team.team_id not in self.store._teams):
                return False
            self._check_key(before, after)
            self._count_calendar_uses(before, after)
            self._move_key(before, after)
            self.store.put_job(after, now)
            self._move_counts(team.team_id, 0, exact)
            self._record(change)
            return True

    def remove_job(self, job: Job, team: Team, change: JobChange | None = None) -> bool:
        with self.lock:
            if not self._version_is(job) or team.team_id not in self.store._teams:
                return False
            self._count_calendar_uses(job, None)
            self._move_key(job, None)
            del self.store._jobs[job.id]
            self._move_counts(team.team_id, -1, -1 if job.exact else 0)
            self._record(change)
            return True

    def _team_jobs(self, team_id: str) -> list[Job]:
        with self.lock:
            return [
                row.job.model_copy(deep=True) for row in self.store._jobs.values() if row.job.team == team_id
            ]

    def team_jobs(self, team_id: str, limit: int, cursor: str | None) -> Page:
        jobs = self._team_jobs(team_id)
        return page([(job.id, job) for job in jobs], f"jobs#{team_id}", limit, cursor, newest=False)

    def search_jobs(
        self, team_id: str, limit: int, cursor: str | None, label: tuple[str, str] | None, words: list[str]
    ) -> Page:
        jobs = self._team_jobs(team_id)
        if label is not None:
            key, value = label
            listing = f"label#{team_id}#{key}={value}"
            entries = [(job.id, job) for job in jobs if job.labels.get(key) == value]
        else:
            prefix = max(words, key=len)
            listing = f"words#{team_id}"
            after = decode_cursor(cursor, listing)
            if after is not None and not after.startswith(prefix):
                raise InvalidCursor("cursor belongs to another listing")
            entries = [
                (f"{word}#{job.id}", job)
                for job in jobs
                for word in name_words(job.name)
                if word.startswith(prefix)
            ]
        listed = page(entries, listing, limit, cursor, newest=False)
        unique = list({job.id: job for job in listed.items}.values())
        found = [job for job in unique if matches_words(job.name, words)]
        return Page(found, listed.cursor)

    def job_history(self, job_id: str, limit: int, cursor: str | None) -> Page:
        with self.lock:
            entries = list(self._history.get(job_id, []))
        return page(entries, f"history#{job_id}", limit, cursor, newest=True)

    # --- runs -------------------------------------------------------------------------------------------

    def get_run(self, run_id: str) -> Run | None:
        return self.store.get_run(run_id)

    def job_runs(self, job_id: str, limit: int, cursor: str | None) -> Page:
        with self.lock:
            runs = [run.model_copy(deep=True) for run in self.store._runs.values() if run.job_id == job_id]
        return page([(_occurrence(run), run) for run in runs], f"runs#{job_id}", limit, cursor, newest=True)

    def insert_run(self, run: Run) -> bool:
        with self.lock:
            if run.run_id in self.store._runs:  # RUN_IS_NEW
                return False
            self.store._create_run(run)
            return True

    def insert_runs(self, runs: Sequence[Run]) -> list[Run]:
        distinct([run.run_id for run in runs], "run")
        return [run for run in runs if self.insert_run(run)]

    def requeue_run(self, run: Run, now: datetime, queue_deadline: datetime) -> Run | None:
        deadline = to_second(queue_deadline)

        def ended_unsuccessfully(stored: Run) -> bool:  # RUN_ENDED_UNSUCCESSFULLY
            return stored.status in (RunStatus.FAILED, RunStatus.DEAD)

        changes = {
            "status": RunStatus.QUEUED,
            "attempt": run.attempt + 1,
            "max_attempts": max(run.max_attempts, run.attempt + 1),
            "queue_deadline": deadline,
            "updated_at": to_second(now),
            "finished_at": None,
            "owner": None,
            "lease_expires_at": None,
            "retry_at": None,
        }
        return self.store._update(run.run_id, ended_unsuccessfully, changes, deadline)


def _implements_the_port(catalog: InMemoryCatalog) -> Catalog:
    """Never called: mypy checks here that ``InMemoryCatalog`` keeps the port's signatures."""
    return catalog
