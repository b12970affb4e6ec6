"""Server-side request forgery guard for HTTP targets.

A job's URL is checked when the job is written and again at each call, after DNS resolution: every
address the host resolves to must be a public one, in every spelling the resolver accepts (``127.1``,
``2130706433``, ``0x7f000001``, ``[::ffff:127.0.0.1]``, or a DNS name pointing at them).

The rule is stated here, range by range (IANA's special-purpose registries), and does not lean on
``ipaddress``'s ``is_private`` or ``is_global``: those changed between Python 3.11 and 3.13 (the Lambda
runtime), and the guard must answer the same on both. An address is one of:

- public: reachable by anyone; always allowed.
- private: loopback (``127.0.0.0/8``, ``::1``) and private networks (``10/8``, ``172.16/12``,
  ``192.168/16``, ``fc00::/7``); allowed only with ``allow_private`` (on only in ``duetime local``).
- never: cloud metadata and link-local (``169.254.0.0/16``, ``fe80::/10``, ``fd00:ec2::/32`` where AWS
  keeps its IPv6 metadata ``fd00:ec2::254``), and every other block that is not globally reachable
  (``0/8``, shared ``100.64/10``, documentation, benchmarking, multicast, reserved; for IPv6 everything
  outside ``2000::/3``, and ``2001::/23``, ``2001:db8::/32``, ``3fff::/20`` inside it): refused in every
  mode.

An IPv6 address that stands for an IPv4 address is judged by that IPv4 address too, and is allowed only
when both allow it (``_TRANSITION_FORMS``): IPv4-mapped ``::ffff:0:0/96`` (judged, and connected to, as
its IPv4), NAT64 ``64:ff9b::/96`` (judged as its IPv4), and, refused in every mode whatever they embed,
IPv4-compatible ``::/96`` (but ``::`` and ``::1`` are IPv6's own unspecified and loopback),
IPv4-translated ``::ffff:0:0:0/96``, local-use NAT64 ``64:ff9b:1::/48``, 6to4 ``2002::/16`` and Teredo
``2001::/32``. The IPv4 address is the last 32 bits, but for 6to4 (bits 16-47) and Teredo (the client's:
the last 32 bits inverted); local-use NAT64 is read as its /96 layout has it (its operator may choose
another, one reason the range is refused whatever it holds). A refusal because of the embedded address
names it, as that IPv4 address would be named.

Ports: a target may use 80, 443 and the unprivileged ports 1024-65535 (``check_port``), and any other an
installation names in its ``allowed_target_ports`` setting: duetime would otherwise port-scan a public host
for whoever asks (a refused connection, a timeout and an answer tell closed, filtered and open apart) and
speak HTTP to its SSH or mail servers. Checked at write time and at each call, in every mode. The rule
narrows what a scan can reach: services on unprivileged ports (databases among them) stay as reachable as
on any public address.

At call time the name is resolved once (``checked_addresses``) and the connection goes only to the
addresses that were checked: a second lookup by the HTTP library could answer differently (DNS
rebinding). URLs are read by one parser, urllib3's (``parse_target_url``), for the check and for the
call alike, so the two can never disagree about the host (``urlsplit`` reads ``http://a\\@b/`` as host
``b``, urllib3 as host ``a``).
"""

from __future__ import annotations

import functools
import ipaddress
import socket
from collections.abc import Callable, Collection
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

from urllib3.exceptions import LocationParseError
from urllib3.util import Url, parse_url

Resolver = Callable[[str], list[str]]


class TargetRefused(ValueError):
    pass


class HostDoesNotResolve(TargetRefused):
    pass


class PortRefused(TargetRefused):
    pass


DEFAULT_PORTS = {"http": 80, "https": 443}  # a URL's port when it names none
UNPRIVILEGED_PORTS = range(1024, 65536)
PORTS_SETTING = "allowed_target_ports (DUETIME_ALLOWED_TARGET_PORTS)"


def target_port(parsed: Url) -> int:
    """The port a call to the parsed URL connects to: the one it names, else its scheme's."""
    if parsed.port is not None:
        return parsed.port
    return DEFAULT_PORTS.get(parsed.scheme or "http", 80)


