"""Contract suites: one set of tests per port, run against the in-memory twin and the emulator alike (as
APScheduler 4 runs one suite against every data store). Only the emulator parameters are marked
``integration`` and ask for the emulators, so ``pytest -m "not integration"`` runs the twin's halves alone."""

from __future__ import annotations

import pytest

from ..emulators import require_emulators

TWIN = "memory"


def against(emulator: str) -> list[object]:
    """A contract's parameters: the twin, and ``emulator`` marked ``integration``."""
    return [TWIN, pytest.param(emulator, marks=pytest.mark.integration)]


@pytest.fixture
def emulators() -> tuple[str, str]:
    return require_emulators()
