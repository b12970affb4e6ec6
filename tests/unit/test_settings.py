"""Deployment settings: each one is read by the code it configures."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from duetime.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
CODE = [ROOT / "shared" / "duetime", ROOT / "functions"]


def test_every_setting_is_read_by_the_code_it_configures() -> None:
    """A setting nothing reads pretends to configure something (``max_body_bytes`` did: the API's body
    limit was, and is, its own ``MAX_BODY_BYTES``)."""
    sources = "\n".join(
        path.read_text()
        for folder in CODE
        for path in folder.rglob("*.py")
        if path.name != "settings.py" and "bench" not in path.parts
    )
    unread = [name for name in Settings.model_fields if not re.search(rf"\.{name}\b", sources)]
    assert unread == []


def test_the_ports_targets_may_use_besides_the_default_ones_reach_the_caller() -> None:
    from duetime import wiring

    settings = Settings.from_env({"DUETIME_ALLOWED_TARGET_PORTS": "25,20-21"})

    assert settings.allowed_target_ports == [20, 21, 25]
    assert wiring.http_caller(settings).extra_ports == {20, 21, 25}
    assert Settings.from_env({}).allowed_target_ports == []
    assert Settings.from_env({"DUETIME_ALLOWED_TARGET_PORTS": ""}).allowed_target_ports == []
    with pytest.raises(ValidationError, match="allowed_target_ports"):
        Settings.from_env({"DUETIME_ALLOWED_TARGET_PORTS": "70000"})
