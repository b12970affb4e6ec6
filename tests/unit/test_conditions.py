"""Every conditional write is named, explained, and used where the code writes."""

from pathlib import Path

from duetime.adapters.dynamodb import conditions

ADAPTERS = Path(conditions.__file__).parent


def test_each_condition_is_named_after_itself_and_says_why() -> None:
    names = {name for name in dir(conditions) if isinstance(getattr(conditions, name), conditions.Condition)}
    assert {c.name for c in conditions.ALL_CONDITIONS} == names
    for condition in conditions.ALL_CONDITIONS:
        assert getattr(conditions, condition.name) is condition
        assert len(condition.why) > 40 and condition.expression


def test_each_condition_is_used_by_a_write() -> None:
    code = "".join(p.read_text() for p in ADAPTERS.glob("*.py") if p.name != "conditions.py")
    unused = [c.name for c in conditions.ALL_CONDITIONS if f"c.{c.name}" not in code]
    assert unused == []
