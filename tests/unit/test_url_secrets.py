"""Secrets in URLs: what people are shown of a URL, and the origin a target's stored secrets belong to."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from duetime.domain.models import HttpTarget, Job, JobSpec, StoredSecretsWithheld
from duetime.domain.url_secrets import REDACTED, holds_marker, redact_url, secret_name, url_origin

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://example.com/hook?a=1&b=2", None),
        ("https://user:pa55@example.com/hook", "https://user:***@example.com/hook"),
        ("https://:pa55@example.com/", "https://:***@example.com/"),
        ("https://ghp_t0ken@github.com/x", "https://***@github.com/x"),  # a token as the user name
        ("https://sk_live_k3y:@api.stripe.com/v1", "https://***:@api.stripe.com/v1"),  # ... with no password
        ("https://@example.com/", None),
        ("https://example.com/?token=t0k&page=2", "https://example.com/?token=***&page=2"),
        (
            "https://example.com/?api_key=k&apiKey=k&APIKEY=k&key=k",
            "https://example.com/?api_key=***&apiKey=***&APIKEY=***&key=***",
        ),
        (
            "https://example.com/?access_token=a&client_secret=s",
            "https://example.com/?access_token=***&client_secret=***",
        ),
        (
            "https://example.com/?password=p&passwd=p&pwd=p",
            "https://example.com/?password=***&passwd=***&pwd=***",
        ),
        (
            "https://example.com/?sig=s&signature=s&auth=a",
            "https://example.com/?sig=***&signature=***&auth=***",
        ),
        (
            "https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIA%2F1&X-Amz-Signature=ab&X-Amz-Expires=60",
            "https://b.s3.amazonaws.com/k?X-Amz-Credential=***&X-Amz-Signature=***&X-Amz-Expires=60",
        ),
        ("https://example.com/?credentials=c&session=s", "https://example.com/?credentials=***&session=***"),
        ("https://example.com/?api%5Fkey=k", "https://example.com/?api%5Fkey=***"),  # the name as decoded
        ("https://example.com/?keyword=k&monkey=m&author=a&state=s", None),  # names that only look alike
        ("https://example.com/?token=&token", None),  # no value: nothing to hide
        ("https://example.com/cb#access_token=a&state=s", "https://example.com/cb#access_token=***&state=s"),
        ("https://u:p@example.com/a@b?token=t#x", "https://u:***@example.com/a@b?token=***#x"),
    ],
)
def test_redact_url_hides_userinfo_secrets_and_secret_named_query_values_and_nothing_else(
    url: str, shown: str | None
) -> None:
    assert redact_url(url) == (shown or url)
    assert holds_marker(redact_url(url)) == (shown is not None)
    assert not holds_marker(url)


def test_the_userinfo_is_what_precedes_the_last_at_of_the_authority_as_the_call_reads_it() -> None:
    # urllib3 (the caller's parser) ends the authority at a backslash: here the host is a, the rest a path
    assert redact_url("http://a\\@b:c@d/") == "http://a\\@b:c@d/"
    assert redact_url("http://u:p@q:r@host/") == "http://u:***@host/"


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("token", True),
        ("Token", True),
        ("id_token", True),
        ("private_token", True),
        ("hapikey", True),
        ("X-Goog-Signature", True),
        ("AWSAccessKeyId", True),
        ("pw", True),
        ("jwt", True),
        ("page", False),
        ("sort", False),
        ("design", False),
        ("passenger", False),
        ("keys_only", False),
    ],
)
def test_secret_names_are_told_by_their_words(name: str, secret: bool) -> None:
    assert secret_name(name) is secret


@given(st.text(alphabet="ab:@/?#&=\\%tokenpasswd", max_size=60))
def test_redacting_any_text_is_idempotent_and_hides_nothing_where_no_secret_can_be(url: str) -> None:
    shown = redact_url(url)
    assert redact_url(shown) == shown
    if "@" not in url and "=" not in url:
        assert shown == url


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("https://example.com/a", "https://example.com:443/b?x=1", True),
        ("HTTPS://Example.COM/a", "https://example.com/a", True),
        ("http://example.com/", "http://example.com:80/", True),
        ("https://u:p@example.com/", "https://example.com/", True),  # the userinfo is not the origin
        ("https://example.com/", "http://example.com/", False),
        ("https://example.com/", "https://example.com:8443/", False),
        ("https://example.com/", "https://echo.example.net/", False),
        ("https://example.com/", "https://example.com.evil.io/", False),
        ("http://[2001:db8::1]/", "http://[2001:DB8::1]:80/", True),
    ],
)
def test_origins_compare_with_lowercase_scheme_and_host_and_explicit_default_ports(
    a: str, b: str, same: bool
) -> None:
    assert (url_origin(a) == url_origin(b)) is same


def test_an_unreadable_url_has_no_origin() -> None:
    assert url_origin("http://exa mple.com/") is None


# --- the target model ------------------------------------------------------------------------------------

STORED = HttpTarget(
    url="https://u:pa55@api.example.com/hook?token=t0k&page=1",
    headers={"Authorization": "Bearer s3cret", "X-Api-Key": "k3y"},
)


def test_a_target_is_shown_with_its_url_secrets_and_header_values_redacted() -> None:
    shown = STORED.redacted()
    assert shown.url == "https://u:***@api.example.com/hook?token=***&page=1"
    assert shown.headers == {"Authorization": REDACTED, "X-Api-Key": REDACTED}
    assert STORED.url.endswith("token=t0k&page=1")  # a copy: the stored URL is intact


def test_the_shown_url_sent_back_unchanged_is_the_stored_url() -> None:
    sent = STORED.redacted().model_dump()
    restored = STORED.restore_redacted(sent)
    assert restored["url"] == STORED.url and restored["headers"] == STORED.headers


def test_a_shown_url_sent_back_edited_is_refused_naming_the_url() -> None:
    edited = STORED.redacted().url.replace("/hook", "/other")
    sent = STORED.restore_redacted({"url": edited})
    assert sent["url"] == edited  # not the stored URL: its "***" would be sent as the token
    with pytest.raises(ValidationError, match="stands for a secret of the stored URL") as refused:
        HttpTarget.model_validate(sent, context={"now": NOW})
    assert refused.value.errors()[0]["loc"] == ("url",)
    assert HttpTarget.model_validate(sent).url == edited  # what duetime itself shows is valid


def test_a_changed_origin_withholds_stored_header_values_naming_each_header() -> None:
    sent = {
        "url": "https://echo.example.net/anything",
        "headers": {"Authorization": REDACTED, "x-api-key": REDACTED, "X-New": "plain"},
    }
    with pytest.raises(StoredSecretsWithheld) as withheld:
        STORED.restore_redacted(sent)
    assert withheld.value.fields == ["target.headers.Authorization", "target.headers.x-api-key"]
    message = str(withheld.value)
    assert "https://api.example.com:443" in message and "https://echo.example.net:443" in message
    assert "s3cret" not in message and "t0k" not in message and "pa55" not in message


def test_new_values_or_no_headers_may_go_to_a_new_origin() -> None:
    moved = {"url": "https://echo.example.net/", "headers": {"Authorization": "Bearer new"}}
    assert STORED.restore_redacted(moved) == moved
    assert STORED.restore_redacted({"url": "https://echo.example.net/"}) == {
        "url": "https://echo.example.net/"
    }


def test_the_same_origin_spelled_otherwise_keeps_stored_header_values() -> None:
    sent = {"url": "HTTPS://API.example.com:443/v2", "headers": {"Authorization": REDACTED}}
    assert STORED.restore_redacted(sent)["headers"] == {"Authorization": "Bearer s3cret"}


def test_a_webhook_url_is_shown_redacted_and_its_marker_is_refused_from_a_client() -> None:
    job = Job.model_validate(
        {
            "id": "j",
            "team": "t",
            "created_at": NOW,
            "updated_at": NOW,
            "name": "n",
            "schedule": {"rate": "5 minutes"},
            "target": STORED.model_dump(),
            "notify": [
                {"type": "webhook", "url": "https://hooks.example.com/x?token=w3b", "events": ["dead"]}
            ],
        }
    )
    shown = job.redacted()
    assert shown.notify[0].url == "https://hooks.example.com/x?token=***"  # type: ignore[union-attr]
    assert shown.target.url == STORED.redacted().url  # type: ignore[union-attr]
    assert "w3b" in job.notify[0].url  # type: ignore[union-attr]
    copied = shown.model_dump(include=set(JobSpec.model_fields))  # a client copying the job it was shown
    copied["target"] = {"url": "https://e.com"}
    with pytest.raises(ValidationError, match="stands for a secret") as refused:
        JobSpec.model_validate(copied, context={"now": NOW})
    assert refused.value.errors()[0]["loc"][:2] == ("notify", 0)
