"""docs/configuration.md is what ``duetime.settings_reference`` renders from the code, and it describes every
setting: a setting added without a description, or a page not regenerated, fails here."""

from __future__ import annotations

import re
from pathlib import Path

from duetime.settings import Settings
from duetime.settings_reference import (
    CDK_CONFIG,
    CDK_NOTES,
    OTHER_VARIABLES,
    env_name,
    field_comments,
    render,
)

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "configuration.md"
CODE = [ROOT / "shared" / "duetime", ROOT / "functions"]


def test_the_committed_page_is_what_the_generator_renders() -> None:
    assert PAGE.read_text() == render(), (
        "docs/configuration.md is out of date: python -m duetime.settings_reference > docs/configuration.md"
    )


def test_every_setting_has_a_description_and_a_row() -> None:
    fields = Settings.model_fields.items()
    undescribed = [name for name, info in fields if not (info.description or "").strip()]
    assert undescribed == []
    page = PAGE.read_text()
    assert [name for name in Settings.model_fields if f"| `{env_name(name)}` |" not in page] == []


def test_every_cdk_flag_has_a_description_and_a_row() -> None:
    render()  # puts infra/cdk on the path
    from duetime_cdk.config import StackConfig

    comments = field_comments(CDK_CONFIG.read_text(), "StackConfig")
    fields = StackConfig.model_fields
    undescribed = [name for name in fields if not (CDK_NOTES.get(name) or comments.get(name))]
    assert undescribed == []
    page = PAGE.read_text()
    assert [name for name in StackConfig.model_fields if f"| `{name}` |" not in page] == []
    assert set(CDK_NOTES) <= set(StackConfig.model_fields), "a note for a flag that is gone"


def test_every_duetime_variable_the_code_reads_is_listed() -> None:
    """A ``DUETIME_`` name in the code (outside the benchmarks and settings.py, which builds them) is a
    setting's or one of the others the page lists."""
    sources = "\n".join(
        path.read_text()
        for folder in CODE
        for path in folder.rglob("*.py")
        if path.name not in {"settings.py", "settings_reference.py"} and "bench" not in path.parts
    )
    named = set(re.findall(r"\bDUETIME_[A-Z][A-Z0-9_]*", sources))
    known = {env_name(name) for name in Settings.model_fields} | set(OTHER_VARIABLES)
    assert sorted(named - known) == []


def test_field_comments_joins_the_lines_above_and_the_inline_one() -> None:
    source = (
        "class Config(BaseModel):\n"
        "    # Why this one:\n"
        "    # two lines.\n"
        "    first: int = 1  # and more\n"
        "    second: str = '#' \n"
        "\n"
        "    # ...a note\n"
        "    third: bool = True\n"
        "    @property\n"
        "    def fourth(self) -> int:\n"
        "        # not a field\n"
        "        x: int = 2\n"
    )
    assert field_comments(source, "Config") == {
        "first": "Why this one: two lines. and more",
        "third": "a note",
    }
