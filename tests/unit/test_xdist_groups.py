"""`--dist loadgroup` keeps an xdist_group's tests on one worker, as the integration tier needs: a module
fixture (the deployed stack) set up once, tests that share a fixed port or DynamoDB Local's cores run in turn.
pytest 9.2 silently broke it (pytest-dev/pytest-xdist#1386): the tests ran spread over the workers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

GROUPED = """
import pytest

pytestmark = pytest.mark.xdist_group("shared-fixture")

@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    pass
"""
LOOSE = """
import pytest

@pytest.mark.parametrize("i", range(6))
def test_loose(i):
    pass
"""
PASSED = re.compile(r"^\[(gw\d+)\].* PASSED (\S+)", re.MULTILINE)


def test_an_xdist_groups_tests_all_run_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "test_loose.py").write_text(LOOSE)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, nodeid in PASSED.findall(out.stdout):
        workers["grouped" if "test_grouped" in nodeid else "loose"].add(worker)
        if "test_grouped" in nodeid:
            assert nodeid.endswith("@shared-fixture"), nodeid  # the group xdist schedules by
    assert len(PASSED.findall(out.stdout)) == 12, out.stdout[-3000:]
    assert len(workers["grouped"]) == 1, f"the group's tests ran on {sorted(workers['grouped'])}"
