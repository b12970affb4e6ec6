"""Server-side request forgery guard for HTTP targets.

A job's URL is checked when the job is written and again just before each call, after DNS resolution:
every address the host resolves to must be a public one. Loopback, private, link-local (including the
instance metadata address 169.254.169.254), shared, reserved and multicast addresses are refused, in
every spelling the resolver accepts (``127.1``, ``2130706433``, ``0x7f000001``, ``[::ffff:127.0.0.1]``,
or a DNS name pointing at them). ``allow_private`` (on only in ``duetime local``) permits loopback and
private addresses, never the metadata range.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from urllib.parse import urlsplit

Resolver = Callable[[str], list[str]]
METADATA = ipaddress.ip_network("169.254.0.0/16")


class TargetRefused(ValueError):
    pass


def resolve_host(host: str) -> list[str]:
    infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    return sorted({str(info[4][0]) for info in infos})


def _refusal(address: str, allow_private: bool) -> str | None:
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip in METADATA or ip.is_link_local:
        return f"{ip} is a link-local address (cloud metadata lives there)"
    if ip.is_global and not ip.is_multicast:
        return None
    if allow_private and (ip.is_loopback or ip.is_private) and not ip.is_multicast and not ip.is_unspecified:
        return None
    return f"{ip} is not a public address"


def check_target_url(
    url: str, allow_private: bool = False, resolve: Resolver = resolve_host, require_resolution: bool = False
) -> None:
    """Raise ``TargetRefused`` when the URL's host is, or resolves to, a non-public address.

    A name that does not resolve passes unless ``require_resolution`` (set at call time): it is checked
    again before every call.
    """
    host = urlsplit(url).hostname
    if not host:
        raise TargetRefused("the URL has no host")
    try:
        addresses = resolve(host)
    except (OSError, UnicodeError) as exc:
        if require_resolution:
            raise TargetRefused(f"{host} does not resolve") from exc
        return
    for address in addresses:
        reason = _refusal(address, allow_private)
        if reason:
            raise TargetRefused(f"target host {host} refused: {reason}")
