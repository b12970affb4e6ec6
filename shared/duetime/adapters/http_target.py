"""Calling HTTP targets with urllib3 (already a dependency of botocore).

Each call resolves the target's name once, checks every address with the SSRF guard and connects only
to those addresses, in order, the next one only when a connection could not be made (nothing was sent).
The request still names the original host: the ``Host`` header (unless the job sets its own) and, for
https, the TLS server name (SNI) and the name the certificate must be valid for. A second lookup by
urllib3, which a hostile name with a zero TTL could answer with ``127.0.0.1`` (DNS rebinding), never
happens: urllib3 is only ever given an IP address.

A call ends at its timeout, counted from its start, however slowly the target sends its answer: at the
deadline its connection is shut down and closed, and the call is a timeout (``adapters.call_deadline``:
urllib3's timeouts bound each read, and a target sending a byte a second never lets one time out).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import urllib3
from urllib3.connectionpool import HTTPConnectionPool
from urllib3.util import Url

from duetime.adapters.call_deadline import DEADLINES, watch_pools
from duetime.domain.target_guard import (
    DEFAULT_PORTS,
    Resolver,
    TargetRefused,
    bare_host,
    check_port,
    checked_addresses,
    parse_target_url,
    resolve_host,
)
from duetime.ports import TargetRequest, TargetResponse

BODY_KEPT = 1024


@dataclass(frozen=True)
class _Target:
    """Where a call goes, read once from its URL."""

    scheme: str
    host: str  # lowercased, IDNA-encoded, an IPv6 literal without brackets
    port: int
    path: str  # path and query, as sent in the request line

    @classmethod
    def of(cls, url: Url, extra_ports: Collection[int] = ()) -> _Target:
        """The target of a parsed URL, if its port is one a target may use (else ``PortRefused``)."""
        return cls(url.scheme or "http", bare_host(url), check_port(url, extra_ports), url.request_uri)

    @property
    def name(self) -> str:
        """The name the server is asked for: what TLS sends as SNI and checks the certificate against."""
        return self.host.rstrip(".")

    @property
    def host_header(self) -> str:
        """``Host`` as ``http.client`` writes it: IPv6 in brackets, the port only when not the default."""
        shown = f"[{self.name}]" if ":" in self.name else self.name
        return shown if self.port == DEFAULT_PORTS.get(self.scheme) else f"{shown}:{self.port}"


class HttpTargetCaller:
    """Implements ``duetime.ports.TargetCaller``. No redirects are followed, no retries inside a call.

    Each call checks the URL's port (80, 443, 1024-65535 and ``extra_ports``, the installation's
    ``allowed_target_ports``), resolves the target's host once with ``resolve`` (the system resolver unless
    given), checks every address against the SSRF guard and connects only to a checked address.
    Connections are pooled in ``pool`` by address and port, and for https also by name; one goes back to
    the pool for another call only when its answer was read to the end (``_give_back``) within the call's
    timeout. ``pool``'s connection pools are made by ``call_deadline.watch_pools`` (set on the pool
    given), so that a call's deadline can shut its connection down.
    """

    def __init__(
        self,
        pool: urllib3.PoolManager | None = None,
        allow_private: bool = False,
        resolve: Resolver = resolve_host,
        extra_ports: Collection[int] = (),
    ) -> None:
        self.pool = watch_pools(pool or urllib3.PoolManager(num_pools=32, maxsize=16))
        self.deadlines = DEADLINES  # ends a call at its timeout, however slowly the target answers
        self.allow_private = allow_private
        self.resolve = resolve
        self.extra_ports = frozenset(extra_ports)  # the installation's allowed_target_ports

    def call(self, request: TargetRequest) -> TargetResponse:
        """Make ``request`` within its ``timeout_seconds``, counted from now: the lookup, the connection to
        each address tried, the request, the answer's headers and the part of its body kept, however slowly
        the target sends them (``duetime.adapters.call_deadline``)."""
        started = time.monotonic()
        deadline = started + request.timeout_seconds
        try:
            target = _target_of(request.url, self.extra_ports)
            addresses = checked_addresses(target.host, self.allow_private, self.resolve)
        except TargetRefused as exc:
            return TargetResponse(None, "", str(exc), _ms_since(started), permanent=True)
        timed_out = f"timeout after {request.timeout_seconds:g}s"
        response: urllib3.BaseHTTPResponse | None = None
        error: str | None = None
        body = b""
        guard = self.deadlines.guard(deadline)
        try:
            with guard:
                try:
                    response = self._send(target, addresses, request, deadline)
                    body = response.read(BODY_KEPT, decode_content=True)
                except urllib3.exceptions.TimeoutError:
                    error = timed_out
                except urllib3.exceptions.HTTPError as exc:
                    error = f"connection error: {type(exc).__name__}"
        finally:  # the guard has ended: its deadline can no longer shut the connection down once pooled
            if response is not None:
                _give_back(response, close=guard.expired)
        if guard.expired:  # whatever the reads made of a connection shut down under them
            error = timed_out
        if error is not None or response is None:
            return TargetResponse(None, "", error or timed_out, _ms_since(started))
        return TargetResponse(
            status_code=response.status,
            body=body.decode("utf-8", errors="replace"),
            error=None,
            duration_ms=_ms_since(started),
        )

    def _send(
        self, target: _Target, addresses: list[str], request: TargetRequest, deadline: float
    ) -> urllib3.BaseHTTPResponse:
        """Send ``request`` to the first of ``addresses`` that takes a connection, by ``deadline``."""
        for address in addresses[:-1]:
            try:
                return self._send_to(target, address, request, deadline)
            except urllib3.exceptions.ConnectTimeoutError:  # also NewConnectionError: nothing was sent
                continue
        return self._send_to(target, addresses[-1], request, deadline)

    def _send_to(
        self, target: _Target, address: str, request: TargetRequest, deadline: float
    ) -> urllib3.BaseHTTPResponse:
        left = deadline - time.monotonic()
        if left <= 0:
            raise urllib3.exceptions.ConnectTimeoutError(f"no time left to connect to {address}")
        return self._pool_for(target, address).urlopen(
            request.method,
            target.path,
            body=request.body,
            headers=_with_host(request.headers, target.host_header),
            timeout=urllib3.Timeout(total=left),
            retries=False,
            redirect=False,
            preload_content=False,
        )

    def _pool_for(self, target: _Target, address: str) -> HTTPConnectionPool:
        """The pool of connections to ``address`` (a checked IP), for https verified for the target's name."""
        tls: dict[str, Any] = {}
        if target.scheme == "https":
            tls = {"server_hostname": target.name, "assert_hostname": target.name}
        return self.pool.connection_from_host(address, target.port, target.scheme, pool_kwargs=tls)


@functools.lru_cache(maxsize=4096)  # a pure function of the URL (a refused one raises, and is not kept)
def _target_of(url: str, extra_ports: frozenset[int]) -> _Target:
    """Where a call to ``url`` goes, if its port is one a target may use."""
    return _Target.of(parse_target_url(url), extra_ports)


def _give_back(response: urllib3.BaseHTTPResponse, close: bool = False) -> None:
    """Give ``response``'s connection back to its pool, closed unless the answer was read to its end
    (or when ``close``: the call's deadline shut it down).

    A call keeps only ``BODY_KEPT`` bytes of an answer. When more was left (a longer body, one still
    trickling in, a read that timed out), the rest would be read as the start of the next answer on that
    connection, perhaps another team's call to the same address; so the connection is closed and opened
    afresh when next used. A connection whose answer was read to its end is kept for the next call.
    """
    if close or not response.closed:
        response.close()
    response.release_conn()


def _with_host(headers: dict[str, str], host_header: str) -> dict[str, str]:
    """``headers`` with ``Host`` added, unless the job sets one itself (as urllib3 always allowed)."""
    if any(name.lower() == "host" for name in headers):
        return headers
    return {**headers, "Host": host_header}


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
