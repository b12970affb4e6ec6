"""The OpenAPI document's patterns come from the models' fields: nothing the document forbids is accepted,
and what it allows is refused only for the rules it states in words (never fires, unknown zone, ...)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from duetime.domain.models import (
    CRON_PATTERN,
    HEADER_NAME_PATTERN,
    RATE_PATTERN,
    CronSchedule,
    HttpTarget,
    JobSpec,
    RateSchedule,
)
from duetime.domain.url_secrets import REDACTED

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
CRON_TEXT = st.text(alphabet=" \t\n\u00a00123456789*/,-@aAdilyJANmon", max_size=24)
RATE_TEXT = st.text(alphabet=" \t\n0123456789-minutesohurday\u0665", max_size=16)


def refusal(model: type[Any], **fields: Any) -> str | None:
    try:
        model.model_validate(fields)
    except ValidationError as exc:
        return str(exc.errors()[0]["msg"])
    return None


# (model, field, its pattern, text to try, what a refusal of a value inside the pattern may say)
DOCUMENTED = [
    (CronSchedule, "cron", CRON_PATTERN, CRON_TEXT, ("never", "range", "invalid", "out of", "longer than")),
    (RateSchedule, "rate", RATE_PATTERN, RATE_TEXT, ("366 days", "longer than")),
]


@pytest.mark.parametrize(("model", "field", "pattern", "text", "_"), DOCUMENTED)
@given(data=st.data())
def test_a_value_outside_the_documented_pattern_is_refused(
    model: type[Any], field: str, pattern: str, text: st.SearchStrategy[str], _: Any, data: st.DataObject
) -> None:
    value = data.draw(text)
    if not re.search(pattern, value):
        assert refusal(model, **{field: value}) is not None


@pytest.mark.parametrize(("model", "field", "pattern", "_", "stated"), DOCUMENTED)
@given(data=st.data())
def test_a_value_inside_the_pattern_is_refused_only_for_what_the_description_says(
    model: type[Any], field: str, pattern: str, _: Any, stated: tuple[str, ...], data: st.DataObject
) -> None:
    value = data.draw(st.from_regex(pattern, fullmatch=True).filter(lambda t: "\n" not in t))
    reason = refusal(model, **{field: value})
    assert reason is None or any(words in reason for words in stated), (value, reason)


@given(st.text(max_size=12))
def test_a_header_name_outside_the_documented_pattern_is_refused(name: str) -> None:
    if not re.search(HEADER_NAME_PATTERN, name) or "\n" in name:
        assert refusal(HttpTarget, url="https://e.com", headers={name: "v"}) is not None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"cron": "@DAILY"}, "unknown cron alias"),  # aliases are the lowercase names the document lists
        ({"cron": "0 0 * * *\n"}, None),
        ({"cron": "0\n0 * * *"}, "5 fields"),
    ],
)
def test_cron_edges(fields: dict[str, Any], message: str | None) -> None:
    reason = refusal(CronSchedule, **fields)
    assert reason is not None and (message is None or message in reason), reason


def test_tabs_separate_cron_fields_and_are_normalised() -> None:
    assert CronSchedule(cron=" 0\t0  * * *\t").cron == "0 0 * * *"


def test_a_header_name_with_a_trailing_newline_is_refused() -> None:
    # Python's ``$`` matches before a final newline: "X-A\n" used to pass as a header name
    assert refusal(HttpTarget, url="https://e.com", headers={"X-A\n": "v"}) is not None


def test_the_redaction_marker_is_refused_from_a_client_only() -> None:
    body = {"name": "n", "schedule": {"rate": "5 minutes"}, "target": {"url": "https://e.com"}}
    body["target"]["headers"] = {"Authorization": REDACTED}
    with pytest.raises(ValidationError, match="stands for a stored value"):
        JobSpec.model_validate(body, context={"now": NOW})
    assert JobSpec.model_validate(body, context={"stored": True}).target.headers == {
        "Authorization": REDACTED
    }


def test_redacted_shows_names_only_and_restore_keeps_stored_values() -> None:
    stored = HttpTarget(url="https://e.com", headers={"Authorization": "secret", "X-B": "b"})
    assert stored.redacted().headers == {"Authorization": REDACTED, "X-B": REDACTED}
    assert stored.headers["Authorization"] == "secret"  # a copy
    sent = {"url": "https://e.com", "headers": {"authorization": REDACTED, "X-B": "new", "X-C": REDACTED}}
    assert stored.restore_redacted(sent)["headers"] == {
        "authorization": "secret",
        "X-B": "new",
        "X-C": REDACTED,
    }
    assert stored.restore_redacted(None) is None and stored.restore_redacted({"url": "u"}) == {"url": "u"}
