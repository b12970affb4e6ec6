"""The build's identity: duetime's version (pyproject.toml's, as ``duetime.__version__``) and the commit it
was built from, the git short sha with ``-dirty`` when tracked files had uncommitted changes.

The commit comes from the file ``COMMIT`` beside this module when there is one (scripts/build_lambda.sh writes
it into the Lambda asset, which has no .git), else from git, asked once, when first wanted (importing this
module runs nothing); without either it is ``unknown``, never an error."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, Protocol

from duetime import __version__

COMMIT_FILE = Path(__file__).with_name("COMMIT")
UNKNOWN = "unknown"
GIT_TIMEOUT_SECONDS = 5

version = __version__


class _Logger(Protocol):
    def info(self, msg: object, *args: Any, **kwargs: Any) -> Any: ...


@functools.cache
def commit() -> str:
    return commit_from_file(COMMIT_FILE) or commit_from_git(Path(__file__).parent) or UNKNOWN


def commit_from_file(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


def commit_from_git(directory: Path) -> str | None:
    """The short sha of the checkout holding ``directory``, ``-dirty`` if tracked files changed; None without
    git or outside a checkout."""
    import subprocess  # here, not at import: the Lambda asset, which has the file, never needs it

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(directory), *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=GIT_TIMEOUT_SECONDS,
            env={
                **os.environ,
                "GIT_OPTIONAL_LOCKS": "0",
            },  # a status that takes no lock beside the lead's git
        ).stdout.strip()

    try:
        sha = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{sha}-dirty" if dirty else sha or None


def describe() -> str:
    """``0.1.0 (commit 1a2b3c4)``: what ``duetime --version`` prints after the program's name."""
    return f"{version} (commit {commit()})"


def log_cold_start(logger: _Logger) -> None:
    """One structured line as a function's module loads: the version and the commit it runs."""
    logger.info("cold start", extra={"version": version, "commit": commit()})
