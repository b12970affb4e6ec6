"""The REST API through the api Lambda handler, on DynamoDB Local + LocalStack SQS."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

import pytest

from duetime.api.service import JobService
from duetime.domain.clock import ManualClock
from duetime.execution.worker import WorkOutcome

from .api_support import JOB, Call, a_fresh_minute, make_call
from .conftest import Stack


def test_create_returns_201_with_the_schedule_state(alpha: Call) -> None:
    answer = alpha("POST", "/v1/jobs", JOB)
    assert answer.status == 201, answer.body
    job = answer.body
    assert job["id"] and job["name"] == "nightly" and job["jitter_seconds"] == 300
    assert job["next_nominal_at"].endswith(("T23:00:00Z", "T22:00:00Z"))  # midnight in Berlin, in UTC
    assert job["next_run_at"] >= job["next_nominal_at"]
    assert alpha("GET", f"/v1/jobs/{job['id']}").body == job


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({**JOB, "schedule": {"cron": "0 0 30 2 *", "timezone": "UTC"}}, 422, "schedule.cron"),
        ({**JOB, "schedule": {"cron": "0 0 * * * *", "timezone": "UTC"}}, 422, "schedule.cron"),
        ({**JOB, "schedule": {"cron": "0 0 * * *", "timezone": "Moon/Base"}}, 422, "schedule.timezone"),
        ({**JOB, "schedule": {"at": "2020-01-01T00:00:00Z"}}, 422, "schedule.at"),
        ({**JOB, "schedule": {"rate": "0 minutes"}}, 422, "schedule.rate"),
        ({**JOB, "colour": "red"}, 422, "colour"),
        ({**JOB, "retry": {"max_attempts": -1}}, 422, "retry.max_attempts"),
        ({**JOB, "target": {"url": "http://169.254.169.254/latest/meta-data"}}, 422, "target.url"),
        ({**JOB, "target": {"url": "http://127.0.0.1:8080/x"}}, 422, "target.url"),
        ({**JOB, "target": {"url": "http://2130706433/x"}}, 422, "target.url"),
        ({**JOB, "target": {"url": "http://[::ffff:10.0.0.1]/x"}}, 422, "target.url"),
        ({**JOB, "target": {"url": "https://e.com", "headers": {"X": "a\r\nb: c"}}}, 422, "target.headers"),
        ({**JOB, "start_at": "0001-01-01T00:00:00+05:00"}, 422, "start_at"),  # no UTC instant: was a 500
        ({**JOB, "catchup_window_seconds": -1}, 422, "catchup_window_seconds"),
        ({**JOB, "catchup_window_seconds": 7 * 86_400 + 1}, 422, "catchup_window_seconds"),
        ({**JOB, "catchup_window_seconds": "an hour"}, 422, "catchup_window_seconds"),
        ({**JOB, "schedule": {"at": "9999-12-31T23:59:59-05:00"}}, 422, "schedule.at"),
        ({**JOB, "success_deadline_seconds": 59}, 422, "success_deadline_seconds"),
        ({**JOB, "success_deadline_seconds": 30 * 86_400 + 1}, 422, "success_deadline_seconds"),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_nothing_is_written(
    alpha: Call, body: dict[str, Any], status: int, field: str
) -> None:
    answer = alpha("POST", "/v1/jobs", body)
    assert answer.status == status, answer.body
    assert answer.body["error"]["field"] == field
    assert alpha("GET", "/v1/jobs").body["jobs"] == []


def test_malformed_json_is_400_and_huge_bodies_are_413(alpha: Call) -> None:
    malformed = alpha("POST", "/v1/jobs", raw="{not json")
    assert malformed.status == 400 and malformed.body["error"]["code"] == "bad_request"
    huge = alpha("POST", "/v1/jobs", {**JOB, "name": "x" * 70_000})
    assert huge.status == 413 and huge.body["error"]["code"] == "payload_too_large"


def test_missing_or_wrong_tokens_are_401(service: JobService, alpha: Call) -> None:
    assert make_call(None)("GET", "/v1/jobs").status == 401
    assert make_call("dt_wrong")("GET", "/v1/jobs").status == 401
    assert make_call(None)("GET", "/healthz").status == 200


def test_a_team_sees_only_its_own_jobs_and_runs(alpha: Call, beta: Call) -> None:
    job = alpha("POST", "/v1/jobs", JOB).body
    run = alpha("POST", f"/v1/jobs/{job['id']}/trigger").body
    for method, path in [
        ("GET", f"/v1/jobs/{job['id']}"),
        ("PATCH", f"/v1/jobs/{job['id']}"),
        ("DELETE", f"/v1/jobs/{job['id']}"),
        ("POST", f"/v1/jobs/{job['id']}/pause"),
        ("POST", f"/v1/jobs/{job['id']}/trigger"),
        ("GET", f"/v1/jobs/{job['id']}/runs"),
        ("GET", f"/v1/runs/{run['run_id']}"),
        ("POST", f"/v1/runs/{run['run_id']}/retry"),
    ]:
        answer = beta(method, path, {} if method == "PATCH" else None)
        missing = beta(
            method, path.replace(job["id"], "01JDZ3K6R2V9Q8T7S6P5N4M3K2"), {} if method == "PATCH" else None
        )
        assert answer.status == 404 and answer.body == {
            "error": {**missing.body["error"], "message": answer.body["error"]["message"]}
        }, (method, path)
    assert beta("GET", "/v1/jobs").body["jobs"] == []
    assert alpha("GET", f"/v1/jobs/{job['id']}").status == 200


def test_jobs_are_listed_with_a_cursor(alpha: Call) -> None:
    created = {alpha("POST", "/v1/jobs", {**JOB, "name": f"job {i}"}).body["id"] for i in range(5)}
    seen: list[str] = []
    cursor = None
    for _ in range(5):
        query = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        page = alpha("GET", "/v1/jobs", query=query).body
        seen += [j["id"] for j in page["jobs"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert sorted(seen) == sorted(created)
    assert (
        alpha("GET", "/v1/jobs", query={"cursor": "garbage!"}).status == 422
    )  # not base64: the document says
    assert alpha("GET", "/v1/jobs", query={"cursor": "Z2FyYmFnZQ=="}).status == 400  # base64, not a cursor
    assert alpha("GET", "/v1/jobs", query={"limit": "0"}).status == 422


def test_an_idempotency_key_makes_creation_safe_to_retry(alpha: Call) -> None:
    first = alpha("POST", "/v1/jobs", JOB, headers={"Idempotency-Key": "create-nightly"})
    again = alpha("POST", "/v1/jobs", JOB, headers={"Idempotency-Key": "create-nightly"})
    assert first.status == 201 and again.body["id"] == first.body["id"]
    other = alpha("POST", "/v1/jobs", {**JOB, "name": "other"}, headers={"Idempotency-Key": "create-nightly"})
    assert other.status == 409 and other.body["error"]["field"] == "Idempotency-Key"
    assert len(alpha("GET", "/v1/jobs").body["jobs"]) == 1


def test_exact_jobs_count_against_the_teams_quota(alpha: Call) -> None:
    first = alpha("POST", "/v1/jobs", {**JOB, "exact": True})
    assert first.status == 201
    over = alpha("POST", "/v1/jobs", {**JOB, "exact": True})
    assert over.status == 429 and over.body["error"]["field"] == "exact"
    plain = alpha("POST", "/v1/jobs", JOB).body
    assert alpha("PATCH", f"/v1/jobs/{plain['id']}", {"exact": True}).status == 429
    assert alpha("DELETE", f"/v1/jobs/{first.body['id']}").status == 204
    assert alpha("PATCH", f"/v1/jobs/{plain['id']}", {"exact": True}).status == 200


def test_pause_resume_patch_and_delete(alpha: Call, stack: Stack) -> None:
    job = alpha("POST", "/v1/jobs", JOB).body
    paused = alpha("POST", f"/v1/jobs/{job['id']}/pause").body
    assert paused["paused"] is True and paused["next_run_at"] is None
    item = stack.dynamodb.get_item(TableName=stack.names.jobs, Key={"job_id": {"S": job["id"]}})["Item"]
    assert "due_bucket" not in item  # out of the due index
    resumed = alpha("POST", f"/v1/jobs/{job['id']}/resume").body
    assert resumed["paused"] is False and resumed["next_run_at"] is not None
    patched = alpha(
        "PATCH", f"/v1/jobs/{job['id']}", {"schedule": {"rate": "5 minutes"}, "name": "fast"}
    ).body
    assert patched["name"] == "fast" and patched["schedule"] == {"rate": "5 minutes"}
    assert alpha("PATCH", f"/v1/jobs/{job['id']}", {"schedule": {"rate": "-1 minutes"}}).status == 422
    assert alpha("GET", f"/v1/jobs/{job['id']}").body["name"] == "fast"  # the bad patch wrote nothing
    assert alpha("DELETE", f"/v1/jobs/{job['id']}").status == 204
    assert alpha("GET", f"/v1/jobs/{job['id']}").status == 404


def test_trigger_runs_now_without_touching_the_schedule_and_runs_are_listed(
    alpha: Call, stack: Stack
) -> None:
    job = alpha("POST", "/v1/jobs", JOB).body
    run = alpha("POST", f"/v1/jobs/{job['id']}/trigger")
    assert (
        run.status == 201
        and run.body["status"] == "queued"
        and run.body["run_id"].startswith(job["id"] + "@")
    )
    assert [m.run_id for m in stack.messages()] == [run.body["run_id"]]
    after = alpha("GET", f"/v1/jobs/{job['id']}").body
    assert after["next_nominal_at"] == job["next_nominal_at"]
    runs = alpha("GET", f"/v1/jobs/{job['id']}/runs").body["runs"]
    assert [r["run_id"] for r in runs] == [run.body["run_id"]]
    assert alpha("GET", f"/v1/runs/{run.body['run_id']}").body["status"] == "queued"
    assert alpha("POST", f"/v1/runs/{run.body['run_id']}/retry").status == 409  # only failed/dead runs


def test_ids_a_client_percent_encodes_are_read_decoded_as_api_gateways_rest_api_hands_them_on(
    alpha: Call,
) -> None:
    """A REST API passes the path on as sent: ``duetime``'s client and the console encode a run id's ``@``
    and ``:`` (``%40``, ``%3A``); the routes read each segment decoded (``api.request_path``)."""
    job = alpha("POST", "/v1/jobs", JOB).body
    run_id = alpha("POST", f"/v1/jobs/{quote(job['id'], safe='')}/trigger").body["run_id"]
    encoded = quote(run_id, safe="")
    assert "%40" in encoded and "%3A" in encoded
    shown = alpha("GET", f"/v1/runs/{encoded}")
    assert shown.status == 200 and shown.body["run_id"] == run_id
    assert alpha("POST", f"/v1/runs/{encoded}/cancel").body["status"] == "cancelled"
    assert alpha("GET", f"/v1/jobs/%{ord(job['id'][0]):02X}{job['id'][1:]}").body["id"] == job["id"]
    refused = alpha("GET", "/v1/runs/a%2Fb")  # an encoded slash stays in its segment: no such run
    assert refused.status == 404 and refused.body["error"]["code"] == "not_found"


def test_trigger_with_a_body_sends_it_for_that_run_only(alpha: Call, stack: Stack) -> None:
    job = alpha("POST", "/v1/jobs", {**JOB, "target": {"url": "https://example.com/hook", "body": "{}"}}).body
    as_json = alpha("POST", f"/v1/jobs/{job['id']}/trigger", {"body": {"backfill": True, "n": [1, 2]}})
    as_text = alpha("POST", f"/v1/jobs/{job['id']}/trigger", {"body": "plain text"})
    as_job = alpha("POST", f"/v1/jobs/{job['id']}/trigger", {"body": None})
    assert {as_json.status, as_text.status, as_job.status} == {201}
    stored = {run: stack.store.get_run(run) for run in (r.body["run_id"] for r in (as_json, as_text, as_job))}
    bodies = [run.target.body if run else "missing" for run in stored.values()]
    assert bodies == ['{"backfill":true,"n":[1,2]}', "plain text", "{}"]
    assert alpha("GET", f"/v1/jobs/{job['id']}").body["target"]["body"] == "{}"  # the job is unchanged


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [({"payload": "x"}, 422, "payload"), ([{"body": "x"}], 422, "body"), ({"body": "x" * 70_000}, 413, None)],
)
def test_a_bad_trigger_body_is_refused_and_no_run_is_made(
    alpha: Call, stack: Stack, body: Any, status: int, field: str | None
) -> None:
    job = alpha("POST", "/v1/jobs", JOB).body
    answer = alpha("POST", f"/v1/jobs/{job['id']}/trigger", body)
    assert answer.status == status and answer.body["error"].get("field") == field, answer.body
    assert alpha("GET", f"/v1/jobs/{job['id']}/runs").body["runs"] == []
    assert stack.messages() == []


def test_a_trigger_past_the_teams_runs_per_minute_is_429_naming_it_and_makes_no_run(
    alpha: Call, beta: Call, stack: Stack, service: JobService
) -> None:
    team = service.catalog.get_team("alpha")
    assert team is not None
    stack.store.put_team(team.model_copy(update={"runs_per_minute": 2}))
    job = alpha("POST", "/v1/jobs", JOB).body
    assert alpha("GET", "/v1/team").body["runs_per_minute"] == 2
    a_fresh_minute(stack)
    assert [alpha("POST", f"/v1/jobs/{job['id']}/trigger").status for _ in range(2)] == [201, 201]
    refused = alpha("POST", f"/v1/jobs/{job['id']}/trigger")
    assert refused.status == 429 and refused.body["error"]["field"] == "runs_per_minute", refused.body
    assert refused.body["error"]["code"] == "rate_limited" and 1 <= int(refused.headers["Retry-After"]) <= 60
    assert len(alpha("GET", f"/v1/jobs/{job['id']}/runs").body["runs"]) == 2
    assert len(stack.messages()) == 2
    other = beta("POST", "/v1/jobs", JOB).body  # another team's budget is its own
    assert beta("POST", f"/v1/jobs/{other['id']}/trigger").status == 201


def test_cancel_ends_a_queued_run_at_once_and_a_finished_run_answers_409(
    alpha: Call, beta: Call, stack: Stack
) -> None:
    job = alpha("POST", "/v1/jobs", JOB).body
    run_id = alpha("POST", f"/v1/jobs/{job['id']}/trigger").body["run_id"]
    assert beta("POST", f"/v1/runs/{run_id}/cancel").status == 404  # another team's run: as a missing one

    cancelled = alpha("POST", f"/v1/runs/{run_id}/cancel")

    assert cancelled.status == 200 and cancelled.body["status"] == "cancelled", cancelled.body
    assert cancelled.body["finished_at"] and cancelled.body["queue_deadline"] is None
    assert alpha("GET", f"/v1/runs/{run_id}").body == cancelled.body
    again = alpha("POST", f"/v1/runs/{run_id}/cancel")
    assert again.status == 409 and "cancelled" in again.body["error"]["message"]
    assert alpha("POST", f"/v1/runs/{run_id}/retry").status == 409
    (message,) = stack.messages()  # its message was queued before the cancel: the worker drops it
    assert stack.worker().process(message).outcome is WorkOutcome.DUPLICATE
    assert alpha("GET", f"/v1/runs/{run_id}").body["status"] == "cancelled"
    assert alpha("POST", "/v1/runs/nojob@2026-12-01T00:00:00Z/cancel").status == 404


def test_times_a_misfire_drops_are_listed_as_skipped_runs_and_the_catchup_window_is_the_jobs(
    alpha: Call, stack: Stack
) -> None:
    every_minute = {**JOB, "schedule": {"rate": "1 minute"}, "exact": False, "jitter_seconds": 0}
    skipping = alpha("POST", "/v1/jobs", {**every_minute, "misfire": "skip"}).body
    patient = alpha(
        "POST", "/v1/jobs", {**every_minute, "misfire": "skip", "catchup_window_seconds": 600}
    ).body
    assert (skipping["catchup_window_seconds"], patient["catchup_window_seconds"]) == (None, 600)
    first = datetime.fromisoformat(skipping["next_run_at"])
    later = ManualClock(first + timedelta(minutes=3, seconds=30))  # the pollers were down for 3.5 minutes

    report = stack.poller(clock=later).claim()

    assert (report.runs_created, report.runs_skipped) == (1 + 4, 3)  # 30 s late is inside 60 s: it runs
    newest_first = alpha("GET", f"/v1/jobs/{skipping['id']}/runs").body["runs"]
    assert [r["status"] for r in newest_first] == ["queued", "skipped", "skipped", "skipped"]
    assert all("misfire policy skip" in r["result"]["error"] and r["finished_at"] for r in newest_first[1:])
    assert {r["status"] for r in alpha("GET", f"/v1/jobs/{patient['id']}/runs").body["runs"]} == {"queued"}
    assert {m.run_id for m in stack.messages()} == {r.run_id for r in report.runs}  # none for skipped ones
    cleared = alpha("PATCH", f"/v1/jobs/{patient['id']}", {"catchup_window_seconds": None})
    assert cleared.status == 200 and cleared.body["catchup_window_seconds"] is None


def test_a_missed_success_deadline_flags_the_job_and_the_next_time_met_recovers_it(
    local_team: Call, stack: Stack, target: Any
) -> None:
    alpha = local_team
    failing = {"url": target.url + "?status=503"}
    body = {**JOB, "schedule": {"rate": "1 minute"}, "exact": True, "success_deadline_seconds": 60}
    job = alpha("POST", "/v1/jobs", {**body, "target": failing, "retry": {"max_attempts": 1}}).body
    assert job["success_deadline_seconds"] == 60 and job["missing_since"] is None
    nominal = datetime.fromisoformat(job["next_nominal_at"])
    clock = ManualClock(nominal)

    (run,) = stack.poller(clock=clock).claim().runs
    (message,) = stack.messages()
    assert stack.worker(clock=clock).process(message).outcome is WorkOutcome.DEAD
    shown = alpha("GET", f"/v1/runs/{run.run_id}").body
    assert shown["success_by"] == (nominal + timedelta(seconds=60)).isoformat().replace("+00:00", "Z")
    clock.advance(61)
    checked = stack.poller(clock=clock).recover().deadlines
    assert checked is not None and (checked.missed, checked.recovered) == (1, 0)

    flagged = alpha("GET", f"/v1/jobs/{job['id']}").body
    assert flagged["missing_since"] == job["next_nominal_at"]
    assert [j["missing_since"] for j in alpha("GET", "/v1/jobs").body["jobs"]] == [job["next_nominal_at"]]
    missed = [a for a in stack.store.list_alerts(run.team) if a["kind"] == "missed"]
    assert [(a["run_id"], a["job_id"]) for a in missed] == [(run.run_id, job["id"])]

    fixed = alpha("PATCH", f"/v1/jobs/{job['id']}", {"target": {"url": target.url}}).body
    assert fixed["missing_since"] == job["next_nominal_at"]  # an edit leaves the flag
    clock.set(datetime.fromisoformat(fixed["next_run_at"]))
    stack.poller(clock=clock).claim()
    (message,) = stack.messages()
    assert stack.worker(clock=clock).process(message).outcome is WorkOutcome.SUCCEEDED

    assert alpha("GET", f"/v1/jobs/{job['id']}").body["missing_since"] is None  # at once, by the worker
    kinds = [a["kind"] for a in stack.store.list_alerts(run.team)]
    assert (kinds.count("missed"), kinds.count("recovered")) == (1, 1)


def test_a_jobs_runs_are_listed_newest_first_and_a_cursor_works_only_for_its_own_job(alpha: Call) -> None:
    job, other = (alpha("POST", "/v1/jobs", JOB).body for _ in range(2))
    older = alpha("POST", f"/v1/jobs/{job['id']}/trigger").body["run_id"]
    alpha("POST", f"/v1/jobs/{other['id']}/trigger")
    time.sleep(1.05)  # run ids carry the nominal second
    newer = alpha("POST", f"/v1/jobs/{job['id']}/trigger").body["run_id"]
    first = alpha("GET", f"/v1/jobs/{job['id']}/runs", query={"limit": "1"}).body
    assert [r["run_id"] for r in first["runs"]] == [newer] and first["next_cursor"]
    query = {"limit": "1", "cursor": first["next_cursor"]}
    second = alpha("GET", f"/v1/jobs/{job['id']}/runs", query=query).body
    assert [r["run_id"] for r in second["runs"]] == [older]
    foreign = alpha("GET", f"/v1/jobs/{other['id']}/runs", query=query)
    assert foreign.status == 400 and foreign.body["error"]["field"] == "cursor"
    assert alpha("GET", "/v1/runs/not-a-run-id").status == 404


def test_a_jobs_dst_policy_is_stored_changed_and_read_back_from_dynamodb(alpha: Call) -> None:
    schedule = {"cron": "30 2 * 3 0", "timezone": "America/New_York"}
    job = alpha("POST", "/v1/jobs", {**JOB, "schedule": schedule, "dst": {"gap": "skip"}, "exact": True}).body
    assert alpha("GET", f"/v1/jobs/{job['id']}").body["dst"] == {"gap": "skip", "overlap": None}
    preview = alpha("GET", f"/v1/jobs/{job['id']}/preview", query={"count": "2"}).body
    assert [r["nominal_at"] for r in preview["runs"]] == ["2027-03-07T07:30:00Z", "2027-03-21T06:30:00Z"]
    assert preview["skipped"] == [{"wall_time": "2027-03-14T02:30:00"}]
    changed = alpha("PATCH", f"/v1/jobs/{job['id']}", {"dst": {"overlap": "both"}}).body
    assert changed["dst"] == {"gap": None, "overlap": "both"}
    assert alpha("GET", f"/v1/jobs/{job['id']}").body["dst"] == {"gap": None, "overlap": "both"}


def test_preview_marks_runs_moved_by_dst_and_load_counts_due_runs_per_minute(alpha: Call) -> None:
    job = alpha(
        "POST",
        "/v1/jobs",
        {**JOB, "schedule": {"cron": "30 2 * 3 0", "timezone": "America/New_York"}, "exact": True},
    ).body
    runs = alpha("GET", f"/v1/jobs/{job['id']}/preview", query={"count": "3"}).body["runs"]
    assert [(r["nominal_at"], r["dst_shifted"]) for r in runs] == [
        ("2027-03-07T07:30:00Z", False),
        ("2027-03-14T07:00:00Z", True),
        ("2027-03-21T06:30:00Z", False),
    ]
    load = alpha("GET", "/v1/load", query={"from": "2027-03-14T06:00:00Z", "to": "2027-03-14T08:00:00Z"}).body
    assert load["total"] == 1 and load["minutes"] == [{"minute": "2027-03-14T07:00", "runs": 1}]
    every_minute = alpha(
        "POST", "/v1/jobs", {**JOB, "schedule": {"rate": "1 minute"}, "jitter_seconds": 0}
    ).body
    start = datetime.fromisoformat(every_minute["next_run_at"])
    window = {"from": start.isoformat(), "to": (start + timedelta(minutes=10)).isoformat()}
    load = alpha("GET", "/v1/load", query=window).body  # ten minutes of an every-minute job
    assert load["total"] == 10 and {m["runs"] for m in load["minutes"]} == {1}
    assert (
        alpha("GET", "/v1/load", query={"from": "2027-01-01T00:00:00Z", "to": "2027-03-01T00:00:00Z"}).status
        == 422
    )  # more than 24 hours


def test_openapi_document_lists_every_operation(service: JobService) -> None:
    doc = make_call(None)("GET", "/v1/openapi.json").body
    operations = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops}
    assert len(operations) == 40
    assert ("GET", "/v1/jobs/{job_id}/fires") in operations and ("GET", "/v1/audit") in operations
    assert ("GET", "/v1/jobs/{job_id}/signing-key") in operations
    assert ("GET", "/v1/jobs/{job_id}/history") in operations and ("GET", "/v1/team") in operations
    assert not any(path.startswith("/console") for _, path in operations)  # the console's files: not the API
    assert ("POST", "/v1/runs/{run_id}/retry") in operations and ("GET", "/v1/load") in operations
    assert ("POST", "/v1/runs/{run_id}/cancel") in operations
    assert ("PUT", "/v1/calendars/{name}") in operations and (
        "GET",
        "/v1/calendars/{name}/history",
    ) in operations
    cancel = doc["paths"]["/v1/runs/{run_id}/cancel"]["post"]
    assert set(cancel["responses"]) >= {"200", "404", "409"} and "heartbeat" in cancel["description"]
    trigger = doc["paths"]["/v1/jobs/{job_id}/trigger"]["post"]
    assert "TriggerIn" in json.dumps(trigger["requestBody"])  # the optional body is documented
    backfill = doc["paths"]["/v1/jobs/{job_id}/backfill"]["post"]
    assert set(backfill["responses"]) >= {"202", "404", "422"}
    assert backfill["responses"]["202"]["description"] == "Accepted"
    window = doc["components"]["schemas"]["BackfillWindow"]
    assert window["required"] == ["from", "to"] and window["additionalProperties"] is False
    assert "1,000" in window["properties"]["to"]["description"] and "1,000" in backfill["description"]
    assert doc["components"]["schemas"]["BackfillOut"]["required"] == ["runs"]
    assert doc["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"


def test_a_jobs_signing_key_is_shown_to_its_own_team_only_and_each_job_has_its_own(
    alpha: Call, beta: Call
) -> None:
    job, other = (alpha("POST", "/v1/jobs", JOB).body for _ in range(2))
    shown = alpha("GET", f"/v1/jobs/{job['id']}/signing-key")
    assert shown.status == 200 and shown.body["job_id"] == job["id"]
    (key,) = shown.body["keys"]
    assert key["key_id"] == "s1" and key["until"] is None and key["secret"].startswith("whsec_")
    (others,) = alpha("GET", f"/v1/jobs/{other['id']}/signing-key").body["keys"]
    assert others["secret"] != key["secret"]
    assert beta("GET", f"/v1/jobs/{job['id']}/signing-key").status == 404  # another team's job


def test_unknown_routes_are_404_in_the_error_shape(alpha: Call) -> None:
    answer = alpha("GET", "/v1/nothing")
    assert answer.status == 404 and answer.body["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/v1/jobs", "GET, POST"),
        ("DELETE", "/v1/jobs", "GET, POST"),
        ("POST", "/v1/jobs/01JDZ3K6R2V9Q8T7S6P5N4M3K2", "DELETE, GET, PATCH"),
        ("PUT", "/v1/jobs/01JDZ3K6R2V9Q8T7S6P5N4M3K2", "DELETE, GET, PATCH"),
        ("GET", "/v1/jobs/01JDZ3K6R2V9Q8T7S6P5N4M3K2/trigger", "POST"),
        ("HEAD", "/v1/runs/x@y", "GET"),
        ("OPTIONS", "/v1/load", "GET"),
        ("TRACE", "/healthz", "GET"),
        ("POST", "/v1/openapi.json", "GET"),
    ],
)
def test_an_undeclared_method_on_a_known_path_is_405_with_allow(
    alpha: Call, method: str, path: str, allowed: str
) -> None:
    answer = alpha(method, path)
    assert answer.status == 405, answer.body
    assert answer.headers["Allow"] == allowed
    assert answer.body["error"]["code"] == "method_not_allowed"


def test_405_comes_after_authentication_except_on_public_paths(service: JobService) -> None:
    assert make_call(None)("PUT", "/v1/jobs").status == 401
    assert make_call(None)("DELETE", "/healthz").status == 405
    assert make_call(None)("GET", "/v1/nothing").status == 401


def test_a_patch_names_the_field_and_refuses_null_where_the_document_does(alpha: Call) -> None:
    job = alpha("POST", "/v1/jobs", JOB).body
    bad_cron = alpha("PATCH", f"/v1/jobs/{job['id']}", {"schedule": {"cron": "0 0 * *"}})
    assert bad_cron.status == 422 and bad_cron.body["error"]["field"] == "schedule.cron", bad_cron.body
    for field in ("name", "schedule", "target", "retry", "paused"):
        answer = alpha("PATCH", f"/v1/jobs/{job['id']}", {field: None})
        assert answer.status == 422 and answer.body["error"]["field"].startswith(field), answer.body
    cleared = alpha("PATCH", f"/v1/jobs/{job['id']}", {"end_at": None, "start_at": None})
    assert cleared.status == 200 and cleared.body["end_at"] is None
