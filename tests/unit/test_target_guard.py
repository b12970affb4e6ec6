"""The SSRF guard refuses non-public targets in every spelling, and names that resolve to them."""

import pytest

from duetime.target_guard import TargetRefused, check_target_url


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