def check_port(parsed: Url, extra_ports: Collection[int] = ()) -> int:
    """The parsed URL's port (``target_port``) if a target may use it: 80, 443, 1024-65535 and
    ``extra_ports`` (the installation's ``allowed_target_ports``); else ``PortRefused`` naming the port and
    the setting."""
    port = target_port(parsed)
    if port in DEFAULT_PORTS.values() or port in UNPRIVILEGED_PORTS or port in extra_ports:
        return port
    raise PortRefused(
        f"target port {port} refused: targets may use ports 80, 443 and 1024-65535, and the ports the "
        f"installation adds with {PORTS_SETTING}"
    )


def parse_ports(text: str) -> list[int]:
    """``"25"``, ``"25,587"``, ``"20-23,25"`` -> the ports, sorted, once each; ``""`` -> none."""
    ports: set[int] = set()
    for part in text.split(","):
        if not part.strip():
            continue
        low, _, high = part.strip().partition("-")
        first, last = int(low), int(high or low)
        if last < first:
            raise ValueError(f"{part.strip()} is not a range of ports (the lower port first)")
        ports.update(range(first, last + 1))
    if any(not 1 <= port <= 65535 for port in ports):
        raise ValueError("ports must lie in 1..65535")
    return sorted(ports)


def resolve_host(host: str) -> list[str]:
    """The system resolver: every address of ``host``, once each, in the order the resolver gave them
    (the order to try connecting in). An address written in its standard form (``ipaddress``'s, no IPv6
    zone) is its own answer, as the resolver would give it, without asking: the other spellings the
    resolver accepts (``127.1``, ``2130706433``) and every name are asked."""
    if _is_address(host):
        return [host]
    infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _is_address(host: str) -> bool:
    if "%" in host:
        return False  # a zone the resolver checks against the machine's interfaces
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


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


def _checked_ip(address: str) -> IPv4Address | IPv6Address:
    """The address a check is about: without an IPv6 zone, an IPv4-mapped IPv6 address as its IPv4."""
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


PUBLIC, PRIVATE, NEVER = 0, 1, 2  # who may reach an address: anyone; local mode only; no one


@dataclass(frozen=True)
class _Standing:
    """Who may reach an address (``PUBLIC``, ``PRIVATE`` or ``NEVER``) and, unless public, why not."""

    reach: int
    reason: str = ""


def _v4(*cidrs: str) -> list[IPv4Network]:
    return [IPv4Network(cidr) for cidr in cidrs]


def _v6(*cidrs: str) -> list[IPv6Network]:
    return [IPv6Network(cidr) for cidr in cidrs]


LINK_LOCAL = "is a link-local address (cloud metadata lives there)"
NOT_PUBLIC = "is not a public address"

# Each version's rule, the first row whose networks hold the address deciding: who may reach it, and why
# not. The last row holds every address.
Rule = list[tuple[list[IPv4Network] | list[IPv6Network], int, str]]
IPV4_RULE: Rule = [
    (_v4("169.254.0.0/16"), NEVER, LINK_LOCAL),  # instance metadata 169.254.169.254, ECS's 169.254.170.2
    (_v4("127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"), PRIVATE, NOT_PUBLIC),
    (
        _v4(
            "0.0.0.0/8",  # this network
            "100.64.0.0/10",  # shared (carrier-grade NAT)
            "192.0.0.0/24",  # IETF protocol assignments
            "192.0.2.0/24",  # documentation
            "192.88.99.0/24",  # 6to4 relay anycast, deprecated
            "198.18.0.0/15",  # benchmarking
            "198.51.100.0/24",  # documentation
            "203.0.113.0/24",  # documentation
            "224.0.0.0/4",  # multicast
            "240.0.0.0/4",  # reserved, and the broadcast 255.255.255.255
        ),
        NEVER,
        NOT_PUBLIC,
    ),
    (_v4("0.0.0.0/0"), PUBLIC, ""),
]
IPV6_RULE: Rule = [
    (_v6("fd00:ec2::/32"), NEVER, "is a cloud metadata address"),  # AWS: metadata ::254, EKS's ::23
    (_v6("fe80::/10"), NEVER, LINK_LOCAL),
    (_v6("::1/128", "fc00::/7"), PRIVATE, NOT_PUBLIC),
    (_v6("64:ff9b::/96"), PUBLIC, ""),  # NAT64: the IPv4 address it embeds decides
    (
        _v6(
            "2001::/23",  # IETF protocol assignments (Teredo's 2001::/32 among them)
            "2001:db8::/32",  # documentation
            "2002::/16",  # 6to4: deprecated (RFC 7526), through whatever relay is nearest
            "3fff::/20",  # documentation
        ),
        NEVER,
        NOT_PUBLIC,
    ),
    (_v6("2000::/3"), PUBLIC, ""),  # global unicast
    (_v6("::/0"), NEVER, NOT_PUBLIC),  # unspecified, multicast, reserved, and all else outside 2000::/3
]


