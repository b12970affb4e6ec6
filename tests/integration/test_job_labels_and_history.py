"""Labels, name search, each job's change history and the team's limits, through the api handler on
DynamoDB Local: what the console shows, answered from index items, never a Scan."""

from __future__ import annotations

from typing import Any

import pytest

from duetime.adapters.dynamodb.job_index import index_keys
from duetime.api.service import JobService
from duetime.api.team_admin import hash_token
from duetime.domain.job_history import token_id
from duetime.domain.models import Job

from .api_support import JOB, Call, make_call
from .conftest import Stack


def names(answer: Any) -> list[str]:
    return sorted(job["name"] for job in answer.body["jobs"])


def create(call: Call, name: str, **labels: str) -> dict[str, Any]:
    answer = call("POST", "/v1/jobs", {**JOB, "name": name, "labels": labels})
    assert answer.status == 201, answer.body
    return dict(answer.body)


def test_labels_are_kept_shown_and_replaced_whole_by_a_patch(alpha: Call) -> None:
    job = create(alpha, "billing sync", env="prod", tier="gold")
    assert job["labels"] == {"env": "prod", "tier": "gold"}
    patched = alpha("PATCH", f"/v1/jobs/{job['id']}", {"labels": {"env": "staging"}})
    assert patched.status == 200 and patched.body["labels"] == {"env": "staging"}
    assert alpha("GET", f"/v1/jobs/{job['id']}").body["labels"] == {"env": "staging"}


@pytest.mark.parametrize(
    ("labels", "says"),
    [
        ({"Env": "prod"}, "label key 'Env'"),
        ({"env": "prod!"}, "value 'prod!'"),
        ({"env": "prod\n"}, "value 'prod\\n'"),
        ({"-env": "x"}, "label key '-env'"),
        ({"e" * 64: "x"}, "label key"),
        ({"env": "x" * 64}, "value"),
        ({f"k{i}": "v" for i in range(21)}, "at most 20"),
        ({"env": 7}, "string"),
    ],
)
def test_bad_labels_are_refused_naming_the_field_and_nothing_is_written(
    alpha: Call, labels: dict[str, Any], says: str
) -> None:
    answer = alpha("POST", "/v1/jobs", {**JOB, "labels": labels})
    assert answer.status == 422, answer.body
    assert answer.body["error"]["field"].startswith("labels") and says in answer.body["error"]["message"]
    assert alpha("GET", "/v1/jobs").body["jobs"] == []


def test_a_label_filter_lists_exactly_the_jobs_with_that_pair(alpha: Call) -> None:
    create(alpha, "a", env="prod", tier="gold")
    create(alpha, "b", env="prod")
    create(alpha, "c", env="staging")
    create(alpha, "d")
    assert names(alpha("GET", "/v1/jobs", query={"label": "env:prod"})) == ["a", "b"]
    assert names(alpha("GET", "/v1/jobs", query={"label": "tier:gold"})) == ["a"]
    assert names(alpha("GET", "/v1/jobs", query={"label": "env:dev"})) == []


def test_search_matches_the_start_of_any_word_of_the_name_case_insensitively(alpha: Call) -> None:
    create(alpha, "Nightly billing-report")
    create(alpha, "hourly_Billing sync")
    create(alpha, "cleanup")
    assert names(alpha("GET", "/v1/jobs", query={"q": "bill"})) == [
        "Nightly billing-report",
        "hourly_Billing sync",
    ]
    assert names(alpha("GET", "/v1/jobs", query={"q": "REP"})) == ["Nightly billing-report"]
    assert names(alpha("GET", "/v1/jobs", query={"q": "billing sy"})) == ["hourly_Billing sync"]
    assert names(alpha("GET", "/v1/jobs", query={"q": "illing"})) == []  # the start of a word, not inside


def test_search_and_label_together_both_hold(alpha: Call) -> None:
    create(alpha, "report eu", region="eu")
    create(alpha, "report us", region="us")
    create(alpha, "sync eu", region="eu")
    assert names(alpha("GET", "/v1/jobs", query={"q": "report", "label": "region:eu"})) == ["report eu"]


