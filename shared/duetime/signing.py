"""Target signatures: ``X-Duetime-Signature: t=<unix seconds>,v1=<hex>,key=<secret id>[,v1=<hex>,key=<id>]``.

Each ``v1`` is the hex HMAC-SHA256 of ``"<t>.<body>"`` under one of the team's signing secrets, and the
``key`` after it names that secret (``s1``, ``s2``, ...). The first pair is the team's current secret. While a
rotated-out secret is still in its overlap window (``duetime teams rotate-signing-secret``), a second pair
signs with it, so a target that still holds only the old secret keeps verifying, and one that holds the new
secret verifies the first pair. Targets verify with ``verify_signature`` (or its few lines in any language):
accept when any ``v1`` matches a secret they hold, and refuse stale timestamps to stop replays.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime

from duetime.models import Team


@dataclass(frozen=True)
class SigningKey:
    key_id: str
    secret: str


def signing_keys(team: Team, now: datetime) -> list[SigningKey]:
    """The secrets a call made at ``now`` is signed with: the current one, then the previous one while its
    overlap window lasts. Empty when the team has no secret."""
    keys = []
    if team.signing_secret:
        keys.append(SigningKey(team.signing_secret_id, team.signing_secret))
    until = team.previous_signing_secret_until
    if team.previous_signing_secret and team.previous_signing_secret_id and until is not None and now < until:
        keys.append(SigningKey(team.previous_signing_secret_id, team.previous_signing_secret))
    return keys


def _digest(secret: str, unix_seconds: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{unix_seconds}.".encode() + body, hashlib.sha256).hexdigest()


def signature_header(secret: str | list[SigningKey], unix_seconds: int, body: bytes) -> str:
    """The header's value: one ``v1``(+``key``) per signing key, in order. A bare secret signs without a
    key name (the format before secrets could be rotated)."""
    if isinstance(secret, str):
        return f"t={unix_seconds},v1={_digest(secret, unix_seconds, body)}"
    pairs = [f"v1={_digest(k.secret, unix_seconds, body)},key={k.key_id}" for k in secret]
    return ",".join([f"t={unix_seconds}", *pairs])


def _signatures(header: str) -> tuple[int, list[tuple[str, str | None]]]:
    """(timestamp, [(v1 hex, key id or None)]) of a header; raises ValueError when it is malformed."""
    stamp: int | None = None
    found: list[tuple[str, str | None]] = []
    for part in header.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep:
            raise ValueError(part)
        if name == "t":
            stamp = int(value)
        elif name == "v1":
            found.append((value, None))
        elif name == "key" and found and found[-1][1] is None:
            found[-1] = (found[-1][0], value)
    if stamp is None or not found:
        raise ValueError(header)
    return stamp, found


def verify_signature(
    secret: str,
    header: str,
    body: bytes,
    now_unix: int,
    tolerance_seconds: int = 300,
    key_id: str | None = None,
) -> bool:
    """True when one of the header's signatures signs ``body`` with ``secret`` (the one named ``key_id``,
    if given) and its timestamp is within the tolerance."""
    try:
        stamp, signatures = _signatures(header)
    except ValueError:
        return False
    if abs(now_unix - stamp) > tolerance_seconds:
        return False
    expected = _digest(secret, stamp, body)
    return any(
        hmac.compare_digest(expected, given) for given, key in signatures if key_id is None or key == key_id
    )
