import os
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest

from duetime.adapters.aws.aws_limits import STRICT_ENV, enforce_aws_limits

# Handlers live outside the package (as Lambda deploys them); make them importable for tests.
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "duetime-tests")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")

# The whole suite runs under AWS's limits, which the emulators (and moto) don't all enforce: every boto3
# client built in this process refuses what AWS would refuse, and so do the clients of the processes the
# tests start (they inherit the variable; duetime.adapters.aws.clients honours it).
os.environ[STRICT_ENV] = "1"
_build_client = boto3.session.Session.client


def _strict_client(self: boto3.session.Session, *args: Any, **kwargs: Any) -> Any:
    return enforce_aws_limits(_build_client(self, *args, **kwargs))


boto3.session.Session.client = _strict_client  # type: ignore[method-assign]


# Tiers (pyproject's markers): what needs the emulators is marked ``integration`` by where it lives, so
# ``pytest -m "not integration"`` runs everything else (unit, infra, the contract suites' twin halves) alone.
# The contract suites mark their emulator parameters themselves (tests/contract/conftest.py).
NEEDS_EMULATORS = {"integration": ("integration",), "browser": ("integration", "browser")}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests = Path(__file__).resolve().parent
    for item in items:
        folder = Path(str(item.path)).resolve().relative_to(tests).parts[0]
        for marker in NEEDS_EMULATORS.get(folder, ()):
            item.add_marker(getattr(pytest.mark, marker))


@pytest.fixture(autouse=True)
def _environment_as_it_was() -> Any:
    """Each test leaves ``os.environ`` as it found it. Code under test may set variables for its process
    (``duetime.local.system.local_environment``, which the CLI's ``--local`` commands call, turns the
    handlers' metrics off): in a test process those would otherwise reach whichever test runs next on the
    same worker, and make its outcome depend on the order of the suite."""
    before = dict(os.environ)
    yield
    if os.environ != before:
        os.environ.clear()
        os.environ.update(before)
