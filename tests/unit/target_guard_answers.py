"""The SSRF guard's answers for a table of addresses, in both modes, as plain JSON data.

The unit tests take them under this Python and, to compare, under Python 3.13 (the Lambda runtime's):
``python3.13 -S -E -B target_guard_answers.py SHARED LIBRARIES`` reads the addresses (a JSON list) on
stdin and prints the answers, importing only from the standard library, ``SHARED`` (the folder holding
the ``duetime`` package) and ``LIBRARIES`` (a folder holding urllib3). ``ipaddress`` changed between the
two (``is_private``, ``is_global``, even how it writes an IPv4-mapped address, hence one table sent to
both); ``ADDRESSES`` has the ranges it changed for, and every IPv6 form that stands for an IPv4 address.
"""

from __future__ import annotations

import json
import sys
from ipaddress import IPv4Address, IPv6Address

# Where each IPv6 form that stands for an IPv4 address puts it: the address for IPv4 address ``v4``.
TRANSITION_FORMS = {
    "IPv4-mapped": lambda v4: IPv6Address(0xFFFF << 32 | v4),
    "IPv4-compatible": lambda v4: IPv6Address(v4),
    "IPv4-translated": lambda v4: IPv6Address(0xFFFF << 48 | v4),
    "NAT64": lambda v4: IPv6Address(int(IPv6Address("64:ff9b::")) | v4),
    "local-use NAT64": lambda v4: IPv6Address(int(IPv6Address("64:ff9b:1::")) | v4),
    "6to4": lambda v4: IPv6Address(0x2002 << 112 | v4 << 80 | 1),
    # a Teredo server's address (65.54.227.120) in bits 32-63, the client's inverted in the last 32
    "Teredo": lambda v4: IPv6Address(int(IPv6Address("2001:0:4136:e378:8000:63bf::")) | (~v4 & 0xFFFFFFFF)),
}


def spelled_as(form: str, ipv4: str) -> str:
    """IPv4 address ``ipv4`` as an IPv6 address of ``form`` (a key of ``TRANSITION_FORMS``)."""
    return str(TRANSITION_FORMS[form](int(IPv4Address(ipv4))))


EMBEDDED = ["127.0.0.1", "10.0.0.7", "169.254.169.254", "100.64.0.1", "192.0.0.9", "0.0.0.0", "93.184.216.34"]
ADDRESSES = [
    # IPv4 blocks, the ones Python's versions disagree about among them
    *["127.0.0.1", "10.1.2.3", "172.16.5.4", "192.168.0.1", "169.254.169.254", "169.254.170.2"],
    *["0.0.0.0", "100.64.0.1", "192.0.0.1", "192.0.0.9", "192.0.2.1", "192.88.99.1", "198.18.0.1"],
    *["198.51.100.1", "203.0.113.1", "224.0.0.1", "240.0.0.1", "255.255.255.255", "93.184.216.34"],
    # IPv6 blocks
    *["::", "::1", "fd00:ec2::254", "fd00:ec2::23", "fd12::1", "fc00::1", "fe80::1", "fe80::1%eth0"],
    *["fec0::1", "ff02::1", "100::1", "5f00::1", "3fff::1", "2001:db8::1", "2001:4:112::1", "2001:20::1"],
    *["2001:1::1", "2001:3::1", "2606:2800:220:1:248:1893:25c8:1946", "2620:4f:8000::1"],
    # every form that stands for an IPv4 address, for loopback, private, metadata, shared and public ones
    *[spelled_as(form, ipv4) for form in TRANSITION_FORMS for ipv4 in EMBEDDED],
]


def answers(addresses: list[str]) -> dict[str, list[list[str] | str]]:
    """For each of ``addresses``: what ``checked_addresses`` answers for a name resolving to it,
    without and with ``allow_private``: the addresses a call may connect to, or the refusal's text."""
    from duetime.domain.target_guard import TargetRefused, checked_addresses

    def answer(address: str, allow_private: bool) -> list[str] | str:
        try:
            return checked_addresses("target.example", allow_private, resolve=lambda host: [address])
        except TargetRefused as refused:
            return str(refused)

    return {address: [answer(address, False), answer(address, True)] for address in addresses}


if __name__ == "__main__":
    sys.path[:0] = sys.argv[1:3]
    print(json.dumps(answers(json.load(sys.stdin)), indent=1))
