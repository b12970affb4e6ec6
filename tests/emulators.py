"""Where the emulators answer (``make test`` starts both: scripts/emulators.sh), and the check that they do.

Only tests that need them ask: the integration suite for all of its tests (``tests/integration/conftest.py``),
the contract suites for their emulator halves only (``tests/contract/conftest.py``), so the twin's halves
run without emulators (``pytest -m "not integration"``).
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit

import pytest

DDB_URL = "http://127.0.0.1:8000"
SQS_URL = "http://127.0.0.1:4566"


def reachable(url: str) -> bool:
    parts = urlsplit(url)
    try:
        socket.create_connection((parts.hostname, parts.port or 80), timeout=2).close()
        return True
    except OSError:
        return False


def require_emulators() -> tuple[str, str]:
    """The DynamoDB and SQS endpoints (``AWS_ENDPOINT_URL_*``, which this sets when unset, as ``make test``
    does), or the test fails saying how to start them."""
    urls = (
        os.environ.setdefault("AWS_ENDPOINT_URL_DYNAMODB", DDB_URL),
        os.environ.setdefault("AWS_ENDPOINT_URL_SQS", SQS_URL),
    )
    missing = [u for u in urls if not reachable(u)]
    if missing:
        pytest.fail(f"emulators not answering on {missing}: run the tests with `make test`", pytrace=False)
    return urls
