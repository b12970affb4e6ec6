"""An operator manages teams (DynamoDB Local): list, limits, token and signing-secret rotation, disabling,
the per-team job quota, and the audit trail every change leaves."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
from standardwebhooks import Webhook

from duetime import cli
from duetime.adapters.dynamodb.catalog import DynamoCatalog
from duetime.api.service import JobService
from duetime.api.team_admin import TeamAdmin
from duetime.domain.clock import ManualClock
from duetime.domain.errors import Forbidden, InvalidInput, QuotaExceeded, Unauthorized
from duetime.domain.models import RunStatus
from duetime.domain.signing import job_signing_keys, verify_signature
from duetime.execution.worker import Worker

from .api_support import stack_service
from .conftest import Stack
from .test_team_tokens import cli_on_stack  # noqa: F401 (a fixture)

JOB = {
    "name": "every minute",
    "schedule": {"rate": "1 minute"},
    "target": {"url": "https://example.com/hook"},
}


@pytest.fixture
def catalog(stack: Stack) -> DynamoCatalog:
    return DynamoCatalog(stack.dynamodb, stack.names)


@pytest.fixture
def admin(stack: Stack, catalog: DynamoCatalog) -> TeamAdmin:
    return TeamAdmin(catalog, stack.clock, actor="cli:test@host")


@pytest.fixture
def service(stack: Stack, catalog: DynamoCatalog) -> JobService:
    return stack_service(stack, catalog, allow_private_targets=True)


def bearer(token: str) -> str:
    return f"Bearer {token}"


def test_rotating_a_token_retires_every_older_token_of_the_team_at_once(
    admin: TeamAdmin, service: JobService
) -> None:
    _, first = admin.create_team("payments")
    second = admin.issue_token("payments", "ci", "operate")[1]
    assert service.authenticate(bearer(first)).team.team_id == "payments"
    assert service.authenticate(bearer(second)).team.team_id == "payments"

    team, rotated = admin.rotate_token("payments")

    assert team.token_generation == 1
    for old in (first, second):
        with pytest.raises(Unauthorized, match="rotated out"):
            service.authenticate(bearer(old))
    assert service.authenticate(bearer(rotated)).team.team_id == "payments"
    assert (
        service.authenticate(bearer(admin.issue_token("payments", "ci", "read")[1])).team.team_id
        == "payments"
    )  # same generation


def test_a_disabled_team_is_refused_by_the_api_and_its_jobs_get_no_runs_until_enabled(
    stack: Stack, admin: TeamAdmin, service: JobService
) -> None:
    team, token = admin.create_team("batch")
    created = stack.clock.now() - timedelta(seconds=61)
    creator = JobService(
        service.catalog, stack.store, stack.queue, ManualClock(created), True, run_budget=service.run_budget
    )
    job = creator.create_job(team, {**JOB, "exact": True})  # due a second ago

    admin.set_disabled("batch", True)

    with pytest.raises(Forbidden, match="disabled"):
        service.authenticate(bearer(token))
    with pytest.raises(Forbidden):
        service.team("batch")  # what the api function checks when an authorizer's cached Allow vouched
    poller = stack.poller(teams=stack.store)
    report = poller.claim()
    assert report.disabled_team_jobs == 1 and report.runs_created == 0
    moved = stack.store.get_job(job.id)
    assert moved is not None and moved.state.next_nominal_at > job.state.next_nominal_at  # type: ignore[operator]
    assert stack.messages() == []

    admin.set_disabled("batch", False)
    assert service.authenticate(bearer(token)).team.team_id == "batch"
    later = stack.poller(
        teams=stack.store, clock=ManualClock(moved.state.next_fire_at + timedelta(seconds=1))
    )  # type: ignore[operator]
    report = later.claim()
    assert report.runs_created == 1 and report.disabled_team_jobs == 0
    run = stack.store.get_run(report.runs[0].run_id)
    assert run is not None and run.status is RunStatus.QUEUED


def test_limits_change_only_to_valid_values_and_a_refused_change_writes_nothing(admin: TeamAdmin) -> None:
    admin.create_team("search")
    changed = admin.update_limits("search", max_concurrency=5, max_jobs=200, api_rate_per_second=2.5)
    assert (changed.max_concurrency, changed.max_jobs, changed.api_rate_per_second) == (5, 200, 2.5)
    assert admin.update_limits("search", runs_per_minute=300).runs_per_minute == 300

    with pytest.raises(InvalidInput) as bad:
        admin.update_limits("search", max_concurrency=0)
    assert bad.value.field == "max_concurrency"
    with pytest.raises(InvalidInput) as no_runs:
        admin.update_limits("search", runs_per_minute=0)
    assert no_runs.value.field == "runs_per_minute"
    with pytest.raises(InvalidInput) as unknown:
        admin.update_limits("search", signing_secret="mine")
    assert unknown.value.field == "signing_secret"

    assert admin.get("search").max_concurrency == 5
    assert [e.action for e in admin.audit("search")] == ["update", "update", "create"]


def test_the_job_quota_is_counted_in_the_jobs_own_transaction(admin: TeamAdmin, service: JobService) -> None:
    team, _ = admin.create_team("tiny")
    team = admin.update_limits("tiny", max_jobs=5)
    created: list[str] = []
    refused: list[QuotaExceeded] = []
    barrier = threading.Barrier(12)

    def create() -> None:
        barrier.wait()
        try:
            created.append(service.create_job(team, JOB).id)
        except QuotaExceeded as exc:
            refused.append(exc)

    threads = [threading.Thread(target=create) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert len(created) == 5 and len(refused) == 7
    assert {exc.field for exc in refused} == {"max_jobs"}
    assert "job quota (5 jobs)" in refused[0].message
    assert service.catalog.job_counts("tiny") == (5, 0)
    service.delete_job(team, created[0])
    service.create_job(team, JOB)  # a deleted job gives its place back
    assert service.catalog.job_counts("tiny") == (5, 0)


def test_a_rotated_signing_secret_still_signs_beside_the_new_one_until_the_overlap_ends(
    stack: Stack, admin: TeamAdmin
) -> None:
    before, _ = admin.create_team("hooks")
    after = admin.rotate_signing_secret("hooks", timedelta(hours=1))
    assert (after.signing_secret_id, after.previous_signing_secret_id) == ("s2", "s1")
    assert (
        after.signing_secret != before.signing_secret
        and after.previous_signing_secret == before.signing_secret
    )

    run = stack.job_due_now("hooks", "http://127.0.0.1:1024/never")
    stack.poller().claim()
    queued = stack.store.get_run(f"{run.id}@{run.state.next_nominal_at:%Y-%m-%dT%H:%M:%SZ}")
    assert queued is not None

    def signed_at(offset: timedelta) -> tuple[dict[str, str], int]:
        clock = ManualClock(stack.clock.now() + offset)
        worker = Worker(stack.store, stack.store, stack.queue, stack.alerts, None, clock)  # type: ignore[arg-type]
        request = worker.build_request(queued, admin.get("hooks"))
        return request.headers, int(clock.now().timestamp())

    headers, now = signed_at(timedelta(0))
    header = headers["X-Duetime-Signature"]
    body = queued.target.body.encode() if queued.target.body else b""
    job_keys = job_signing_keys(admin.get("hooks"), run.id, stack.clock.now())
    assert [k.key_id for k in job_keys] == ["s2", "s1"]
    for key in job_keys:  # the job's key from each secret signs the Standard Webhooks header too
        Webhook(key.secret).verify(body, headers, json_parse=False)
    assert verify_signature(after.signing_secret or "", header, body, now, key_id="s2")
    assert verify_signature(
        before.signing_secret or "", header, body, now, key_id="s1"
    )  # a target not yet updated
    assert ",key=s2," in header and header.endswith(",key=s1")

    headers, now = signed_at(timedelta(hours=1, seconds=1))
    header = headers["X-Duetime-Signature"]
    assert verify_signature(after.signing_secret or "", header, body, now)
    assert not verify_signature(before.signing_secret or "", header, body, now)  # the overlap is over


def test_every_change_is_in_the_audit_trail_with_who_made_it_and_no_secret(admin: TeamAdmin) -> None:
    created, token = admin.create_team("ops")
    admin.update_limits("ops", api_burst=10)
    _, rotated = admin.rotate_token("ops")
    signed = admin.rotate_signing_secret("ops")
    admin.set_disabled("ops", True)
    admin.set_disabled("ops", False)

    events = admin.audit("ops")
    assert [e.action for e in events] == [
        "enable", "disable", "rotate-signing-secret", "rotate-token", "update", "create"
    ]  # fmt: skip
    assert {e.actor for e in events} == {"cli:test@host"}
    assert events[4].detail == {"api_burst": [40, 10]}
    written = json.dumps([e.detail for e in events])
    for secret in (
        token,
        rotated,
        created.signing_secret,
        signed.signing_secret,
        signed.previous_signing_secret,
    ):
        assert secret and secret not in written


def test_teams_are_listed_from_their_directory(admin: TeamAdmin) -> None:
    for name in ("zeta", "alpha", "mid"):
        admin.create_team(name)
    assert [t.team_id for t in admin.list_teams()] == ["alpha", "mid", "zeta"]


@pytest.mark.usefixtures("cli_on_stack")
def test_the_cli_rotates_a_token_and_disables_a_team(
    stack: Stack, service: JobService, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DUETIME_JOBS_TABLE", stack.names.jobs)
    monkeypatch.setenv("DUETIME_RUNS_TABLE", stack.names.runs)
    monkeypatch.setenv("DUETIME_CONTROL_TABLE", stack.names.control)

    def duetime(*argv: str) -> dict[str, object]:
        assert cli.main(list(argv)) == 0
        return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]

    created = duetime("teams", "create", "dev", "--max-jobs", "50", "--json")
    assert created["max_jobs"] == 50 and str(created["token"]).startswith("dt_")
    assert created["runs_per_minute"] == 1_000
    assert duetime("teams", "update", "dev", "--runs-per-minute", "200", "--json")["runs_per_minute"] == 200
    rotated = duetime("teams", "rotate-token", "dev", "--json")
    with pytest.raises(Unauthorized):
        service.authenticate(bearer(str(created["token"])))
    assert service.authenticate(bearer(str(rotated["token"]))).team.team_id == "dev"

    assert duetime("teams", "disable", "dev", "--json")["disabled"] is True
    assert [row["team"] for row in duetime("teams", "list", "--json")] == ["dev"]  # type: ignore[index]
    shown = duetime("teams", "show", "dev", "--json")
    assert shown["disabled"] is True and "signing_secret" not in shown and "token" not in shown
    audit = duetime("teams", "audit", "dev", "--json")
    assert [e["action"] for e in audit] == ["disable", "rotate-token", "update", "create"]  # type: ignore[index]

    with pytest.raises(SystemExit, match="max_concurrency"):
        cli.main(["teams", "update", "dev", "--max-concurrency", "0"])
