"""Secrets in URLs, and the origin a target's stored secrets belong to.

A URL may carry credentials of its own: a userinfo (``https://user:pass@host/``, or a token as the user name,
``https://<token>@host/``) and query parameters such as ``?token=``, ``?api_key=`` or a signed URL's
``X-Amz-Signature``. duetime stores and calls a URL as it was given; wherever it shows one to people (API
answers of jobs, a job's history, and through them the CLI and the console) it shows ``redact_url``'s text,
each secret replaced by ``REDACTED``. No log line carries a target's or a webhook's URL.

Which parts are secrets (``secret_spans``):

- the userinfo's password; a userinfo without one (``<token>@``, ``<key>:@``) is a token as a user name, and
  the user name is the secret;
- the value of each query parameter, and each ``name=value`` pair of the fragment (``#access_token=...``),
  whose name looks like a secret's (``secret_name``): token, key, secret, password, signature, sig, auth,
  credential(s), session and their compounds (``access_token``, ``api_key``, ``apiKey``,
  ``X-Amz-Credential``), case-insensitively.

A secret in the path (a Slack webhook's ``/services/T.../B.../<secret>``) cannot be told from a path; it is
shown. A URL is read as urllib3 reads it, the reading of the call (``target_guard.parse_target_url``): the
authority runs from ``//`` to the first ``/``, ``\\``, ``?`` or ``#``, and its userinfo is what precedes its
last ``@``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import unquote, unquote_plus

from duetime.domain.target_guard import TargetRefused, bare_host, parse_target_url

REDACTED = "***"  # what answers show for a secret: a header's value, a URL's password or token

DEFAULT_PORTS = {"http": 80, "https": 443}
# urllib3's _URI_RE (urllib3.util.url), with named groups: scheme, authority, path, query, fragment
_URI = re.compile(
    r"^(?:(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*):)?(?://(?P<authority>[^\\/?#]*))?(?P<path>[^?#]*)"
    r"(?:\?(?P<query>[^#]*))?(?:#(?P<fragment>.*))?\Z",
    re.DOTALL,
)
_PAIR = re.compile(r"[^&]+")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")
# a word of a parameter's name that is a secret's name by itself ...
SECRET_WORDS = frozenset({"auth", "key", "pass", "pw", "pwd", "sig", "jwt", "session", "sessionid"})
# ... and a part of its name, words joined, that makes it one (api_key, accessToken, X-Amz-Signature)
SECRET_PARTS = (
    "token",
    "secret",
    "passw",
    "signature",
    "credential",
    "apikey",
    "accesskey",
    "privatekey",
    "authkey",
    "authorization",
    "sessionkey",
)


def secret_name(name: str) -> bool:
    """Whether a query parameter named ``name`` (percent-encoded as sent) holds a secret: one of its words
    (split at punctuation and camelCase) is in ``SECRET_WORDS``, or its words joined hold one of
    ``SECRET_PARTS``. ``key`` and ``apiKey`` are secrets; ``keyword``, ``monkey`` and ``author`` are not."""
    words = [w for w in _NOT_ALNUM.split(_CAMEL.sub(r"\1 \2", unquote_plus(name)).lower()) if w]
    joined = "".join(words)
    return any(word in SECRET_WORDS for word in words) or any(part in joined for part in SECRET_PARTS)


def secret_spans(url: str) -> Iterator[tuple[int, int]]:
    """Where ``url``'s secrets are: ``(start, end)`` of each, in order (see the module's rules). Empty
    values are none."""
    match = _URI.match(url)
    assert match is not None  # every group is optional: any text matches
    start, end = match.span("authority")
    if start >= 0 and "@" in url[start:end]:
        userinfo_end = url.rindex("@", start, end)
        colon = url.find(":", start, userinfo_end)
        if colon >= 0 and colon + 1 < userinfo_end:
            yield colon + 1, userinfo_end  # the password
        elif start < (colon if colon >= 0 else userinfo_end):
            yield start, colon if colon >= 0 else userinfo_end  # a lone user name: a token
    for part in ("query", "fragment"):
        start, end = match.span(part)
        if start < 0:
            continue
        for pair in _PAIR.finditer(url, start, end):
            name, equals, value = pair.group().partition("=")
            if equals and value and secret_name(name):
                yield pair.end() - len(value), pair.end()


def redact_url(url: str) -> str:
    """``url`` as people are shown it: each secret (``secret_spans``) replaced by ``REDACTED``, the rest
    exactly as stored (so a client that sends the shown text back can be recognised: ``HttpTarget``)."""
    shown, last = [], 0
    for start, end in secret_spans(url):
        shown += [url[last:start], REDACTED]
        last = end
    return "".join([*shown, url[last:]])


def holds_marker(url: str) -> bool:
    """Whether a secret of ``url`` is ``REDACTED`` (percent-encoded or not): a shown URL sent back edited,
    whose secrets duetime could not tell."""
    return any(unquote(url[start:end]) == REDACTED for start, end in secret_spans(url))


def url_origin(url: str) -> tuple[str, str, int] | None:
    """Where a call to ``url`` goes, compared to tell whether stored secrets may follow a new URL: scheme and
    host lowercased as urllib3 reads them (the host IDNA-encoded, an IPv6 literal without brackets), the
    port made explicit (80 for http, 443 for https). None when urllib3 cannot read the URL."""
    try:
        parsed = parse_target_url(url)
    except TargetRefused:
        return None
    scheme = parsed.scheme or "http"
    return scheme, bare_host(parsed), parsed.port or DEFAULT_PORTS.get(scheme, 80)


def shown_origin(origin: tuple[str, str, int] | None) -> str:
    """An origin as an error message names it: ``https://example.com:443``."""
    if origin is None:
        return "an unreadable URL"
    scheme, host, port = origin
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"
