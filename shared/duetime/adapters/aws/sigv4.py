"""AWS Signature Version 4 for the lean transport's POST requests (``lean_transport``).

The algorithm of AWS's "Create a signed AWS API request" and of ``botocore.auth.SigV4Auth``, for the one
shape of request the lean transport sends (POST to the endpoint's root path, no query string, a JSON body):
botocore's signer is general (any URL, query, header set) and costs ~150-350 us a request here; this one
keeps the day's signing key and formats the canonical request directly, at a few tens of microseconds.
``tests/unit/test_sigv4.py`` checks that it writes botocore's signature, byte for byte, for the same
request, instant and credentials: the emulators accept any signature, so only that comparison shows it
right (AWS refuses a wrong one with ``InvalidSignatureException``).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, MutableMapping
from typing import Any

# Headers botocore leaves out of the signature (``botocore.auth.SIGNED_HEADERS_BLACKLIST``).
UNSIGNED_HEADERS = frozenset(
    {
        "baggage",
        "connection",
        "expect",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "traceparent",
        "tracestate",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "user-agent",
        "x-amzn-trace-id",
    }
)


class PostSigner:
    """Signs POST requests to ``/`` of one service in one region."""

    def __init__(self, service: str, region: str, clock: Callable[[], float] = time.time) -> None:
        self.service = service
        self.region = region
        self._clock = clock
        self._keys: dict[tuple[str, str], bytes] = {}  # (secret, yyyymmdd) -> signing key

    def _signing_key(self, secret: str, day: str) -> bytes:
        key = self._keys.get((secret, day))
        if key is None:
            key = f"AWS4{secret}".encode()
            for part in (day, self.region, self.service, "aws4_request"):
                key = hmac.new(key, part.encode(), hashlib.sha256).digest()
            self._keys = {(secret, day): key}  # only today's: a new day or new credentials replace it
        return key

    def sign(self, headers: MutableMapping[str, str], body: bytes, credentials: Any) -> None:
        """Add ``X-Amz-Date``, ``X-Amz-Security-Token`` (temporary credentials) and ``Authorization`` to
        ``headers``, which must hold ``Host``; every header but ``UNSIGNED_HEADERS`` is signed.
        ``credentials``: botocore's frozen credentials (``access_key``, ``secret_key``, ``token``)."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(self._clock()))
        headers.pop("Authorization", None)
        headers["X-Amz-Date"] = stamp
        if credentials.token:
            headers["X-Amz-Security-Token"] = credentials.token
        else:
            headers.pop("X-Amz-Security-Token", None)
        signed = sorted(
            (name.lower(), " ".join(str(value).split()))
            for name, value in headers.items()
            if name.lower() not in UNSIGNED_HEADERS
        )
        names = ";".join(name for name, _ in signed)
        canonical = "POST\n/\n\n{}\n\n{}\n{}".format(
            "\n".join(f"{name}:{value}" for name, value in signed), names, hashlib.sha256(body).hexdigest()
        )
        scope = f"{stamp[:8]}/{self.region}/{self.service}/aws4_request"
        to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        key = self._signing_key(credentials.secret_key, stamp[:8])
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["Authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={credentials.access_key}/{scope}, "
            f"SignedHeaders={names}, Signature={signature}"
        )
