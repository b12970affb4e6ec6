"""Label rules and the name words a search matches (pure)."""

from __future__ import annotations

import pytest

from duetime.domain.job_history import HIDDEN_CHANGE, change, changed_fields
from duetime.domain.labels import MAX_NAME_WORDS, label_filter, matches_words, name_words, query_words
from duetime.domain.models import Job

JOB = {
    "name": "nightly",
    "schedule": {"cron": "0 0 * * *", "timezone": "UTC"},
    "target": {"url": "https://example.com/hook", "headers": {"X-Key": "s3cret"}},
    "id": "j1",
    "team": "t",
    "created_at": "2026-12-01T00:00:00Z",
    "updated_at": "2026-12-01T00:00:00Z",
}


def test_name_words_are_lowercase_distinct_runs_of_letters_and_digits_in_order() -> None:
    assert name_words("Nightly billing-report_v2 BILLING") == ["nightly", "billing", "report", "v2"]
    assert name_words("Größe prüfen 東京") == ["größe", "prüfen", "東京"]
    assert len(name_words(" ".join(f"w{i}" for i in range(40)))) == MAX_NAME_WORDS


def test_a_search_matches_when_each_of_its_words_begins_some_word_of_the_name() -> None:
    assert matches_words("Nightly billing-report", query_words("BILL rep"))
    assert not matches_words("Nightly billing-report", query_words("illing"))
    assert query_words("--") == [] and matches_words("anything", [])
    with pytest.raises(ValueError, match="longer than 64"):
        query_words("x" * 65)


@pytest.mark.parametrize("text", ["env:prod", "env:", "a.b/c-d_e:V1.2", "k:" + "v" * 63])
def test_a_label_filter_is_key_colon_value(text: str) -> None:
    key, value = label_filter(text)
    assert f"{key}:{value}" == text


@pytest.mark.parametrize("text", ["env", "Env:prod", "env:prod\n", "env:-x", ":prod", "env:pr od"])
def test_a_malformed_label_filter_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        label_filter(text)


def test_a_change_names_its_action_and_fields_with_header_values_redacted() -> None:
    before = Job.model_validate(JOB)
    paused = before.model_copy(update={"paused": True})
    assert change(before, paused, before.created_at, "tok_x").action == "pause"
    assert change(paused, before, before.created_at, "tok_x").action == "resume"
    assert change(None, before, before.created_at, "tok_x").action == "create"
    assert change(before, None, before.created_at, "tok_x").action == "delete"
    renamed = Job.model_validate(
        {**JOB, "name": "n2", "target": {**JOB["target"], "headers": {"X-Key": "new"}}}
    )  # type: ignore[dict-item]
    fields = changed_fields(before, renamed)
    assert fields["name"] == {"from": "nightly", "to": "n2"}
    assert fields["target"] == HIDDEN_CHANGE  # only a header value changed: said, and neither value shown
    assert "s3cret" not in str(fields) and "new" not in str(fields["target"])
    long_body = Job.model_validate({**JOB, "target": {**JOB["target"], "body": "x" * 2000}})  # type: ignore[dict-item]
    assert changed_fields(before, long_body)["target"]["to"] == "<2110 bytes of JSON>"
