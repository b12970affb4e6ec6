"""The target caller connects only to addresses the SSRF guard checked, and still names the original host.

A name is resolved once per call. Whatever the name answers a moment later (DNS rebinding: a zero TTL,
a public address for the check and ``127.0.0.1`` or ``169.254.169.254`` for the connection) is never
asked for. The request carries the URL's host in ``Host``, and over https the TLS server name and the
certificate check are for that name, not for the address.
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3

from duetime.adapters.http_target import BODY_KEPT, HttpTargetCaller, _Target
from duetime.domain.target_guard import parse_target_url
from duetime.ports import TargetRequest, TargetResponse
from tests.unit.target_support import Network, local_network, make_tls_files, serve

PUBLIC = "93.184.216.34"  # a global address; the test network refuses it without sending a packet


@pytest.fixture
def network() -> Iterator[Network]:
    with local_network() as network:
        yield network


def call(caller: HttpTargetCaller, url: str, headers: dict[str, str] | None = None) -> TargetResponse:
    return caller.call(TargetRequest(url, "POST", headers or {}, b'{"job":"j1"}', timeout_seconds=2))


def rebinding(name: str, first: str, later: str) -> Callable[[str], list[str]]:
    """A resolver for a hostile name with a zero TTL: ``first`` on the first lookup, ``later`` after."""
    lookups: list[str] = []

    def resolve(host: str) -> list[str]:
        assert host == name
        lookups.append(host)
        return [first] if len(lookups) == 1 else [later]

    return resolve


def test_a_name_that_rebinds_to_loopback_never_reaches_the_loopback_server(
    network: Network, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The system resolver itself rebinds: the production default path, no resolver injected."""
    real_getaddrinfo = socket.getaddrinfo
    answer = rebinding("rebind.example", PUBLIC, "127.0.0.1")

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host != "rebind.example":
            return real_getaddrinfo(host, port, *args, **kwargs)
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (answer(host)[0], port or 0))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    with serve("127.0.0.1") as loopback:
        response = call(HttpTargetCaller(allow_private=False), f"http://rebind.example:{loopback.port}/hook")

    assert loopback.requests == []
    assert response.status_code is None and response.error
    assert network.connections == [(PUBLIC, loopback.port)]


def test_an_injected_resolver_is_asked_once_and_only_its_checked_answer_is_connected_to(
    network: Network,
) -> None:
    lookups: list[str] = []
    answer = rebinding("rebind.example", PUBLIC, "127.0.0.1")

    def resolve(host: str) -> list[str]:
        lookups.append(host)
        return answer(host)

    with serve("127.0.0.1") as loopback:
        response = call(HttpTargetCaller(resolve=resolve), f"http://rebind.example:{loopback.port}/hook")

    assert loopback.requests == []
    assert response.status_code is None
    assert lookups == ["rebind.example"]
    assert network.connections == [(PUBLIC, loopback.port)]


def test_the_call_goes_to_the_checked_address_with_the_original_host_header(network: Network) -> None:
    caller = HttpTargetCaller(allow_private=True, resolve=lambda host: ["127.0.0.1"])
    with serve("127.0.0.1") as target:
        response = call(caller, f"http://target.example:{target.port}/hook?x=1#fragment")

    assert (response.status_code, response.body, response.error) == (200, "ok", None)
    assert network.connections == [("127.0.0.1", target.port)]
    [seen] = target.requests
    assert (seen.method, seen.path, seen.body) == ("POST", "/hook?x=1", b'{"job":"j1"}')
    assert seen.headers["host"] == f"target.example:{target.port}"


def test_a_host_header_the_job_sets_is_sent_as_it_is_and_the_connection_still_goes_to_the_checked_address(
    network: Network,
) -> None:
    caller = HttpTargetCaller(allow_private=True, resolve=lambda host: ["127.0.0.1"])
    with serve("127.0.0.1") as target:
        response = call(caller, f"http://target.example:{target.port}/", {"host": "other.example"})

    assert response.status_code == 200
    assert network.connections == [("127.0.0.1", target.port)]
    assert [seen.headers["host"] for seen in target.requests] == ["other.example"]


@pytest.mark.parametrize(
    ("url", "host_header"),
    [
        ("http://target.example/x", "target.example"),
        ("http://Target.Example.:80/x", "target.example"),
        ("https://target.example:443/x", "target.example"),
        ("https://target.example:8443/x", "target.example:8443"),
        ("http://[2001:db8::1]:8080/x", "[2001:db8::1]:8080"),
        ("http://[::ffff:93.184.216.34]/x", "[::ffff:93.184.216.34]"),
    ],
)
def test_the_host_header_names_the_port_only_when_it_is_not_the_schemes_default(
    url: str, host_header: str
) -> None:
    assert _Target.of(parse_target_url(url)).host_header == host_header


