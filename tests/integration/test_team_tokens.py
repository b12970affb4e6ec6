"""A team's named tokens (DynamoDB Local): issued with a scope, listed, revoked one by one, each refused
what its scope does not allow, and every change in the team's audit trail."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from duetime import cli, wiring
from duetime.adapters.dynamodb.catalog import DynamoCatalog
from duetime.api.service import JobService
from duetime.api.team_admin import TeamAdmin
from duetime.domain.errors import Conflict, InvalidInput, NotFound, Unauthorized
from duetime.domain.tokens import MAX_TOKENS_PER_TEAM, TokenScope

from .api_support import JOB, Answer, make_call
from .api_support import service as service
from .conftest import Stack


@pytest.fixture
def admin(stack: Stack) -> TeamAdmin:
    return TeamAdmin(DynamoCatalog(stack.dynamodb, stack.names), stack.clock, actor="cli:test@host")


def bearer(token: str) -> str:
    return f"Bearer {token}"


def test_a_revoked_token_is_refused_at_once_and_the_teams_other_tokens_keep_working(
    admin: TeamAdmin, service: JobService
) -> None:
    _, first = admin.create_team("payments")
    ci, ci_token = admin.issue_token("payments", "ci", "operate")
    dash, dash_token = admin.issue_token("payments", "dashboard", "read")

    listed = admin.list_tokens("payments")
    assert [(t.name, t.scope) for t in listed] == [
        ("admin", TokenScope.ADMIN),
        ("ci", TokenScope.OPERATE),
        ("dashboard", TokenScope.READ),
    ]
    assert all(t.created_by == "cli:test@host" and t.created_at for t in listed)

    admin.revoke_token("payments", ci.token_id)

    with pytest.raises(Unauthorized, match="revoked"):
        service.authenticate(bearer(ci_token))
    assert service.authenticate(bearer(first)).token.scope is TokenScope.ADMIN
    assert service.authenticate(bearer(dash_token)).token.token_id == dash.token_id
    assert [t.name for t in admin.list_tokens("payments")] == ["admin", "dashboard"]
    with pytest.raises(NotFound):  # revoked twice: the second finds nothing
        admin.revoke_token("payments", ci.token_id)


def test_names_are_unique_in_a_team_and_a_team_holds_a_bounded_number_of_tokens(admin: TeamAdmin) -> None:
    admin.create_team("names")
    admin.issue_token("names", "ci", "read")
    with pytest.raises(Conflict, match="named 'ci'"):
        admin.issue_token("names", "ci", "admin")
    admin.create_team("other")
    admin.issue_token("other", "ci", "read")  # another team's names are its own
    for n in range(MAX_TOKENS_PER_TEAM - 2):
        admin.issue_token("names", f"bot-{n}", "read")
    with pytest.raises(Conflict, match="the most it may"):
        admin.issue_token("names", "one-too-many", "read")
    for bad_name, bad_scope in (("", "read"), ("x" * 65, "read"), ("-dash", "read"), ("ok", "root")):
        with pytest.raises(InvalidInput):
            admin.issue_token("other", bad_name, bad_scope)


def test_the_last_admin_token_cannot_be_revoked_but_a_rotation_replaces_them_all(
    admin: TeamAdmin, service: JobService
) -> None:
    _, first = admin.create_team("solo")
    only = admin.list_tokens("solo")[0]
    with pytest.raises(Conflict, match="last admin token"):
        admin.revoke_token("solo", only.token_id)
    second, _ = admin.issue_token("solo", "second-admin", "admin")
    admin.revoke_token("solo", only.token_id)  # now it is not the last
    with pytest.raises(Conflict, match="last admin token"):
        admin.revoke_token("solo", second.token_id)

    _, rotated = admin.rotate_token("solo")
    assert [(t.name, t.scope) for t in admin.list_tokens("solo")] == [("admin", TokenScope.ADMIN)]
    assert service.authenticate(bearer(rotated)).token.name == "admin"
    with pytest.raises(Unauthorized):
        service.authenticate(bearer(first))


def test_two_revocations_at_once_cannot_both_remove_the_other_admin_token(admin: TeamAdmin) -> None:
    """Each sees two admin tokens and revokes one; serialised by the team's revision, the second re-reads,
    sees one left and is refused."""
    admin.create_team("race")
    first = admin.list_tokens("race")[0]
    second, _ = admin.issue_token("race", "second-admin", "admin")
    outcomes: list[str] = []

    def revoke(token_id: str) -> None:
        try:
            admin.revoke_token("race", token_id)
            outcomes.append("revoked")
        except Conflict:
            outcomes.append("kept")

    threads = [threading.Thread(target=revoke, args=(t.token_id,)) for t in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["kept", "revoked"]
    assert len(admin.list_tokens("race")) == 1


def test_issuing_and_revoking_are_in_the_audit_trail_without_the_token(admin: TeamAdmin) -> None:
    admin.create_team("audited")
    issued, token = admin.issue_token("audited", "ci", "operate")
    admin.revoke_token("audited", issued.token_id)
    events = admin.audit("audited")
    assert [e.action for e in events] == ["revoke-token", "issue-token", "create"]
    assert events[0].detail == {"token_id": issued.token_id, "name": "ci", "scope": "operate"}
    assert token not in json.dumps([e.detail for e in events]) and issued.token_hash not in json.dumps(
        [e.detail for e in events]
    )


# --- through the API -------------------------------------------------------------------------------------


def test_an_admin_issues_lists_and_revokes_tokens_through_the_api_and_each_scope_gets_what_it_may(
    service: JobService,
) -> None:
    _, token = service.create_team("acme")
    admin_call = make_call(token)
    job = admin_call("POST", "/v1/jobs", {**JOB, "paused": True}).body

    issued: dict[str, Answer] = {
        scope: admin_call("POST", "/v1/tokens", {"name": f"{scope}-bot", "scope": scope})
        for scope in ("read", "operate")
    }
    assert all(answer.status == 201 for answer in issued.values()), issued
    reader, operator = (make_call(issued[s].body["token"]) for s in ("read", "operate"))

    assert reader("GET", f"/v1/jobs/{job['id']}").status == 200
    assert reader("GET", "/v1/jobs").status == 200
    refused = reader("POST", f"/v1/jobs/{job['id']}/resume")
    assert refused.status == 403 and refused.body["error"]["field"] == "scope"
    assert reader("GET", f"/v1/jobs/{job['id']}/signing-key").status == 403
    assert operator("POST", f"/v1/jobs/{job['id']}/resume").status == 200
    assert operator("POST", f"/v1/jobs/{job['id']}/trigger").status == 201
    assert operator("PATCH", f"/v1/jobs/{job['id']}", {"name": "renamed"}).status == 403
    assert operator("POST", "/v1/jobs", JOB).status == 403
    assert operator("GET", "/v1/tokens").status == 403

    listed = admin_call("GET", "/v1/tokens").body["tokens"]
    assert sorted((t["name"], t["scope"], t["in_use"]) for t in listed) == [
        ("admin", "admin", True),
        ("operate-bot", "operate", False),
        ("read-bot", "read", False),
    ]
    assert all("token" not in t and "token_hash" not in t for t in listed)
    assert operator("GET", "/v1/token").body["name"] == "operate-bot"

    operate_id = issued["operate"].body["token_id"]
    assert admin_call("DELETE", f"/v1/tokens/{operate_id}").status == 204
    assert operator("GET", "/v1/token").status == 401  # at once
    assert reader("GET", "/v1/token").status == 200
    assert admin_call("DELETE", f"/v1/tokens/{operate_id}").status == 404
    duplicate = admin_call("POST", "/v1/tokens", {"name": "read-bot", "scope": "admin"})
    assert duplicate.status == 409 and duplicate.body["error"]["field"] == "name"
    bad = admin_call("POST", "/v1/tokens", {"name": "x", "scope": "superuser"})
    assert bad.status == 422 and bad.body["error"]["field"] == "scope"
    own_id = admin_call("GET", "/v1/token").body["token_id"]
    last = admin_call("DELETE", f"/v1/tokens/{own_id}")
    assert last.status == 409 and "last admin token" in last.body["error"]["message"]


def test_a_token_cannot_see_or_revoke_another_teams_tokens(service: JobService) -> None:
    _, alpha_token = service.create_team("alpha")
    _, beta_token = service.create_team("beta")
    alpha, beta = make_call(alpha_token), make_call(beta_token)
    beta_id = beta("GET", "/v1/token").body["token_id"]
    alpha("POST", "/v1/tokens", {"name": "spare", "scope": "admin"})
    assert [t["name"] for t in alpha("GET", "/v1/tokens").body["tokens"]] == ["admin", "spare"]
    assert alpha("DELETE", f"/v1/tokens/{beta_id}").status == 404
    assert beta("GET", "/v1/token").status == 200


@pytest.fixture
def cli_on_stack(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``duetime teams`` against this test's tables: the wiring it builds once is built anew, before and
    after."""
    monkeypatch.setenv("DUETIME_JOBS_TABLE", stack.names.jobs)
    monkeypatch.setenv("DUETIME_RUNS_TABLE", stack.names.runs)
    monkeypatch.setenv("DUETIME_CONTROL_TABLE", stack.names.control)
    wiring.forget()
    yield
    wiring.forget()


@pytest.mark.usefixtures("cli_on_stack")
def test_the_cli_lists_issues_and_revokes_tokens(
    admin: TeamAdmin, capsys: pytest.CaptureFixture[str]
) -> None:

    def duetime(*argv: str) -> Any:
        assert cli.main(list(argv)) == 0
        return json.loads(capsys.readouterr().out)

    admin.create_team("ops")
    issued = duetime("teams", "issue-token", "ops", "--token-name", "ci", "--scope", "operate", "--json")
    assert issued["token"].startswith("dt_") and issued["scope"] == "operate"
    listed = duetime("teams", "tokens", "ops", "--json")
    assert [(t["name"], t["scope"]) for t in listed] == [("admin", "admin"), ("ci", "operate")]
    assert all("token" not in t for t in listed)
    duetime("teams", "revoke-token", "ops", issued["token_id"], "--json")
    assert [t["name"] for t in duetime("teams", "tokens", "ops", "--json")] == ["admin"]
    with pytest.raises(SystemExit, match=f"no token {issued['token_id']}"):  # gone: a clear error
        cli.main(["teams", "revoke-token", "ops", issued["token_id"]])
