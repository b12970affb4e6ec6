"""The build's identity (``duetime.build_info``, issue 49 item 3): the version and the commit, from the
file the Lambda asset carries, else from git, else ``unknown``; shown by ``GET /healthz`` and
``duetime --version``, and logged once by every function as its module loads."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import duetime
from duetime import build_info
from duetime.cli import main

from ..lambda_support import LambdaContext, load_handler

ROOT = Path(__file__).resolve().parents[2]
COMMIT = re.compile(r"[0-9a-f]{7,40}(-dirty)?")
FUNCTIONS = {  # module of functions/ -> its logger's service
    ("api", "handler"): "api",
    ("authorizer", "handler"): "authorizer",
    ("deploy_gate", "handler"): "deploy-gate",
    ("poller", "handler"): "poller",
    ("poller", "helper"): "poller-helper",
    ("prescaler", "handler"): "prescaler",
    ("reconciler", "handler"): "reconciler",
    ("worker", "handler"): "worker",
}


@pytest.fixture(autouse=True)
def fresh_commit() -> Iterator[None]:
    commit = build_info.commit  # the cached function, whatever a test puts in its place
    commit.cache_clear()
    yield
    commit.cache_clear()


def git(directory: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(directory), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True,
        capture_output=True,
    )


def test_the_version_is_pyprojects() -> None:
    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert build_info.version == duetime.__version__ == pyproject["project"]["version"]


def test_the_build_file_wins_over_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "COMMIT").write_text("abc1234\n", encoding="utf-8")
    monkeypatch.setattr(build_info, "COMMIT_FILE", tmp_path / "COMMIT")
    assert build_info.commit() == "abc1234"
    assert build_info.describe() == f"{duetime.__version__} (commit abc1234)"


def test_in_a_checkout_without_the_file_git_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build_info, "COMMIT_FILE", tmp_path / "absent")
    assert COMMIT.fullmatch(build_info.commit())


def test_uncommitted_changes_to_tracked_files_are_dirty(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n", encoding="utf-8")
    git(tmp_path, "add", "a.py")
    git(tmp_path, "commit", "-q", "-m", "one")
    clean = build_info.commit_from_git(tmp_path)
    assert clean and re.fullmatch(r"[0-9a-f]{7,40}", clean)
    (tmp_path / "untracked.txt").write_text("not ours\n", encoding="utf-8")
    assert build_info.commit_from_git(tmp_path) == clean
    (tmp_path / "a.py").write_text("x = 2\n", encoding="utf-8")
    assert build_info.commit_from_git(tmp_path) == f"{clean}-dirty"


@pytest.mark.parametrize("why", ["no git on PATH", "not a checkout"])
def test_without_git_and_without_the_file_the_commit_is_unknown(
    why: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(build_info, "COMMIT_FILE", tmp_path / "absent")
    if why == "no git on PATH":
        monkeypatch.setenv("PATH", str(tmp_path))
    else:  # git runs, in a directory outside any checkout
        monkeypatch.setattr(build_info, "__file__", str(tmp_path / "build_info.py"))
        monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
        assert build_info.commit_from_git(tmp_path) is None
    assert build_info.commit() == "unknown"
    assert build_info.describe() == f"{duetime.__version__} (commit unknown)"


def test_an_empty_or_unreadable_build_file_falls_back(tmp_path: Path) -> None:
    (tmp_path / "empty").write_text("\n", encoding="utf-8")
    (tmp_path / "binary").write_bytes(b"\xff\xfe")
    assert build_info.commit_from_file(tmp_path / "empty") is None
    assert build_info.commit_from_file(tmp_path / "binary") is None
    assert build_info.commit_from_file(tmp_path) is None  # a directory


def test_importing_the_module_runs_no_git() -> None:
    probe = (
        "import subprocess, sys\n"
        "def refuse(*a, **k): raise AssertionError('a process at import')\n"
        "subprocess.run = subprocess.Popen = refuse\n"
        "import duetime.build_info\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, cwd=ROOT)


def test_healthz_gives_the_version_and_the_commit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "COMMIT").write_text("feed123-dirty\n", encoding="utf-8")
    monkeypatch.setattr(build_info, "COMMIT_FILE", tmp_path / "COMMIT")
    event = {
        "resource": "/healthz",
        "path": "/healthz",
        "httpMethod": "GET",
        "headers": {},
        "requestContext": {"requestId": "r", "stage": "v1"},
        "queryStringParameters": None,
        "body": None,
        "isBase64Encoded": False,
    }
    response = load_handler("api").handler(event, LambdaContext())
    assert response["statusCode"] == 200
    assert json.loads(response["body"]) == {
        "status": "ok",
        "version": duetime.__version__,
        "commit": "feed123-dirty",
    }


def test_duetime_version_prints_the_version_and_the_commit(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "COMMIT").write_text("1a2b3c4\n", encoding="utf-8")
    monkeypatch.setattr(build_info, "COMMIT_FILE", tmp_path / "COMMIT")
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"duetime {duetime.__version__} (commit 1a2b3c4)\n"


def test_only_duetime_version_asks_for_the_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse() -> str:
        raise AssertionError("the commit was asked for")

    monkeypatch.setattr(build_info, "commit", refuse)
    with pytest.raises(SystemExit):
        main(["--help"])


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.mark.parametrize(("function", "service"), FUNCTIONS.items(), ids=["/".join(f) for f in FUNCTIONS])
def test_every_function_logs_its_version_and_commit_as_it_loads(
    function: tuple[str, str], service: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "COMMIT").write_text("c01d512\n", encoding="utf-8")
    monkeypatch.setattr(build_info, "COMMIT_FILE", tmp_path / "COMMIT")
    logger = logging.getLogger(f"duetime-{service}")
    records = Records()
    logger.addHandler(records)
    try:
        load_handler(*function)
    finally:
        logger.removeHandler(records)
    cold = [r for r in records.records if r.getMessage() == "cold start"]
    assert len(cold) == 1
    assert (cold[0].__dict__["version"], cold[0].__dict__["commit"]) == (duetime.__version__, "c01d512")


def test_every_module_of_functions_is_covered() -> None:
    modules = {(p.parent.name, p.stem) for p in (ROOT / "functions").glob("*/*.py") if p.stem != "__init__"}
    assert modules == set(FUNCTIONS)