def test_a_renamed_or_relabelled_job_is_found_by_its_new_name_and_labels_only(alpha: Call) -> None:
    job = create(alpha, "old name", env="prod")
    alpha("PATCH", f"/v1/jobs/{job['id']}", {"name": "fresh title", "labels": {"env": "dev"}})
    assert names(alpha("GET", "/v1/jobs", query={"q": "old"})) == []
    assert names(alpha("GET", "/v1/jobs", query={"q": "fresh"})) == ["fresh title"]
    assert names(alpha("GET", "/v1/jobs", query={"label": "env:prod"})) == []
    assert names(alpha("GET", "/v1/jobs", query={"label": "env:dev"})) == ["fresh title"]


def test_a_deleted_job_leaves_no_index_item_behind(alpha: Call, stack: Stack) -> None:
    job = create(alpha, "short lived", env="prod")
    alpha("PATCH", f"/v1/jobs/{job['id']}", {"name": "short lived still"})
    assert alpha("DELETE", f"/v1/jobs/{job['id']}").status == 204
    assert alpha("GET", "/v1/jobs", query={"q": "short"}).body["jobs"] == []
    stored_name = Job.model_validate(
        {
            **JOB,
            "name": "short lived still",
            "labels": {"env": "prod"},
            "id": job["id"],
            "team": "alpha",
            "created_at": job["created_at"],
            "updated_at": job["updated_at"],
        }
    )
    keys = index_keys(stored_name)
    assert len(keys) == 4  # env=prod, and the words short, lived, still
    for pk, sk in keys:
        item = stack.dynamodb.get_item(TableName=stack.names.control, Key={"pk": {"S": pk}, "sk": {"S": sk}})
        assert "Item" not in item, (pk, sk)


def test_searches_page_through_with_a_cursor_and_refuse_another_listings_cursor(alpha: Call) -> None:
    for i in range(5):
        create(alpha, f"batch {i}", kind="batch")
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        query = {"label": "kind:batch", "limit": "2", **({"cursor": cursor} if cursor else {})}
        page = alpha("GET", "/v1/jobs", query=query).body
        seen += [job["name"] for job in page["jobs"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert sorted(seen) == [f"batch {i}" for i in range(5)]
    first = alpha("GET", "/v1/jobs", query={"label": "kind:batch", "limit": "2"}).body["next_cursor"]
    refused = alpha("GET", "/v1/jobs", query={"q": "batch", "cursor": first})
    assert refused.status == 400 and refused.body["error"]["field"] == "cursor"


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"label": "env"}, "label"),
        ({"label": "Env:prod"}, "label"),
        ({"label": "env:prod\n"}, "label"),
        ({"q": "x" * 65}, "q"),
    ],
)
def test_a_bad_filter_is_422_naming_it(alpha: Call, query: dict[str, str], field: str) -> None:
    answer = alpha("GET", "/v1/jobs", query=query)
    assert answer.status == 422 and answer.body["error"]["field"] == field, answer.body


def test_a_search_without_a_letter_or_digit_matches_no_job(alpha: Call) -> None:
    create(alpha, "a -- b")
    answer = alpha("GET", "/v1/jobs", query={"q": "--"})
    assert answer.status == 200 and answer.body == {"jobs": [], "next_cursor": None}


def test_a_team_never_finds_another_teams_jobs(alpha: Call, beta: Call) -> None:
    create(alpha, "secret payroll", env="prod")
    assert beta("GET", "/v1/jobs", query={"q": "payroll"}).body["jobs"] == []
    assert beta("GET", "/v1/jobs", query={"label": "env:prod"}).body["jobs"] == []


def test_last_run_shows_each_jobs_latest_run_when_asked(alpha: Call) -> None:
    ran = create(alpha, "ran")
    create(alpha, "idle")
    run = alpha("POST", f"/v1/jobs/{ran['id']}/trigger").body
    listed = {j["name"]: j for j in alpha("GET", "/v1/jobs", query={"last_run": "true"}).body["jobs"]}
    assert listed["ran"]["last_run"]["run_id"] == run["run_id"]
    assert listed["ran"]["last_run"]["status"] == "queued"
    assert listed["idle"]["last_run"] is None
    assert all(j["last_run"] is None for j in alpha("GET", "/v1/jobs").body["jobs"])  # not asked: not read


