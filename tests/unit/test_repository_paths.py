"""Paths the code finds from its own place in the repository: a module moved to another folder must not
leave them pointing nowhere (duetime local loads the handlers from functions/ by path)."""

from __future__ import annotations

from pathlib import Path

from duetime.local.lambda_sandbox import FUNCTIONS
from duetime.local.system import EMULATORS_SCRIPT
from duetime.settings_reference import ROOT
from duetime_bench.versus import REPO_ROOT

REPOSITORY = Path(__file__).resolve().parents[2]


def test_duetime_local_finds_the_handlers_and_the_emulators_script() -> None:
    assert FUNCTIONS == REPOSITORY / "functions"
    assert (FUNCTIONS / "api" / "handler.py").is_file()
    assert EMULATORS_SCRIPT == REPOSITORY / "scripts" / "emulators.sh"
    assert EMULATORS_SCRIPT.is_file()


def test_the_configuration_reference_and_the_peer_bench_find_the_repository_root() -> None:
    assert ROOT == REPOSITORY
    assert REPO_ROOT == REPOSITORY
