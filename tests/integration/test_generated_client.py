"""A client generated from docs/openapi.json with an off-the-shelf generator (openapi-python-client from PyPI)
drives ``duetime local``: create a job, list jobs, trigger it, list its runs and see the run succeed. What a
team writing a client in another language gets from the document: typed models and readable operations."""

from __future__ import annotations

import importlib
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from .local_system import LocalSystem, isolated, start_local

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = Path(sys.executable).with_name("openapi-python-client")


@pytest.fixture(scope="module")
def client_package(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The generated package's import name, generated fresh from docs/openapi.json."""
    folder = tmp_path_factory.mktemp("generated")
    config = folder / "config.yaml"
    config.write_text("post_hooks: []\n")  # no formatter runs: the code is used as generated
    subprocess.run(
        [
            str(GENERATOR),
            "generate",
            "--path",
            str(ROOT / "docs" / "openapi.json"),
            "--meta",
            "none",
            "--output-path",
            str(folder / "duetime_generated"),
            "--config",
            str(config),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    sys.path.insert(0, str(folder))
    yield "duetime_generated"
    sys.path.remove(str(folder))


@pytest.fixture(scope="module")
def local() -> Iterator[LocalSystem]:
    system = start_local(isolated(f"gen{uuid.uuid4().hex[:8]}"))
    try:
        yield system
    finally:
        system.stop()


def module(package: str, name: str) -> ModuleType:
    return importlib.import_module(f"{package}.{name}")


def test_a_generated_client_creates_lists_triggers_and_reads_runs(
    client_package: str, local: LocalSystem
) -> None:
    client_module = module(client_package, "client")
    models = module(client_package, "models")
    create_job = module(client_package, "api.jobs.create_job")
    list_jobs = module(client_package, "api.jobs.list_jobs")
    trigger_job = module(client_package, "api.runs.trigger_job")
    list_job_runs = module(client_package, "api.runs.list_job_runs")
    get_run = module(client_package, "api.runs.get_run")
    client: Any = client_module.AuthenticatedClient(base_url=local.url, token=local.token)

    spec = models.JobSpec.from_dict(
        {
            "name": "generated client's job",
            "schedule": {"cron": "0 9 * * 1-5", "timezone": "Europe/Paris"},
            "target": {"url": f"{local.url}/demo/target"},
        }
    )
    job = create_job.sync(client=client, body=spec)
    assert isinstance(job, models.JobOut), job
    assert job.name == "generated client's job" and job.next_nominal_at is not None

    listed = list_jobs.sync(client=client)
    assert isinstance(listed, models.JobList)
    assert job.id in [item.id for item in listed.jobs]

    # The trigger's body is optional; this generator sends its "unset" marker as JSON unless told None.
    run = trigger_job.sync(job.id, client=client, body=None)
    assert isinstance(run, models.RunOut), run
    runs = list_job_runs.sync(job.id, client=client)
    assert isinstance(runs, models.RunList) and run.run_id in [r.run_id for r in runs.runs]

    deadline = time.monotonic() + 60
    while (current := get_run.sync(run.run_id, client=client)).status != models.RunStatus.SUCCEEDED:
        assert time.monotonic() < deadline, current
        time.sleep(0.5)

    missing = module(client_package, "api.jobs.get_job").sync("no-such-job", client=client)
    assert isinstance(missing, models.ErrorOut) and missing.error.code == "not_found"