def test_history_names_each_change_its_fields_and_the_tokens_id_never_the_token(service: JobService) -> None:
    _, token = service.create_team("hist")
    call = make_call(token)
    job = create(call, "nightly", env="prod")
    call(
        "PATCH",
        f"/v1/jobs/{job['id']}",
        {"name": "nightly v2", "target": {"url": "https://example.com/h", "headers": {"X-Key": "s3cret"}}},
    )
    call("POST", f"/v1/jobs/{job['id']}/pause")
    call("POST", f"/v1/jobs/{job['id']}/resume")
    answer = call("GET", f"/v1/jobs/{job['id']}/history")
    assert answer.status == 200, answer.body
    changes = answer.body["changes"]
    assert [c["action"] for c in changes] == ["resume", "pause", "update", "create"]  # newest first
    assert {c["token_id"] for c in changes} == {token_id(hash_token(token))}
    update = changes[2]
    assert update["fields"]["name"] == {"from": "nightly", "to": "nightly v2"}
    assert update["fields"]["target"]["to"]["headers"] == {"X-Key": "***"}  # a secret stays out
    assert changes[1]["fields"] == {"paused": {"from": False, "to": True}}
    text = str(answer.body)
    assert token not in text and "s3cret" not in text


def test_history_outlives_a_deletion_for_its_team_only(alpha: Call, beta: Call) -> None:
    job = create(alpha, "gone soon")
    assert alpha("DELETE", f"/v1/jobs/{job['id']}").status == 204
    kept = alpha("GET", f"/v1/jobs/{job['id']}/history").body["changes"]
    assert [c["action"] for c in kept] == ["delete", "create"]
    assert beta("GET", f"/v1/jobs/{job['id']}/history").status == 404
    assert alpha("GET", "/v1/jobs/no-such-job/history").status == 404


def test_a_rejected_change_leaves_no_history(alpha: Call) -> None:
    job = create(alpha, "steady")
    assert alpha("PATCH", f"/v1/jobs/{job['id']}", {"labels": {"Bad": "x"}}).status == 422
    assert [c["action"] for c in alpha("GET", f"/v1/jobs/{job['id']}/history").body["changes"]] == ["create"]


def test_the_team_answer_shows_its_caps_and_what_is_in_use(alpha: Call) -> None:
    create(alpha, "plain")
    exact = alpha("POST", "/v1/jobs", {**JOB, "name": "exact", "exact": True})
    assert exact.status == 201, exact.body
    team = alpha("GET", "/v1/team").body
    assert team == {
        "team_id": "alpha",
        "name": "alpha",
        "max_concurrency": 50,
        "exact_quota": 1,
        "exact_jobs": 1,
        "max_jobs": 10_000,
        "jobs": 2,
        "runs_per_minute": 1_000,
        "aws_role_arn": None,  # none registered; the external id is duetime's (test_aws_target_api)
        "aws_external_id": team["aws_external_id"],
    }
    assert team["aws_external_id"].startswith("dt-")


def test_the_largest_relabel_and_rename_fits_one_transaction_within_awss_limits(alpha: Call) -> None:
    """20 labels and 16 name words swapped for 20 others and 16 others, and the exact flag moved: 36 deletes,
    36 puts, the job, the team count and the history entry, 75 items (AWS allows 100; the tests run with the
    AWS limits enforced on the emulator, DUETIME_STRICT_AWS_LIMITS)."""
    before = {f"a{i}": f"v{i}" for i in range(20)}
    after = {f"b{i}": f"w{i}" for i in range(20)}
    old_name = " ".join(f"old{i}" for i in range(16))
    new_name = " ".join(f"new{i}" for i in range(16))
    job = alpha("POST", "/v1/jobs", {**JOB, "name": old_name, "labels": before}).body
    changed = alpha("PATCH", f"/v1/jobs/{job['id']}", {"name": new_name, "labels": after, "exact": True})
    assert changed.status == 200, changed.body
    assert [
        j["id"] for j in alpha("GET", "/v1/jobs", query={"q": "new15", "label": "b19:w19"}).body["jobs"]
    ] == [job["id"]]
    assert alpha("GET", "/v1/jobs", query={"q": "old3"}).body["jobs"] == []
