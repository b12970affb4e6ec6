"""Server-side request forgery guard for HTTP targets.

A job's URL is checked when the job is written and again at each call, after DNS resolution: every
address the host resolves to must be a public one. Loopback, private, link-local (including the instance
metadata address 169.254.169.254), shared, reserved and multicast addresses are refused, in every spelling
the resolver accepts (``127.1``, ``2130706433``, ``0x7f000001``, ``[::ffff:127.0.0.1]``, or a DNS name
pointing at them). ``allow_private`` (on only in ``duetime local``) permits loopback and private
addresses, never the metadata range.

At call time the name is resolved once (``checked_addresses``) and the connection goes only to the
addresses that were checked: a second lookup by the HTTP library could answer differently (DNS
rebinding). URLs are read by one parser, urllib3's (``parse_target_url``), for the check and for the
call alike, so the two can never disagree about the host (``urlsplit`` reads ``http://a\\@b/`` as host
``b``, urllib3 as host ``a``).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable

from urllib3.exceptions import LocationParseError
from urllib3.util import Url, parse_url

Resolver = Callable[[str], list[str]]
METADATA = ipaddress.ip_network("169.254.0.0/16")


class TargetRefused(ValueError):
    pass


class HostDoesNotResolve(TargetRefused):
    pass


def resolve_host(host: str) -> list[str]:
    """The system resolver: every address of ``host``, once each, in the order the resolver gave them
    (the order to try connecting in)."""
    infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def parse_target_url(url: str) -> Url:
    """``url`` as urllib3 reads it: scheme and host lowercased, the host IDNA-encoded, an IPv6 host in
    brackets. Raise ``TargetRefused`` when it cannot be parsed or names no host."""
    try:
        parsed = parse_url(url)
    except LocationParseError as exc:
        raise TargetRefused("the URL cannot be parsed") from exc
    if not parsed.host:
        raise TargetRefused("the URL has no host")
    return parsed


def bare_host(parsed: Url) -> str:
    """The host of a parsed URL as a resolver takes it: an IPv6 literal without its brackets."""
    host = parsed.host or ""
    return host[1:-1] if host.startswith("[") else host


def _checked_ip(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """The address a check is about: without an IPv6 zone, an IPv4-mapped IPv6 address as its IPv4."""
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _refusal(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, allow_private: bool) -> str | None:
    if ip in METADATA or ip.is_link_local:
        return f"{ip} is a link-local address (cloud metadata lives there)"
    if ip.is_global and not ip.is_multicast:
        return None
    if allow_private and (ip.is_loopback or ip.is_private) and not ip.is_multicast and not ip.is_unspecified:
        return None
    return f"{ip} is not a public address"


def checked_addresses(host: str, allow_private: bool = False, resolve: Resolver = resolve_host) -> list[str]:
    """Resolve ``host`` once and check every address; return the addresses a connection may go to.

    The answer is in the resolver's order, each address exactly as it was checked (an IPv4-mapped IPv6
    address as its IPv4, no IPv6 zone). One refused address refuses the whole name (``TargetRefused``);
    a name that does not resolve, or resolves to nothing, raises ``HostDoesNotResolve``.
    """
    try:
        answers = resolve(host)
    except (OSError, UnicodeError) as exc:
        raise HostDoesNotResolve(f"{host} does not resolve") from exc
    if not answers:
        raise HostDoesNotResolve(f"{host} does not resolve")
    ips = [_checked_ip(answer) for answer in answers]
    for ip in ips:
        reason = _refusal(ip, allow_private)
        if reason:
            raise TargetRefused(f"target host {host} refused: {reason}")
    return list(dict.fromkeys(str(ip) for ip in ips))


def check_target_url(
    url: str, allow_private: bool = False, resolve: Resolver = resolve_host, require_resolution: bool = False
) -> None:
    """Raise ``TargetRefused`` when the URL's host is, or resolves to, a non-public address.

    A name that does not resolve passes unless ``require_resolution``: a call checks again (and connects
    only to what that check let through, see ``checked_addresses``).
    """
    try:
        checked_addresses(bare_host(parse_target_url(url)), allow_private, resolve)
    except HostDoesNotResolve:
        if require_resolution:
            raise
