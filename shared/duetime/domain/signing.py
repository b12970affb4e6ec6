"""Target signatures, in two formats while receivers migrate.

**Standard Webhooks** (standardwebhooks.com), per job: ``webhook-id`` (the run id; a notification's id),
``webhook-timestamp`` (unix seconds) and ``webhook-signature: v1,<base64 HMAC-SHA256 of "<id>.<t>.<body>">``,
one ``v1,...`` per signing key, space separated. The key is the **job's**: ``job_key`` derives it from a team
secret and the job id, so a call received by one job's target does not verify at another job's target, even
of the same team, and its id and body are bound to it. Receivers hold it as ``whsec_<base64 key>``
(``JobSigningKey.secret``, ``GET /v1/jobs/{id}/signing-key``) and verify with any Standard Webhooks library.
While a rotated-out team secret is in its overlap window (``duetime teams rotate-signing-secret``), the job's
key derived from it signs too, second.

**The old format, until ``LEGACY_SIGNATURE_UNTIL``:**
``X-Duetime-Signature: t=<unix seconds>,v1=<hex>,key=<secret id>[,v1=<hex>,key=<id>]``. Each ``v1`` is the hex
HMAC-SHA256 of ``"<t>.<body>"`` under one of the team's signing secrets, and the ``key`` after it names that
secret (``s1``, ``s2``, ...), the current one first, then the rotated-out one during its overlap. It binds
neither the call nor the job: any target of the team can replay it to another within the tolerance. Targets
verify it with ``verify_signature`` (or its few lines in any language) until they switch.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from datetime import UTC, datetime

from duetime.domain.models import Team

# The old ``X-Duetime-Signature`` is sent beside the Standard Webhooks headers until this instant (90 days
# after the release that added them, 2026-12-04), then no more: receivers switch before it
# (docs/guide/targets.md).
LEGACY_SIGNATURE_UNTIL = datetime(2027, 3, 4, tzinfo=UTC)
LEGACY_SIGNATURE_HEADER = "X-Duetime-Signature"
WEBHOOK_ID = "webhook-id"
WEBHOOK_TIMESTAMP = "webhook-timestamp"
WEBHOOK_SIGNATURE = "webhook-signature"
SECRET_PREFIX = "whsec_"  # how Standard Webhooks libraries take a secret: whsec_<base64 key>
_JOB_KEY_CONTEXT = b"duetime-job-key:"


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


@dataclass(frozen=True)
class JobSigningKey:
    """A job's signing key as its receivers hold it: ``secret`` is ``whsec_<base64 key>``; ``key_id`` names
    the team secret it is derived from; ``until`` is when it stops signing (a rotated-out secret's overlap
    end), None for the current key."""

    key_id: str
    secret: str
    until: datetime | None = None


def job_key(team_secret: str, job_id: str) -> bytes:
    """The job's 32-byte signing key: HMAC-SHA256 under the team secret of ``duetime-job-key:<job id>``.
    It tells nothing of the team secret or of another job's key."""
    return hmac.new(team_secret.encode(), _JOB_KEY_CONTEXT + job_id.encode(), hashlib.sha256).digest()


def job_signing_keys(team: Team, job_id: str, now: datetime) -> list[JobSigningKey]:
    """The job's keys that sign a call made at ``now``, in ``signing_keys``' order (the current one, then
    the rotated-out one while its overlap lasts). Empty when the team has no secret."""
    keys = []
    for key in signing_keys(team, now):
        until = None if key.key_id == team.signing_secret_id else team.previous_signing_secret_until
        secret = SECRET_PREFIX + base64.b64encode(job_key(key.secret, job_id)).decode()
        keys.append(JobSigningKey(key.key_id, secret, until))
    return keys


def webhook_signature(key: bytes, message_id: str, unix_seconds: int, body: bytes) -> str:
    """One Standard Webhooks signature: ``v1,`` and the base64 HMAC-SHA256 of ``"<id>.<t>.<body>"``."""
    signed = f"{message_id}.{unix_seconds}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def signed_headers(team: Team, job_id: str, message_id: str, now: datetime, body: bytes) -> dict[str, str]:
    """The signature headers of a call about job ``job_id`` made at ``now``: ``webhook-id`` (``message_id``:
    the run id, or a notification's id), ``webhook-timestamp`` and ``webhook-signature`` signed with each of
    the job's keys, and ``X-Duetime-Signature`` as before while ``now`` is before ``LEGACY_SIGNATURE_UNTIL``.
    Empty when the team has no secret (nothing to sign with)."""
    keys = signing_keys(team, now)
    if not keys:
        return {}
    stamp = int(now.timestamp())
    signatures = [webhook_signature(job_key(k.secret, job_id), message_id, stamp, body) for k in keys]
    headers = {WEBHOOK_ID: message_id, WEBHOOK_TIMESTAMP: str(stamp), WEBHOOK_SIGNATURE: " ".join(signatures)}
    if now < LEGACY_SIGNATURE_UNTIL:
        headers[LEGACY_SIGNATURE_HEADER] = signature_header(keys, stamp, body)
    return headers


def with_signed_headers(headers: dict[str, str], signed: dict[str, str]) -> dict[str, str]:
    """``headers`` with ``signed`` set over them: a header of the same name in any case is replaced, so a
    target's own ``webhook-*`` header cannot stand beside duetime's."""
    names = {name.lower() for name in signed}
    return {**{k: v for k, v in headers.items() if k.lower() not in names}, **signed}


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
