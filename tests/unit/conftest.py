"""Unit tests are pure or moto: they must never reach an emulator.

`make test` exports ``AWS_ENDPOINT_URL_*`` for the integration tests, and moto only intercepts requests to
AWS's own addresses: with those variables set, a "moto" client would quietly talk to DynamoDB Local.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from duetime import api, wiring
from duetime.adapters.aws import clients
from duetime.capacity import calibration

# The CPU figures the midnight model and `duetime plan` charge, pinned for unit tests (the ones
# bench/calibration.json held when these tests' figures were worked out), so re-measuring with
# `duetime bench runcpu --save-calibration` moves the benches' figures and not the tests'.
PINNED_CALIBRATION = calibration.Calibration(
    poller_read_cpu_us_per_row=261.6,
    poller_claim_cpu_us_per_run=751.8,
    worker_cpu_ms_per_run=1.819,
    commit="a9e1820",
    measured_at="2026-12-03T06:37:15Z",
    machine="pinned for unit tests",
    runs=[{}],
    source="pinned: tests/unit/conftest.py",
)
calibration.saved = lambda: PINNED_CALIBRATION  # type: ignore[method-assign]  # before test modules import


@pytest.fixture(autouse=True)
def no_emulator_endpoints(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No ``AWS_ENDPOINT_URL_*`` during a unit test; and no client made without them kept afterwards: a
    shared client (``clients.client``) or a handler's wiring cached here would send a later integration
    test's requests to AWS itself (``test_team_admin``'s CLI did, after ``test_api_handler``)."""
    for name in [n for n in os.environ if n.startswith("AWS_ENDPOINT_URL")]:
        monkeypatch.delenv(name)
    yield
    wiring.forget()  # its caches, and its clocks' probe threads
    wiring.clear_caches(clients)
    wiring.clear_caches(api)
