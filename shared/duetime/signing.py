"""Target signatures: ``X-Duetime-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">``.

The key is the team's signing secret. Targets verify with ``verify_signature`` (or its few lines in any
language) and should refuse stale timestamps to stop replays.
"""

from __future__ import annotations

import hashlib
import hmac


def signature_header(secret: str, unix_seconds: int, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{unix_seconds}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={unix_seconds},v1={digest}"


def verify_signature(
    secret: str, header: str, body: bytes, now_unix: int, tolerance_seconds: int = 300
) -> bool:
    """True when ``header`` signs ``body`` with ``secret`` and its timestamp is within the tolerance."""
    try:
        parts = dict(part.split("=", 1) for part in header.split(","))
        stamp = int(parts["t"])
        given = parts["v1"]
    except (KeyError, ValueError):
        return False
    if abs(now_unix - stamp) > tolerance_seconds:
        return False
    expected = signature_header(secret, stamp, body).split("v1=", 1)[1]
    return hmac.compare_digest(expected, given)