@pytest.fixture
def tls_files(tmp_path: Path) -> tuple[Path, Path, Path]:
    return make_tls_files(tmp_path, "target.example")


def tls_server_context(tls_files: tuple[Path, Path, Path]) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tls_files[1], tls_files[2])
    return context


def test_an_https_target_is_asked_for_and_verified_as_its_own_name_not_its_address(
    network: Network, tls_files: tuple[Path, Path, Path]
) -> None:
    pool = urllib3.PoolManager(ca_certs=str(tls_files[0]))
    caller = HttpTargetCaller(pool, allow_private=True, resolve=lambda host: ["127.0.0.1"])
    with serve("127.0.0.1", tls_server_context(tls_files)) as target:
        response = call(caller, f"https://target.example:{target.port}/hook")

    assert (response.status_code, response.error) == (200, None)
    assert target.server_names == ["target.example"]
    assert network.connections == [("127.0.0.1", target.port)]
    assert [seen.headers["host"] for seen in target.requests] == [f"target.example:{target.port}"]


def test_an_https_target_whose_certificate_is_for_another_name_gets_no_request(
    tls_files: tuple[Path, Path, Path],
) -> None:
    pool = urllib3.PoolManager(ca_certs=str(tls_files[0]))
    caller = HttpTargetCaller(pool, allow_private=True, resolve=lambda host: ["127.0.0.1"])
    with serve("127.0.0.1", tls_server_context(tls_files)) as target:
        response = call(caller, f"https://impostor.example:{target.port}/hook")

    assert (response.status_code, response.error) == (None, "connection error: SSLError")
    assert target.server_names == ["impostor.example"]
    assert target.requests == []


def _ipv6_loopback_available() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6_loopback_available(), reason="no IPv6 loopback here")
def test_an_ipv6_literal_target_is_called_at_that_address_with_a_bracketed_host(network: Network) -> None:
    with serve("::1") as target:
        response = call(HttpTargetCaller(allow_private=True), f"http://[::1]:{target.port}/hook")

    assert response.status_code == 200
    assert network.connections == [("::1", target.port)]
    assert [seen.headers["host"] for seen in target.requests] == [f"[::1]:{target.port}"]


def test_an_ipv4_mapped_target_is_checked_and_called_as_its_ipv4_address(network: Network) -> None:
    with serve("127.0.0.1") as target:
        url = f"http://[::ffff:127.0.0.1]:{target.port}/hook"
        refused = call(HttpTargetCaller(allow_private=False), url)
        allowed = call(HttpTargetCaller(allow_private=True), url)

    assert refused.permanent
    assert refused.error == "target host ::ffff:127.0.0.1 refused: 127.0.0.1 is not a public address"
    assert allowed.status_code == 200
    assert network.connections == [("127.0.0.1", target.port)]
    assert [seen.headers["host"] for seen in target.requests] == [f"[::ffff:127.0.0.1]:{target.port}"]


def test_when_a_checked_address_takes_no_connection_the_next_checked_one_is_tried(network: Network) -> None:
    caller = HttpTargetCaller(allow_private=True, resolve=lambda host: ["127.0.0.2", "127.0.0.1"])
    with serve("127.0.0.1") as target:  # nothing listens on 127.0.0.2
        response = call(caller, f"http://two.example:{target.port}/hook")

    assert response.status_code == 200
    assert network.connections == [("127.0.0.2", target.port), ("127.0.0.1", target.port)]
    assert len(target.requests) == 1


def test_a_target_slower_than_the_timeout_is_a_timeout(network: Network) -> None:
    caller = HttpTargetCaller(allow_private=True, resolve=lambda host: ["127.0.0.1"])
    with serve("127.0.0.1") as target:
        response = caller.call(TargetRequest(f"http://slow.example:{target.port}/slow", "GET", {}, None, 0.2))

    assert (response.status_code, response.error, response.permanent) == (None, "timeout after 0.2s", False)


def test_one_refused_address_refuses_the_name_and_nothing_is_connected_to(network: Network) -> None:
    caller = HttpTargetCaller(resolve=lambda host: [PUBLIC, "127.0.0.1"])
    response = call(caller, "http://mixed.example/hook")

    assert response.permanent and response.status_code is None
    assert response.error == "target host mixed.example refused: 127.0.0.1 is not a public address"
    assert network.connections == []


def test_a_name_that_does_not_resolve_is_refused_for_good(network: Network) -> None:
    def unresolvable(host: str) -> list[str]:
        raise socket.gaierror("no such host")

    response = call(HttpTargetCaller(resolve=unresolvable), "http://gone.example/hook")

    assert (response.permanent, response.error) == (True, "gone.example does not resolve")
    assert network.connections == []


