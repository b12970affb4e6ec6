"""Deployment settings: each one is read by the code it configures."""

from __future__ import annotations

import re
from pathlib import Path

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
