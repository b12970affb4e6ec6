"""Jobs by key, through the API on the in-memory twin: a team-unique key set once, ``PUT
/v1/jobs/by-key/{key}`` creating or replacing the job, ``If-Match`` with the job's ETag (412 once the job
changed, nothing written), and GET and DELETE by key; keys of one or two segments."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from duetime.api import app as api
from duetime.domain.job_keys import etag_of, if_match_holds

from ..api_twin import serving_twin
from ..lambda_support import api_request

NOW = datetime(2026, 12, 17, 12, 0, tzinfo=UTC)
NIGHTLY: dict[str, Any] = {
    "name": "nightly export",
    "schedule": {"cron": "0 2 * * *", "timezone": "Europe/Paris"},
    "target": {"url": "https://example.com/export", "headers": {"Authorization": "Bearer s3cret"}},
}


class Api:
    def __init__(self, token: str) -> None:
        self.token = token

    def __call__(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any, dict[str, str]]:
        response = api_request(
            method, path, self.token, None if body is None else json.dumps(body), None, headers
        )
        answer = json.loads(response["body"]) if response["body"] else None
        given = {**(response.get("headers") or {}), **(response.get("multiValueHeaders") or {})}
        shown = {k.lower(): v if isinstance(v, str) else ", ".join(v) for k, v in given.items()}
        return response["statusCode"], answer, shown


@pytest.fixture
def call() -> Iterator[Api]:
    with serving_twin(NOW) as twin:
        yield Api(twin.token)


def test_a_put_by_key_creates_the_job_then_replaces_it_and_the_same_job_again_writes_nothing(
    call: Api,
) -> None:
    status, created, headers = call("PUT", "/v1/jobs/by-key/billing/nightly-export", NIGHTLY)
    assert status == 201 and created["key"] == "billing/nightly-export"
    assert headers["etag"] == created["etag"]

    status, same, _ = call("PUT", "/v1/jobs/by-key/billing/nightly-export", NIGHTLY)
    assert status == 200 and same["id"] == created["id"] and same["etag"] == created["etag"]
    history = call("GET", f"/v1/jobs/{created['id']}/history")[1]["changes"]
    assert [change["action"] for change in history] == ["create"]  # the same job again: nothing written

    changed = {**NIGHTLY, "schedule": {"cron": "0 3 * * *", "timezone": "Europe/Paris"}}
    status, replaced, _ = call("PUT", "/v1/jobs/by-key/billing/nightly-export", changed)
    assert status == 200 and replaced["id"] == created["id"] and replaced["etag"] != created["etag"]
    assert replaced["next_nominal_at"] == "2026-12-18T02:00:00Z"

    status, read, headers = call("GET", "/v1/jobs/by-key/billing/nightly-export")
    assert status == 200 and read["id"] == created["id"] and headers["etag"] == replaced["etag"]


def test_a_put_replaces_the_job_whole_a_field_left_out_takes_its_default(call: Api) -> None:
    call("PUT", "/v1/jobs/by-key/report", {**NIGHTLY, "jitter_seconds": 30, "labels": {"team": "billing"}})
    status, replaced, _ = call("PUT", "/v1/jobs/by-key/report", NIGHTLY)
    assert status == 200 and replaced["jitter_seconds"] == 300 and replaced["labels"] == {}


def test_if_match_with_the_etag_read_writes_and_a_stale_one_is_412_writing_nothing(call: Api) -> None:
    _, job, _ = call("PUT", "/v1/jobs/by-key/report", NIGHTLY)
    read_etag = job["etag"]
    # Someone edits the job in the console between our read and our write.
    assert call("PATCH", f"/v1/jobs/{job['id']}", {"name": "edited by hand"})[0] == 200

    status, error, _ = call(
        "PUT", "/v1/jobs/by-key/report", {**NIGHTLY, "jitter_seconds": 0}, {"If-Match": read_etag}
    )
    assert (
        status == 412
        and error["error"]["code"] == "precondition_failed"
        and error["error"]["field"] == "If-Match"
    )
    current = call("GET", "/v1/jobs/by-key/report")[1]
    assert current["name"] == "edited by hand" and current["jitter_seconds"] == 300

    status, written, _ = call(
        "PUT", "/v1/jobs/by-key/report", {**NIGHTLY, "jitter_seconds": 0}, {"If-Match": current["etag"]}
    )
    assert status == 200 and written["jitter_seconds"] == 0 and written["name"] == NIGHTLY["name"]
    assert call("PATCH", f"/v1/jobs/{job['id']}", {"paused": True}, {"If-Match": read_etag})[0] == 412


def test_the_schedule_moving_does_not_change_the_etag(call: Api) -> None:
    """The ETag is what the team wrote: a claim or a re-plan moves the job's state, which is not an edit."""
    _, job, _ = call("PUT", "/v1/jobs/by-key/report", NIGHTLY)
    stored = api.service().catalog.get_job(job["id"])
    assert stored is not None
    moved = stored.state.model_copy(update={"version": 7, "next_nominal_at": NOW, "last_scheduled_at": NOW})
    assert etag_of(stored.model_copy(update={"state": moved})) == job["etag"] == etag_of(stored)
    assert etag_of(stored.model_copy(update={"paused": True})) != job["etag"]