def _by_rule(ip: IPv4Address | IPv6Address, rule: Rule) -> _Standing:
    for networks, reach, reason in rule:
        if any(ip in network for network in networks):
            return _Standing(reach, f"{ip} {reason}" if reason else "")
    raise AssertionError(f"the rule's last row holds every address, {ip} too")


def _embedded_low(ip: IPv6Address) -> IPv4Address:
    return IPv4Address(int(ip) & 0xFFFFFFFF)


def _embedded_6to4(ip: IPv6Address) -> IPv4Address:
    return IPv4Address((int(ip) >> 80) & 0xFFFFFFFF)


def _embedded_teredo_client(ip: IPv6Address) -> IPv4Address:
    return IPv4Address(~int(ip) & 0xFFFFFFFF)


# The IPv6 forms that stand for an IPv4 address, and where it sits (IPv4-mapped: ``_checked_ip``).
_TRANSITION_FORMS: list[tuple[IPv6Network, str, Callable[[IPv6Address], IPv4Address]]] = [
    (IPv6Network("::/96"), "IPv4-compatible", _embedded_low),  # but :: and ::1, see _embedded_ipv4
    (IPv6Network("::ffff:0:0:0/96"), "IPv4-translated", _embedded_low),
    (IPv6Network("64:ff9b::/96"), "NAT64", _embedded_low),
    (IPv6Network("64:ff9b:1::/48"), "local-use NAT64", _embedded_low),  # as the /96 layout has it
    (IPv6Network("2002::/16"), "6to4", _embedded_6to4),
    (IPv6Network("2001::/32"), "Teredo", _embedded_teredo_client),  # the client's address, inverted
]


def _embedded_ipv4(ip: IPv6Address) -> tuple[IPv4Address, str] | None:
    """The IPv4 address ``ip`` stands for and the form's name, or ``None`` for a plain IPv6 address."""
    if int(ip) <= 1:  # :: and ::1 are IPv6's unspecified and loopback addresses, not 0.0.0.0 and 0.0.0.1
        return None
    for network, form, embedded in _TRANSITION_FORMS:
        if ip in network:
            return embedded(ip), form
    return None


@functools.lru_cache(maxsize=4096)  # a pure function of the address, asked at every call of a target
def _standing(ip: IPv4Address | IPv6Address) -> _Standing:
    """Who may reach ``ip``: for an IPv6 address standing for an IPv4 one, the stricter of the two
    answers, naming the IPv4 address when its answer is at least as strict."""
    if isinstance(ip, IPv4Address):
        return _by_rule(ip, IPV4_RULE)
    own = _by_rule(ip, IPV6_RULE)
    embedding = _embedded_ipv4(ip)
    if embedding is None:
        return own
    ipv4, form = embedding
    inner = _by_rule(ipv4, IPV4_RULE)
    if inner.reach == PUBLIC or inner.reach < own.reach:
        return _Standing(own.reach, f"{own.reason} ({form} for {ipv4})") if own.reason else own
    return _Standing(inner.reach, f"{ip} stands for {ipv4} ({form}): {inner.reason}")


def _refusal(ip: IPv4Address | IPv6Address, allow_private: bool) -> str | None:
    standing = _standing(ip)
    if standing.reach == PUBLIC or (standing.reach == PRIVATE and allow_private):
        return None
    return standing.reason


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
    url: str,
    allow_private: bool = False,
    resolve: Resolver = resolve_host,
    require_resolution: bool = False,
    extra_ports: Collection[int] = (),
) -> None:
    """Raise ``TargetRefused`` when the URL's port is not one a target may use (``check_port``, with the
    installation's ``extra_ports``) or its host is, or resolves to, a non-public address.

    A name that does not resolve passes unless ``require_resolution``: a call checks again (and connects
    only to what that check let through, see ``checked_addresses``).
    """
    parsed = parse_target_url(url)
    check_port(parsed, extra_ports)
    try:
        checked_addresses(bare_host(parsed), allow_private, resolve)
    except HostDoesNotResolve:
        if require_resolution:
            raise