def test_a_url_the_two_parsers_read_differently_is_checked_as_it_is_connected(network: Network) -> None:
    """``urlsplit`` reads the host as the public address after ``@``; urllib3 reads ``127.0.0.1``."""
    with serve("127.0.0.1") as loopback:
        response = call(HttpTargetCaller(), f"http://127.0.0.1:{loopback.port}\\@{PUBLIC}/hook")

    assert loopback.requests == []
    assert response.permanent
    assert response.error == "target host 127.0.0.1 refused: 127.0.0.1 is not a public address"
    assert network.connections == []


def test_an_answer_left_half_read_closes_its_connection_and_the_next_call_gets_a_clean_answer(
    network: Network,
) -> None:
    """A body longer than ``BODY_KEPT`` whose rest is still coming when the caller stops reading: the rest
    must not become the start of the next answer on that connection (another team's, behind one address)."""
    caller = HttpTargetCaller(allow_private=True, resolve=lambda host: ["127.0.0.1"])
    with serve("127.0.0.1") as target:
        half_read = call(caller, f"http://trickle.example:{target.port}/body?length=4096&first={BODY_KEPT}")
        next_call = call(caller, f"http://trickle.example:{target.port}/hook")

    assert (half_read.status_code, half_read.body) == (200, "x" * BODY_KEPT)
    assert (next_call.status_code, next_call.body, next_call.error) == (200, "ok", None)
    assert [seen.path for seen in target.requests] == [f"/body?length=4096&first={BODY_KEPT}", "/hook"]
    assert len(target.connections) == 2  # the half-read one was closed, not reused


@pytest.mark.parametrize(
    "path", ["/hook", f"/body?length={BODY_KEPT}"], ids=["a short answer", "an answer of exactly BODY_KEPT"]
)
def test_an_answer_read_to_its_end_gives_its_connection_back_for_the_next_call(
    network: Network, path: str
) -> None:
    caller = HttpTargetCaller(allow_private=True, resolve=lambda host: ["127.0.0.1"])
    with serve("127.0.0.1") as target:
        answers = [call(caller, f"http://again.example:{target.port}{path}") for _ in range(3)]

    assert [(answer.status_code, answer.error) for answer in answers] == [(200, None)] * 3
    assert len(target.requests) == 3
    assert len(target.connections) == 1


def test_a_redirect_is_the_answer_and_is_never_followed(network: Network) -> None:
    caller = HttpTargetCaller(allow_private=True)
    with serve("127.0.0.2") as elsewhere, serve("127.0.0.1") as target:
        inside = f"http://127.0.0.2:{elsewhere.port}/inside"
        response = call(caller, f"http://127.0.0.1:{target.port}/redirect?to={inside}")

    assert (response.status_code, response.error) == (302, None)
    assert elsewhere.requests == [] and elsewhere.connections == []
    assert network.connections == [("127.0.0.1", target.port)]


PROXY_VARIABLES = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"]


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_proxy_settings_in_the_environment_are_ignored_and_the_call_goes_straight_to_the_checked_address(
    network: Network, monkeypatch: pytest.MonkeyPatch, tls_files: tuple[Path, Path, Path], scheme: str
) -> None:
    """A proxy would make the connection (to whatever it resolves the name to) where no check reaches."""
    for name in ["NO_PROXY", "no_proxy"]:
        monkeypatch.delenv(name, raising=False)
    pool = urllib3.PoolManager(ca_certs=str(tls_files[0]))
    caller = HttpTargetCaller(pool, allow_private=True, resolve=lambda host: ["127.0.0.1"])
    tls = tls_server_context(tls_files) if scheme == "https" else None
    with serve("127.0.0.2") as proxy, serve("127.0.0.1", tls) as target:
        for name in PROXY_VARIABLES:
            monkeypatch.setenv(name, f"http://127.0.0.2:{proxy.port}")
        response = call(caller, f"{scheme}://target.example:{target.port}/hook")

    assert (response.status_code, response.error) == (200, None)
    assert proxy.connections == []
    assert network.connections == [("127.0.0.1", target.port)]
    assert [seen.path for seen in target.requests] == ["/hook"]  # a proxy is sent the whole URL


TRICKLED = ["status", "headers", "body"]


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("part", TRICKLED)
def test_a_target_trickling_its_answer_is_a_timeout_at_the_calls_deadline(
    network: Network, tls_files: tuple[Path, Path, Path], scheme: str, part: str
) -> None:
    """Each piece comes 0.3 s after the last, well inside a 1 s timeout of any one read, and the answer
    would take 12 s or more: the call still ends at its 1 s, as a timeout (retried as one), connection
    closed. The bound leaves a loaded machine its slack; the trickle would take ten times longer."""
    pool = urllib3.PoolManager(ca_certs=str(tls_files[0]))
    caller = HttpTargetCaller(pool, allow_private=True, resolve=lambda host: ["127.0.0.1"])
    tls = tls_server_context(tls_files) if scheme == "https" else None
    with serve("127.0.0.1", tls) as target:
        url = f"{scheme}://target.example:{target.port}/trickle?part={part}&every=0.3"
        started = time.monotonic()
        response = caller.call(TargetRequest(url, "GET", {}, None, timeout_seconds=1))
        held = time.monotonic() - started

    assert (response.status_code, response.error, response.permanent) == (None, "timeout after 1s", False)
    assert 1 <= held < 2.5
    assert 1000 <= response.duration_ms < 2500


