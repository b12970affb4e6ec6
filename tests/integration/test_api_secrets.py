"""Target header values are write-only: every answer shows the names with the value ``***``, PATCH keeps or
replaces them as documented, and the worker still sends the real values."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from duetime.api import app as api
from duetime.api.service import JobService
from duetime.cli import main as cli
from duetime.local.demo_target import DemoTargetServer
from duetime.local.gateway import LocalGateway

from .api_support import JOB, Call, make_call, serving, stack_service
from .conftest import Stack

REDACTED = "***"  # the documented marker
SECRET = "Bearer s3cr3t-do-not-show"
OTHER = "other-s3cr3t-value"
HEADERS = {"Authorization": SECRET, "X-Api-Key": OTHER}


def with_headers(headers: dict[str, str], url: str = "https://example.com/hook") -> dict[str, Any]:
    return {**JOB, "target": {"url": url, "headers": headers}}


def leaks(answer_body: Any) -> bool:
    text = json.dumps(answer_body)
    return SECRET in text or OTHER in text or "s3cr3t" in text


@pytest.fixture
def private_ok(stack: Stack) -> Iterator[tuple[Call, JobService]]:
    """An API whose targets may be on this machine (the demo target), as under ``duetime local``."""
    svc = stack_service(stack, allow_private_targets=True)
    with serving(stack, svc):
        yield make_call(svc.create_team("gamma")[1]), svc


def test_header_values_never_come_back_from_create_get_list_or_patch(alpha: Call) -> None:
    created = alpha("POST", "/v1/jobs", with_headers(HEADERS))
    assert created.status == 201, created.body
    assert created.body["target"]["headers"] == {"Authorization": REDACTED, "X-Api-Key": REDACTED}
    job_id = created.body["id"]
    for answer in (
        created,
        alpha("GET", f"/v1/jobs/{job_id}"),
        alpha("GET", "/v1/jobs"),
        alpha("PATCH", f"/v1/jobs/{job_id}", {"name": "renamed"}),
        alpha("POST", f"/v1/jobs/{job_id}/pause"),
        alpha("POST", f"/v1/jobs/{job_id}/resume"),
        alpha("POST", "/v1/jobs", with_headers(HEADERS), headers={"Idempotency-Key": "k"}),
        alpha("POST", "/v1/jobs", with_headers(HEADERS), headers={"Idempotency-Key": "k"}),  # the replay
    ):
        assert answer.status in (200, 201), answer.body
        assert not leaks(answer.body), answer.body
    listed = alpha("GET", "/v1/jobs").body["jobs"]
    assert {h for j in listed for h in j["target"]["headers"].values()} == {REDACTED}


def test_runs_answers_do_not_carry_header_values(alpha: Call) -> None:
    job = alpha("POST", "/v1/jobs", with_headers(HEADERS)).body
    run = alpha("POST", f"/v1/jobs/{job['id']}/trigger")
    assert run.status == 201 and not leaks(run.body)
    assert not leaks(alpha("GET", f"/v1/runs/{run.body['run_id']}").body)
    assert not leaks(alpha("GET", f"/v1/jobs/{job['id']}/runs").body)


def test_patch_keeps_values_when_target_is_left_out_or_sent_back_redacted(
    alpha: Call, service: JobService
) -> None:
    job = alpha("POST", "/v1/jobs", with_headers(HEADERS)).body
    team = service.catalog.get_team("alpha")
    assert team is not None

    def stored() -> dict[str, str]:
        return service.get_job(team, job["id"]).target.headers

    alpha("PATCH", f"/v1/jobs/{job['id']}", {"name": "renamed"})
    assert stored() == HEADERS
    # GET, edit, PATCH: the redacted values keep what is stored, under the names as sent
    target = alpha("GET", f"/v1/jobs/{job['id']}").body["target"]
    target["url"] = "https://example.com/other"
    target["headers"] = {**target["headers"], "X-New": "plain"}
    patched = alpha("PATCH", f"/v1/jobs/{job['id']}", {"target": target})
    assert patched.status == 200, patched.body
    assert patched.body["target"]["headers"] == {
        "Authorization": REDACTED,
        "X-Api-Key": REDACTED,
        "X-New": REDACTED,
    }
    assert stored() == {**HEADERS, "X-New": "plain"}
    # header names are case-insensitive: the marker keeps the value stored under any spelling
    patched = alpha(
        "PATCH",
        f"/v1/jobs/{job['id']}",
        {
            "target": {
                "url": "https://example.com/hook",
                "headers": {"authorization": REDACTED, "X-Api-Key": "new"},
            }
        },
    )
    assert patched.status == 200, patched.body
    assert stored() == {"authorization": SECRET, "X-Api-Key": "new"}
    # a target without headers replaces them all
    alpha("PATCH", f"/v1/jobs/{job['id']}", {"target": {"url": "https://example.com/hook"}})
    assert stored() == {}


def test_the_marker_cannot_stand_for_a_value_that_is_not_stored(alpha: Call, service: JobService) -> None:
    refused = alpha("POST", "/v1/jobs", with_headers({"Authorization": REDACTED}))
    assert refused.status == 422 and refused.body["error"]["field"] == "target.headers", refused.body
    job = alpha("POST", "/v1/jobs", with_headers({"Authorization": SECRET})).body
    patch = {"target": {"url": "https://example.com/hook", "headers": {"X-Unknown": REDACTED}}}
    refused = alpha("PATCH", f"/v1/jobs/{job['id']}", patch)
    assert refused.status == 422 and refused.body["error"]["field"] == "target.headers", refused.body
    assert "X-Unknown" in refused.body["error"]["message"]
    team = service.catalog.get_team("alpha")
    assert team is not None and service.get_job(team, job["id"]).target.headers == {"Authorization": SECRET}


def test_the_worker_sends_the_real_values(
    private_ok: tuple[Call, JobService], stack: Stack, target: DemoTargetServer
) -> None:
    gamma, _ = private_ok
    job = gamma("POST", "/v1/jobs", with_headers(HEADERS, target.url)).body
    sent_back = gamma("GET", f"/v1/jobs/{job['id']}").body["target"]  # redacted
    assert gamma("PATCH", f"/v1/jobs/{job['id']}", {"target": sent_back}).status == 200
    run = gamma("POST", f"/v1/jobs/{job['id']}/trigger").body
    stack.drain(stack.worker(), lambda: bool(target.recorder.calls))
    call = target.recorder.calls[0]
    assert call.headers["idempotency-key"] == run["run_id"]
    assert call.headers["authorization"] == SECRET and call.headers["x-api-key"] == OTHER


def test_the_cli_shows_the_redacted_view(
    private_ok: tuple[Call, JobService], capsys: pytest.CaptureFixture[str]
) -> None:
    gamma, svc = private_ok
    token = svc.issue_token("gamma")
    job = gamma("POST", "/v1/jobs", with_headers(HEADERS)).body
    gateway = LocalGateway(api.handle, 0).start()
    try:
        for args in (
            ["jobs", "get", job["id"]],
            ["jobs", "get", job["id"], "--json"],
            ["jobs", "list", "--json"],
        ):
            assert cli([*args, "--url", gateway.url, "--token", token]) == 0
            shown = capsys.readouterr().out
            assert REDACTED in shown and "s3cr3t" not in shown, shown
    finally:
        gateway.shutdown()
        gateway.server_close()


# --- secrets that would follow a URL, and secrets in URLs ---------------------------------------------------

SECRET_URL = "https://deploy:pa55-s3cr3t@example.com/hook?token=t0k-s3cr3t&page=2"
SHOWN_URL = "https://deploy:***@example.com/hook?token=***&page=2"
WEBHOOK = "https://hooks.example.com/duetime?api_key=w3bh00k-s3cr3t"


def history(call: Call, job_id: str) -> list[dict[str, Any]]:
    answer = call("GET", f"/v1/jobs/{job_id}/history")
    assert answer.status == 200, answer.body
    return list(answer.body["changes"])


def stored_target(service: JobService, team_id: str, job_id: str) -> Any:
    team = service.catalog.get_team(team_id)
    assert team is not None
    return service.get_job(team, job_id).target


def test_a_changed_origin_drops_stored_header_secrets_and_names_each_header(
    alpha: Call, service: JobService
) -> None:
    job = alpha("POST", "/v1/jobs", with_headers(HEADERS)).body
    target = alpha("GET", f"/v1/jobs/{job['id']}").body["target"]
    before = history(alpha, job["id"])
    for moved in (
        "https://echo.example.net/anything",  # another host: a public echo would show the headers in the run
        "http://example.com/hook",  # another scheme
        "https://example.com:8443/hook",  # another port
        "https://example.com.evil.io/hook",
    ):
        refused = alpha("PATCH", f"/v1/jobs/{job['id']}", {"target": {**target, "url": moved}})
        assert refused.status == 422, (moved, refused.body)
        error = refused.body["error"]
        assert error["field"] == "target.headers.Authorization", error
        assert (
            "target.headers.Authorization" in error["message"]
            and "target.headers.X-Api-Key" in error["message"]
        )
        assert not leaks(refused.body)
    assert stored_target(service, "alpha", job["id"]).url == "https://example.com/hook"  # nothing written
    assert stored_target(service, "alpha", job["id"]).headers == HEADERS
    assert history(alpha, job["id"]) == before
    # the same origin, spelled otherwise, keeps them; a new origin takes values sent again
    same = alpha(
        "PATCH", f"/v1/jobs/{job['id']}", {"target": {**target, "url": "https://EXAMPLE.com:443/v2"}}
    )
    assert same.status == 200, same.body
    assert stored_target(service, "alpha", job["id"]).headers == HEADERS
    resent = {"url": "https://echo.example.net/anything", "headers": {"Authorization": "Bearer for-echo"}}
    assert alpha("PATCH", f"/v1/jobs/{job['id']}", {"target": resent}).status == 200
    assert stored_target(service, "alpha", job["id"]).headers == {"Authorization": "Bearer for-echo"}


def test_a_target_moved_to_another_origin_never_gets_the_stored_headers(
    private_ok: tuple[Call, JobService], stack: Stack, target: DemoTargetServer
) -> None:
    """The attack: the same machine under another name stands for a host the attacker reads (an echo)."""
    gamma, _ = private_ok
    job = gamma("POST", "/v1/jobs", with_headers(HEADERS, target.url)).body
    shown = gamma("GET", f"/v1/jobs/{job['id']}").body["target"]
    elsewhere = target.url.replace("127.0.0.1", "localhost")
    assert elsewhere != target.url
    refused = gamma("PATCH", f"/v1/jobs/{job['id']}", {"target": {**shown, "url": elsewhere}})
    assert refused.status == 422 and refused.body["error"]["field"].startswith("target.headers."), (
        refused.body
    )
    run = gamma("POST", f"/v1/jobs/{job['id']}/trigger").body
    stack.drain(stack.worker(), lambda: bool(target.recorder.calls))
    assert [c.headers.get("host") for c in target.recorder.calls] == [target.url.split("/")[2]]
    assert target.recorder.calls[0].headers["authorization"] == SECRET  # only its own origin got it
    assert not leaks(gamma("GET", f"/v1/runs/{run['run_id']}").body)


def test_url_secrets_never_come_back_from_answers_history_or_the_cli(
    private_ok: tuple[Call, JobService], capsys: pytest.CaptureFixture[str]
) -> None:
    gamma, svc = private_ok
    body = {
        **JOB,
        "target": {"url": SECRET_URL},
        "notify": [{"type": "webhook", "url": WEBHOOK, "events": ["dead"]}],
    }
    created = gamma("POST", "/v1/jobs", body)
    assert created.status == 201, created.body
    assert created.body["target"]["url"] == SHOWN_URL
    assert created.body["notify"][0]["url"] == "https://hooks.example.com/duetime?api_key=***"
    job_id = created.body["id"]
    new_secret = {"target": {"url": SECRET_URL.replace("t0k-s3cr3t", "n3w-s3cr3t")}}
    answers = [
        created,
        gamma("GET", f"/v1/jobs/{job_id}"),
        gamma("GET", "/v1/jobs"),
        gamma("GET", "/v1/jobs", query={"q": "nightly"}),
        gamma("PATCH", f"/v1/jobs/{job_id}", new_secret),
        gamma("PATCH", f"/v1/jobs/{job_id}", {"target": {"url": "https://example.com/other?sig=s1g-s3cr3t"}}),
        gamma("POST", f"/v1/jobs/{job_id}/pause"),
        gamma("GET", f"/v1/jobs/{job_id}/history"),
        gamma("POST", f"/v1/jobs/{job_id}/trigger"),
    ]
    for answer in answers:
        assert answer.status in (200, 201), answer.body
        assert not leaks(answer.body), answer.body
    changes = history(gamma, job_id)
    assert changes[-2]["fields"]["target"] == {
        "from": "<secret values hidden>",
        "to": "<a secret value changed>",
    }
    assert changes[-3]["fields"]["target"]["to"]["url"] == "https://example.com/other?sig=***"
    assert stored_target(svc, "gamma", job_id).url == "https://example.com/other?sig=s1g-s3cr3t"  # intact
    token = svc.issue_token("gamma")
    gateway = LocalGateway(api.handle, 0).start()
    try:
        for args in (["jobs", "get", job_id], ["jobs", "get", job_id, "--json"], ["jobs", "list", "--json"]):
            assert cli([*args, "--url", gateway.url, "--token", token]) == 0
            shown = capsys.readouterr().out
            assert "sig=***" in shown and "s3cr3t" not in shown, shown
    finally:
        gateway.shutdown()
        gateway.server_close()


def test_a_url_sent_back_as_shown_keeps_its_secrets_and_an_edited_one_is_refused(
    private_ok: tuple[Call, JobService], stack: Stack, target: DemoTargetServer
) -> None:
    gamma, svc = private_ok
    url = f"{target.url}?token=t0k-s3cr3t&page=2"
    job = gamma("POST", "/v1/jobs", with_headers(HEADERS, url)).body
    shown = gamma("GET", f"/v1/jobs/{job['id']}").body["target"]
    assert shown["url"] == f"{target.url}?token=***&page=2"
    # GET, edit a header, PATCH back: the shown URL stands for the stored one
    patched = gamma("PATCH", f"/v1/jobs/{job['id']}", {"target": {**shown, "method": "PUT"}})
    assert patched.status == 200 and patched.body["target"]["url"] == shown["url"], patched.body
    assert stored_target(svc, "gamma", job["id"]).url == url
    before = history(gamma, job["id"])
    # an edited URL still holding the marker cannot tell which secret it means: refused, nothing written
    for edited in (shown["url"].replace("page=2", "page=3"), shown["url"].replace("***", "%2A%2A%2A")):
        refused = gamma("PATCH", f"/v1/jobs/{job['id']}", {"target": {**shown, "url": edited}})
        assert refused.status == 422 and refused.body["error"]["field"] == "target.url", refused.body
    assert stored_target(svc, "gamma", job["id"]).url == url and history(gamma, job["id"]) == before
    # the call goes to the stored URL, token included
    gamma("PATCH", f"/v1/jobs/{job['id']}", {"target": {**shown, "method": "POST"}})
    gamma("POST", f"/v1/jobs/{job['id']}/trigger")
    stack.drain(stack.worker(), lambda: bool(target.recorder.calls))
    assert target.recorder.calls[0].query == {"token": "t0k-s3cr3t", "page": "2"}
