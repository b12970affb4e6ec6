"""The web console's static files (``duetime/api/console/``), served by the api function at ``/console/`` with
a strict Content-Security-Policy: the page may load only its own scripts and styles and talk only to its
own origin, so a stored job name or response excerpt can never run as script, and no third party ever sees
a team's token."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

INDEX = "index.html"
CONTENT_TYPES = {
    "html": "text/html; charset=utf-8",
    "js": "text/javascript; charset=utf-8",
    "css": "text/css; charset=utf-8",
    "svg": "image/svg+xml",
}
# One flat directory of plain names: nothing a path can climb out of.
_FILE_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*\.(html|js|css|svg)$")

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    ]
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",  # revalidate: a new release's files are seen at once
}


@dataclass(frozen=True)
class ConsoleFile:
    name: str
    content_type: str
    body: str


@cache
def console_file(name: str) -> ConsoleFile | None:
    """The shipped file ``name`` (``""`` is the index page), or None when there is no such file."""
    name = name or INDEX
    match = _FILE_NAME.match(name)
    if match is None:
        return None
    resource = resources.files(__name__.rpartition(".")[0]).joinpath("console", name)  # beside this module
    if not resource.is_file():
        return None
    return ConsoleFile(name, CONTENT_TYPES[match.group(1)], resource.read_text(encoding="utf-8"))
