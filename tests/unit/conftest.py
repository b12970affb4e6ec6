"""Unit tests are pure or moto: they must never reach an emulator.

`make test` exports ``AWS_ENDPOINT_URL_*`` for the integration tests, and moto only intercepts requests to
AWS's own addresses: with those variables set, a "moto" client would quietly talk to DynamoDB Local.
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def no_emulator_endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("AWS_ENDPOINT_URL")]:
        monkeypatch.delenv(name)