def test_a_connection_its_deadline_shut_down_is_closed_and_the_next_call_gets_a_new_one(
    network: Network,
) -> None:
    caller = HttpTargetCaller(allow_private=True, resolve=lambda host: ["127.0.0.1"])
    with serve("127.0.0.1") as target:
        trickled = caller.call(
            TargetRequest(f"http://t.example:{target.port}/trickle?part=body&every=0.3", "GET", {}, None, 1)
        )
        next_call = call(caller, f"http://t.example:{target.port}/hook")

    assert trickled.error == "timeout after 1s"
    assert (next_call.status_code, next_call.body, next_call.error) == (200, "ok", None)
    assert len(target.connections) == 2


def test_a_call_that_ended_in_time_leaves_its_pooled_connection_alone_when_its_deadline_passes(
    network: Network,
) -> None:
    """The deadline of a call that ended is disarmed: it never shuts down the connection, back in the pool,
    that the next call (perhaps another team's) uses."""
    caller = HttpTargetCaller(allow_private=True, resolve=lambda host: ["127.0.0.1"])
    with serve("127.0.0.1") as target:
        url = f"http://t.example:{target.port}/hook"
        first = caller.call(TargetRequest(url, "POST", {}, b"{}", timeout_seconds=1))
        time.sleep(1.2)  # the first call's deadline passes while its connection waits in the pool
        second = caller.call(TargetRequest(url, "POST", {}, b"{}", timeout_seconds=2))

    assert [(r.status_code, r.error) for r in (first, second)] == [(200, None), (200, None)]
    assert len(target.connections) == 1


def test_the_deadline_thread_runs_while_calls_are_watched_and_ends_after_them(network: Network) -> None:
    """One thread watches every caller's calls; it ends once the last deadline it holds has passed, so an
    idle process (a Lambda environment between invocations, a test's caller) keeps no thread for it."""
    caller = HttpTargetCaller(allow_private=True, resolve=lambda host: ["127.0.0.1"])
    with serve("127.0.0.1") as target:
        response = caller.call(TargetRequest(f"http://t.example:{target.port}/hook", "GET", {}, None, 1))
        assert response.status_code == 200

    assert caller.deadlines is HttpTargetCaller().deadlines
    ends = time.monotonic() + 10
    while caller.deadlines.watching and time.monotonic() < ends:
        time.sleep(0.05)
    assert not caller.deadlines.watching


def test_the_lookup_counts_against_the_calls_timeout(network: Network) -> None:
    """A lookup that took the whole timeout leaves no time to call: a timeout, and nothing is sent."""

    def slow(host: str) -> list[str]:
        time.sleep(0.3)
        return ["127.0.0.1"]

    caller = HttpTargetCaller(allow_private=True, resolve=slow)
    with serve("127.0.0.1") as target:
        response = caller.call(TargetRequest(f"http://t.example:{target.port}/hook", "GET", {}, None, 0.2))

    assert (response.status_code, response.error, response.permanent) == (None, "timeout after 0.2s", False)
    assert target.requests == [] and network.connections == []


def test_a_call_to_a_port_targets_may_not_use_is_refused_for_good_and_nothing_is_connected_to(
    network: Network,
) -> None:
    """Checked again at the call: a job written before the rule, or a stack whose setting changed since."""
    lookups: list[str] = []

    def resolve(host: str) -> list[str]:
        lookups.append(host)
        return [PUBLIC]

    response = call(HttpTargetCaller(resolve=resolve), "http://mail.example:25/hook")

    assert (response.status_code, response.permanent) == (None, True)
    assert response.error == (
        "target port 25 refused: targets may use ports 80, 443 and 1024-65535, and the ports the "
        "installation adds with allowed_target_ports (DUETIME_ALLOWED_TARGET_PORTS)"
    )
    assert lookups == [] and network.connections == []


def test_a_port_the_installation_allows_is_called(network: Network) -> None:
    caller = HttpTargetCaller(resolve=lambda host: [PUBLIC], extra_ports=[25])
    response = call(caller, "http://mail.example:25/hook")

    assert (response.status_code, response.permanent) == (None, False)  # no answer: retried
    assert network.connections == [(PUBLIC, 25)]  # the test network refuses it, as a closed port would