def test_if_match_when_no_job_has_the_key_is_412_and_creates_nothing(call: Api) -> None:
    status, _, _ = call("PUT", "/v1/jobs/by-key/report", NIGHTLY, {"If-Match": '"abc"'})
    assert status == 412
    assert call("GET", "/v1/jobs/by-key/report")[0] == 404


def test_a_key_is_unique_in_the_team_and_set_once(call: Api) -> None:
    status, first = call("POST", "/v1/jobs", {**NIGHTLY, "key": "report"})[:2]
    assert status == 201
    status, error = call("POST", "/v1/jobs", {**NIGHTLY, "key": "report"})[:2]
    assert status == 409 and error["error"]["field"] == "key"

    status, error = call("PATCH", f"/v1/jobs/{first['id']}", {"key": "other"})[:2]
    assert status == 422 and error["error"]["field"] == "key"

    status, keyless = call("POST", "/v1/jobs", NIGHTLY)[:2]
    assert status == 201 and keyless["key"] is None
    assert call("PATCH", f"/v1/jobs/{keyless['id']}", {"key": "report"})[0] == 409
    status, keyed = call("PATCH", f"/v1/jobs/{keyless['id']}", {"key": "second"})[:2]
    assert status == 200 and keyed["key"] == "second"
    assert call("GET", "/v1/jobs/by-key/second")[1]["id"] == keyless["id"]


def test_a_body_naming_another_key_than_the_path_is_refused(call: Api) -> None:
    status, error = call("PUT", "/v1/jobs/by-key/report", {**NIGHTLY, "key": "other"})[:2]
    assert status == 422 and error["error"]["field"] == "key"


@pytest.mark.parametrize("key", ["a//b", "-start", "end-", "a/b/c", "sp ace", "x" * 65])
def test_a_key_that_is_not_one_or_two_segments_is_refused(call: Api, key: str) -> None:
    status, error = call("POST", "/v1/jobs", {**NIGHTLY, "key": key})[:2]
    assert status == 422 and error["error"]["field"] == "key"


def test_delete_by_key_honours_if_match_and_frees_the_key(call: Api) -> None:
    _, job, _ = call("PUT", "/v1/jobs/by-key/billing/report", NIGHTLY)
    assert call("DELETE", "/v1/jobs/by-key/billing/report", headers={"If-Match": '"stale"'})[0] == 412
    assert call("DELETE", "/v1/jobs/by-key/billing/report", headers={"If-Match": job["etag"]})[0] == 204
    assert call("GET", "/v1/jobs/by-key/billing/report")[0] == 404
    status, again, _ = call("PUT", "/v1/jobs/by-key/billing/report", NIGHTLY)
    assert status == 201 and again["id"] != job["id"]


@pytest.mark.parametrize("key", ["runs", "preview", "history", "signing-key"])
def test_a_key_named_like_a_jobs_sub_resource_is_still_a_key(call: Api, key: str) -> None:
    status, job, _ = call("PUT", f"/v1/jobs/by-key/{key}", NIGHTLY)
    assert status == 201
    status, read, _ = call("GET", f"/v1/jobs/by-key/{key}")
    assert status == 200 and read["id"] == job["id"]


@pytest.mark.parametrize(
    ("header", "holds"),
    [
        (None, True),
        ("*", True),
        ('"abc"', True),
        ("abc", True),
        ('W/"abc"', True),
        ('"x", "abc"', True),
        ('"x"', False),
    ],
)
def test_if_match_names_the_etag_quoted_or_not_or_in_a_list(header: str | None, holds: bool) -> None:
    assert if_match_holds(header, '"abc"') is holds
