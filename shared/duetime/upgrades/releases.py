"""Releases by name: ``v0.1.0`` or ``0.1.0`` is the commit ``releases.json`` (at the repository's root) names,
which its git tag names too; any other ref is left to git. A clone made without tags still finds every
release (the upgrade drill, the version-skew tests)."""

from __future__ import annotations

import json
import re
from pathlib import Path

RELEASES_FILE = "releases.json"
_VERSION = re.compile(r"^v?(\d+\.\d+\.\d+)$")


def release_commits(root: Path) -> dict[str, str]:
    """Every release ``root/releases.json`` lists: version -> full commit sha."""
    data = json.loads((root / RELEASES_FILE).read_text(encoding="utf-8"))
    return dict(data["releases"])


def resolve_ref(ref: str, root: Path) -> str:
    """The commit of release ``ref`` (``v0.1.0``, ``0.1.0``) if ``releases.json`` lists it, else ``ref``."""
    match = _VERSION.match(ref)
    if match is None:
        return ref
    return release_commits(root).get(match.group(1), ref)
