"""Job labels and name search: what a team filters its jobs by (``GET /v1/jobs?label=k:v&q=word``).

Both are answered from index items written with the job (``adapters/dynamodb/job_index.py``), never by
reading every job: one item per label pair, and one per distinct word of the name, so ``q`` matches the
start of any word of a job's name, case-insensitively."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

MAX_LABELS = 20
MAX_NAME_WORDS = 16  # the first 16 distinct words of a name are searchable
MAX_WORD_LENGTH = 40  # a longer word is indexed by its first 40 characters
MAX_QUERY_LENGTH = 64
KEY_PATTERN = r"[a-z0-9]([a-z0-9._/-]{0,61}[a-z0-9])?"
VALUE_PATTERN = r"([A-Za-z0-9]([A-Za-z0-9._/-]{0,61}[A-Za-z0-9])?)?"
LABEL_FILTER_PATTERN = f"^{KEY_PATTERN}:{VALUE_PATTERN}$"  # ``key:value``, as the API documents it
_KEY = re.compile(KEY_PATTERN)
_VALUE = re.compile(VALUE_PATTERN)
_WORD = re.compile(r"[^\W_]+")  # letters and digits of any script: "nightly-report_v2" -> nightly, report, v2


def _valid_labels(labels: dict[str, str]) -> dict[str, str]:
    for key, value in labels.items():
        if not _KEY.fullmatch(key):  # fullmatch: "$" would let a trailing newline through
            raise ValueError(
                f"label key {key!r} must be 1 to 63 characters of a-z, 0-9, '.', '_', '/' and '-', starting "
                "and ending with a letter or digit"
            )
        if not _VALUE.fullmatch(value):
            raise ValueError(
                f"label {key!r}: value {value!r} must be at most 63 characters of A-Z, a-z, 0-9, '.', '_', "
                "'/' and '-', starting and ending with a letter or digit (or empty)"
            )
    return labels


Labels = Annotated[
    dict[str, str],
    Field(
        max_length=MAX_LABELS,
        description="up to 20 `key: value` pairs to find the job by (`GET /v1/jobs?label=key:value`). Keys: "
        "1 to 63 of a-z 0-9 . _ / -, starting and ending with a letter or digit; values: the same with A-Z "
        "too, or empty",
    ),
    AfterValidator(_valid_labels),
]


def label_filter(text: str) -> tuple[str, str]:
    """``key:value`` -> (key, value); ``ValueError`` naming what is wrong."""
    key, colon, value = text.partition(":")
    if not colon:
        raise ValueError("label must be key:value, e.g. env:prod")
    _valid_labels({key: value})
    return key, value


def name_words(name: str) -> list[str]:
    """The searchable words of a job name: lowercase, distinct, in order, at most ``MAX_NAME_WORDS``."""
    words: list[str] = []
    for match in _WORD.finditer(name.lower()):
        word = match.group()[:MAX_WORD_LENGTH]
        if word not in words:
            words.append(word)
            if len(words) == MAX_NAME_WORDS:
                break
    return words


def query_words(q: str) -> list[str]:
    """The words of a search; each must begin some word of a matching job's name (a search without a letter or
    digit has none and matches no job). ``ValueError`` when it is too long."""
    if len(q) > MAX_QUERY_LENGTH:
        raise ValueError(f"q is longer than {MAX_QUERY_LENGTH} characters")
    return [m.group()[:MAX_WORD_LENGTH] for m in _WORD.finditer(q.lower())]


def matches_words(name: str, words: list[str]) -> bool:
    """Whether every word of a search begins some word of ``name``."""
    own = name_words(name)
    return all(any(w.startswith(q) for w in own) for q in words)
