"""Target header values are write-only: every answer shows the names with the value ``***``, PATCH keeps or
replaces them as documented, and the worker still sends the real values."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from duetime import api
from duetime.adapters.dynamodb.catalog import DynamoCatalog
from duetime.cli import main as cli
from duetime.demo_target import DemoTargetServer
from duetime.local_gateway import LocalGateway
from duetime.service import JobService

from .api_support import JOB, Call, make_call, serving
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
    svc = JobService(
        DynamoCatalog(stack.dynamodb, stack.names),
        stack.store,
        stack.queue,
        stack.clock,
        allow_private_targets=True,
    )
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
