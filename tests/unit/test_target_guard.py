"""The SSRF guard refuses non-public targets in every spelling, and names that resolve to them; the addresses
it checked are the ones a call may connect to."""

import pytest

from duetime.target_guard import HostDoesNotResolve, TargetRefused, check_target_url, checked_addresses


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


def test_the_checked_addresses_are_the_resolvers_in_its_order_each_as_it_was_checked() -> None:
    answers = ["2606:2800:220:1:248:1893:25c8:1946", "93.184.216.34", "::ffff:93.184.216.35"]
    assert checked_addresses("hooks.example.com", resolve=lambda host: answers) == [
        "2606:2800:220:1:248:1893:25c8:1946",
        "93.184.216.34",
        "93.184.216.35",
    ]


def test_a_name_resolving_to_nothing_does_not_resolve() -> None:
    with pytest.raises(HostDoesNotResolve, match=r"empty\.example\.com does not resolve"):
        checked_addresses("empty.example.com", resolve=lambda host: [])
