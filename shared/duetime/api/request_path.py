"""The request's path as the routes read it.

API Gateway's REST API hands the function the path as the client sent it, percent-encoded: a run id
(``<job id>@<time>``) that a client quotes (``duetime``'s client and CLI, the console's
``encodeURIComponent``) arrives as ``...%402026-12-07T16%3A03%3A00Z``, which no run has (HTTP APIs decode the
path; REST APIs, Function URLs and load balancers do not). The routes match and read each segment decoded,
as they are written; an encoded slash (``%2F``) stays encoded, since decoded it would split its segment in
two (no id or key segment holds one)."""

from __future__ import annotations

import re
from urllib.parse import unquote

_ENCODED_SLASH = re.compile("%2f", re.IGNORECASE)


def decoded_path(path: str) -> str:
    """``path`` with each segment percent-decoded, an encoded slash left encoded."""
    return "/".join(unquote(_ENCODED_SLASH.sub("%252F", segment)) for segment in path.split("/"))
