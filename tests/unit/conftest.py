"""Unit tests are pure or moto: they must never reach an emulator.

`make test` exports ``AWS_ENDPOINT_URL_*`` for the integration tests, and moto only intercepts requests to
AWS's own addresses: with those variables set, a "moto" client would quietly talk to DynamoDB Local.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from duetime import api, wiring
from duetime.adapters import clients


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
