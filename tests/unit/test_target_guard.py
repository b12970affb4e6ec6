"""The SSRF guard refuses non-public targets in every spelling, and names that resolve to them; the addresses
it checked are the ones a call may connect to. It answers the same on Python 3.11 and on 3.13 (the Lambda
runtime's)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import urllib3

import duetime
from duetime.domain.target_guard import (
    HostDoesNotResolve,
    PortRefused,
    TargetRefused,
    check_target_url,
    checked_addresses,
    parse_ports,
    resolve_host,
)
from tests.unit import target_guard_answers
from tests.unit.target_guard_answers import TRANSITION_FORMS, spelled_as


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/x",
        "http://127.1/x",
        "http://2130706433/x",
        "http://0x7f000001/x",
        "http://0177.0.0.1/x",
        "http://localhost:8080/x",
        "http://[::1]/x",
        "http://[::ffff:127.0.0.1]/x",
        "http://10.1.2.3/x",
        "http://192.168.0.1/x",
        "http://172.16.5.4/x",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fe80::1]/x",
        "http://100.64.0.1/x",
        "http://0.0.0.0/x",
        "http://224.0.0.1/x",
        "http://[fd00::1]/x",
    ],
)
def test_non_public_addresses_are_refused(url: str) -> None:
    with pytest.raises(TargetRefused):
        check_target_url(url)


def test_a_name_resolving_to_a_private_address_is_refused() -> None:
    with pytest.raises(TargetRefused, match=r"10\.0\.0\.7"):
        check_target_url(
            "https://internal.example.com/hook", resolve=lambda host: ["93.184.216.34", "10.0.0.7"]
        )


def test_public_addresses_pass_and_unresolvable_names_are_checked_again_at_call_time() -> None:
    check_target_url("https://hooks.example.com/x", resolve=lambda host: ["93.184.216.34"])

    def unresolvable(host: str) -> list[str]:
        raise OSError("no such host")

    check_target_url("https://not-yet.example.com/x", resolve=unresolvable)
    with pytest.raises(TargetRefused, match="does not resolve"):
        check_target_url("https://not-yet.example.com/x", resolve=unresolvable, require_resolution=True)


def test_local_mode_allows_loopback_and_private_but_never_metadata() -> None:
    check_target_url("http://127.0.0.1:8080/demo/target", allow_private=True)
    check_target_url("http://10.1.2.3/x", allow_private=True)
    with pytest.raises(TargetRefused):
        check_target_url("http://169.254.169.254/latest/meta-data/", allow_private=True)


def test_a_url_is_read_as_urllib3_reads_it_so_the_checked_host_is_the_connected_one() -> None:
    # urlsplit reads this host as the public 93.184.216.34; urllib3 would connect to 127.0.0.1
    with pytest.raises(TargetRefused, match=r"target host 127\.0\.0\.1 refused"):
        check_target_url("http://127.0.0.1:8080\\@93.184.216.34/x")
    with pytest.raises(TargetRefused, match="cannot be parsed"):
        check_target_url("http://hooks.example.com:99999/x", resolve=lambda host: ["93.184.216.34"])


PUBLIC = "93.184.216.34"


@pytest.mark.parametrize(
    "url",
    [
        f"http://{PUBLIC}/x",
        f"https://{PUBLIC}/x",
        f"http://{PUBLIC}:443/x",
        f"https://{PUBLIC}:80/x",
        f"http://{PUBLIC}:1024/x",
        f"http://{PUBLIC}:8080/x",
        f"https://{PUBLIC}:65535/x",
    ],
)
def test_targets_may_use_ports_80_443_and_the_unprivileged_ones(url: str) -> None:
    check_target_url(url)


@pytest.mark.parametrize("port", [0, 1, 21, 22, 23, 25, 53, 110, 135, 389, 445, 587, 993, 1023])
@pytest.mark.parametrize("allow_private", [False, True], ids=["production", "local mode"])
def test_other_ports_are_refused_naming_the_port_and_the_setting_in_every_mode(
    port: int, allow_private: bool
) -> None:
    """duetime would otherwise port-scan a public host for whoever asks: a refused connection, a timeout
    and an answer tell closed, filtered and open apart. The name is not even looked up."""
    lookups: list[str] = []

    def resolve(host: str) -> list[str]:
        lookups.append(host)
        return [PUBLIC]

    with pytest.raises(PortRefused) as refused:
        check_target_url(f"http://hooks.example.com:{port}/x", allow_private, resolve)

    assert str(refused.value) == (
        f"target port {port} refused: targets may use ports 80, 443 and 1024-65535, and the ports the "
        "installation adds with allowed_target_ports (DUETIME_ALLOWED_TARGET_PORTS)"
    )
    assert lookups == []


def test_an_installation_allows_more_ports_and_only_those() -> None:
    check_target_url(f"http://{PUBLIC}:25/x", extra_ports={25, 8})
    check_target_url(f"http://{PUBLIC}:8/x", extra_ports={25, 8})
    with pytest.raises(PortRefused, match="target port 22 refused"):
        check_target_url(f"http://{PUBLIC}:22/x", extra_ports={25, 8})


def test_an_allowed_port_does_not_let_a_non_public_address_through() -> None:
    with pytest.raises(TargetRefused, match=r"127\.0\.0\.1 is not a public address"):
        check_target_url("http://127.0.0.1:25/x", extra_ports={25})


@pytest.mark.parametrize(
    ("text", "ports"),
    [("", []), ("25", [25]), ("25, 8", [8, 25]), ("20-23,22", [20, 21, 22, 23]), ("1,65535", [1, 65535])],
)
def test_the_ports_setting_takes_ports_and_ranges(text: str, ports: list[int]) -> None:
    assert parse_ports(text) == ports


@pytest.mark.parametrize("text", ["0", "65536", "23-20", "smtp", "25,,x"])
def test_a_ports_setting_that_names_no_port_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_ports(text)


def test_the_checked_addresses_are_the_resolvers_in_its_order_each_as_it_was_checked() -> None:
    answers = ["2606:2800:220:1:248:1893:25c8:1946", "93.184.216.34", "::ffff:93.184.216.35"]
    assert checked_addresses("hooks.example.com", resolve=lambda host: answers) == [
        "2606:2800:220:1:248:1893:25c8:1946",
        "93.184.216.34",
        "93.184.216.35",
    ]


@pytest.mark.parametrize("address", ["127.0.0.1", "93.184.216.34", "::1", "2001:db8::1", "::ffff:10.0.0.1"])
def test_an_address_in_its_standard_form_is_its_own_answer_without_asking_the_resolver(
    address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = socket.getaddrinfo(address, None, proto=socket.IPPROTO_TCP)
    monkeypatch.setattr(socket, "getaddrinfo", lambda *_, **__: pytest.fail("the resolver was asked"))
    assert resolve_host(address) == list(dict.fromkeys(str(info[4][0]) for info in asked))


@pytest.mark.parametrize("spelling", ["127.1", "2130706433", "0x7f000001", "localhost", "::1%lo"])
def test_every_other_spelling_and_every_name_is_the_resolvers_to_answer(
    spelling: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *_, **__: asked.append(host) or [])
    assert resolve_host(spelling) == [] and asked == [spelling]


def test_a_name_resolving_to_nothing_does_not_resolve() -> None:
    with pytest.raises(HostDoesNotResolve, match=r"empty\.example\.com does not resolve"):
        checked_addresses("empty.example.com", resolve=lambda host: [])


def answer_of(address: str, allow_private: bool = False) -> list[str]:
    return checked_addresses("target.example", allow_private, resolve=lambda host: [address])


def test_a_nat64_address_embedding_loopback_is_refused() -> None:
    with pytest.raises(TargetRefused, match=r"64:ff9b::7f00:1 stands for 127\.0\.0\.1 \(NAT64\)"):
        check_target_url("http://[64:ff9b::7f00:1]/x")


@pytest.mark.parametrize("embedded", ["127.0.0.1", "10.0.0.7", "192.168.0.1", "100.64.0.1", "0.0.0.0"])
@pytest.mark.parametrize("form", [form for form in TRANSITION_FORMS if form != "IPv4-compatible"])
def test_an_ipv6_address_standing_for_a_non_public_ipv4_address_is_refused_naming_it(
    form: str, embedded: str
) -> None:
    with pytest.raises(TargetRefused, match=re.escape(embedded)):
        answer_of(spelled_as(form, embedded))


@pytest.mark.parametrize("embedded", ["127.0.0.1", "10.0.0.7", "192.168.0.1", "100.64.0.1"])
def test_an_ipv4_compatible_address_embedding_a_non_public_ipv4_address_is_refused_naming_it(
    embedded: str,
) -> None:
    with pytest.raises(TargetRefused, match=re.escape(embedded)):
        check_target_url(f"http://[::{embedded}]/x")


@pytest.mark.parametrize("allow_private", [False, True], ids=["production", "local mode"])
@pytest.mark.parametrize(
    "address",
    [
        "169.254.169.254",
        "169.254.170.2",
        "fd00:ec2::254",
        "fe80::1",
        *[spelled_as(form, "169.254.169.254") for form in TRANSITION_FORMS],
    ],
)
def test_metadata_addresses_are_refused_in_every_mode_and_every_form(
    address: str, allow_private: bool
) -> None:
    with pytest.raises(TargetRefused, match="metadata"):
        answer_of(address, allow_private)


def test_the_unspecified_and_loopback_ipv6_addresses_are_judged_as_ipv6_not_as_an_embedded_ipv4() -> None:
    with pytest.raises(TargetRefused, match=r"refused: :: is not a public address"):
        answer_of("::", allow_private=True)
    with pytest.raises(TargetRefused, match=r"refused: ::1 is not a public address"):
        answer_of("::1")
    assert answer_of("::1", allow_private=True) == ["::1"]


def test_a_nat64_address_of_a_public_ipv4_address_is_public_and_is_connected_to_as_given() -> None:
    assert answer_of("64:ff9b::5db8:d822") == ["64:ff9b::5db8:d822"]  # DNS64's answer for 93.184.216.34
    assert answer_of("64:ff9b::7f00:1", allow_private=True) == ["64:ff9b::7f00:1"]  # as 127.0.0.1 would


@pytest.mark.parametrize("allow_private", [False, True], ids=["production", "local mode"])
@pytest.mark.parametrize("form", ["IPv4-compatible", "IPv4-translated", "local-use NAT64", "6to4", "Teredo"])
def test_transition_forms_that_are_not_globally_reachable_are_refused_whatever_they_embed(
    form: str, allow_private: bool
) -> None:
    with pytest.raises(TargetRefused, match=rf"is not a public address \({form} for 93\.184\.216\.34\)"):
        answer_of(spelled_as(form, "93.184.216.34"), allow_private)
    with pytest.raises(TargetRefused):
        answer_of(spelled_as(form, "127.0.0.1"), allow_private)


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "127.9.9.9", "10.1.2.3", "172.31.0.1", "192.168.1.1", "::1", "fd12::1", "fc00::1"],
)
def test_local_mode_allows_loopback_and_private_networks(address: str) -> None:
    assert answer_of(address, allow_private=True) == [address]


@pytest.mark.parametrize(
    "address",
    [
        *["0.0.0.0", "100.64.0.1", "192.0.0.1", "192.0.2.1", "198.18.0.1", "198.51.100.1", "203.0.113.1"],
        *["224.0.0.1", "240.0.0.1", "255.255.255.255", "192.88.99.1"],
        *["::", "ff02::1", "fec0::1", "100::1", "5f00::1", "2001:db8::1", "3fff::1"],
    ],
)
def test_local_mode_still_refuses_what_is_neither_public_nor_loopback_nor_private(address: str) -> None:
    with pytest.raises(TargetRefused, match="not a public address"):
        answer_of(address, allow_private=True)


@pytest.mark.parametrize(
    "address",
    [
        "64:ff9b:1::5db8:d822",  # local-use NAT64: global on 3.11, private on 3.13
        "2002:5db8:d822::1",  # 6to4: global on 3.11, private on 3.13
        "2001:4:112::1",  # in 2001::/23: private on 3.11, global on 3.13
        "2001:20::1",  # in 2001::/23: private on 3.11, global on 3.13
        "fec0::1",  # deprecated site-local: global on both
        "5f00::1",  # segment routing: global on both
        "3fff::1",  # documentation: global on both
    ],
)
def test_ranges_python_versions_disagree_or_err_about_are_refused_by_the_guards_own_rule(
    address: str,
) -> None:
    with pytest.raises(TargetRefused, match="not a public address"):
        answer_of(address)


def python_3_13() -> str:
    """The Python 3.13 interpreter (the Lambda runtime's version): pyenv's newest 3.13, else a
    ``python3.13`` on the PATH that runs. Fail, naming what to install, when there is none."""
    candidates: list[str] = []
    pyenv = shutil.which("pyenv")
    if pyenv:
        listed = subprocess.run([pyenv, "versions", "--bare"], capture_output=True, text=True, check=False)
        versions = [v for v in listed.stdout.split() if re.fullmatch(r"3\.13\.\d+", v)]
        for version in sorted(versions, key=lambda v: [int(part) for part in v.split(".")], reverse=True):
            env = {**os.environ, "PYENV_VERSION": version}
            found = subprocess.run([pyenv, "which", "python3.13"], capture_output=True, text=True, env=env)
            if found.returncode == 0:
                candidates.append(found.stdout.strip())
    on_path = shutil.which("python3.13")  # a pyenv shim there refuses to run without PYENV_VERSION
    if on_path:
        candidates.append(on_path)
    for python in candidates:
        asked = [python, "-c", "import sys; print(sys.version_info[:2])"]
        if subprocess.run(asked, capture_output=True, text=True).stdout.strip() == "(3, 13)":
            return python
    pytest.fail(
        "Python 3.13 (the Lambda runtime's) is needed to check that the SSRF guard answers alike on it and "
        "was not found: install it (`pyenv install 3.13`) or put a python3.13 on the PATH"
    )


def test_the_guard_answers_the_same_on_python_3_13_the_lambda_runtime(tmp_path: Path) -> None:
    """``ipaddress`` changed between 3.11 and 3.13; the guard's rule is its own, so its answers do not."""
    libraries = tmp_path / "libraries"
    libraries.mkdir()
    (libraries / "urllib3").symlink_to(Path(urllib3.__file__).parent)  # pure Python: any version imports it
    shared = Path(duetime.__file__).parent.parent
    run = subprocess.run(
        [python_3_13(), "-S", "-E", "-B", target_guard_answers.__file__, str(shared), str(libraries)],
        input=json.dumps(target_guard_answers.ADDRESSES),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert run.returncode == 0, run.stderr
    assert sys.version_info[:2] != (3, 13)  # else this compares 3.13 with itself
    here = target_guard_answers.answers(target_guard_answers.ADDRESSES)
    on_3_13 = json.loads(run.stdout)
    differing = {
        a: (here.get(a), on_3_13.get(a))
        for a in here.keys() | on_3_13.keys()
        if here.get(a) != on_3_13.get(a)
    }
    assert differing == {}  # address: (the answer here, the answer on 3.13)
