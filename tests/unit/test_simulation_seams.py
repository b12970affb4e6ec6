"""The midnight simulation runs the real worker, twin and queue, plugging in only at their public seams.

Were a simulation class to override a private member of the class it stands in for, or import one, a
change to the production code there would not show in the simulation's figures: these tests fail then.
"""

from __future__ import annotations

import ast
import inspect
from collections import Counter

import pytest

from duetime.adapters.memory import MemoryQueue, MemoryStore
from duetime.capacity.midnight_model import AwsModel
from duetime.execution.worker import TargetCall, Worker
from duetime.ports import TargetResponse
from duetime_bench import midnight
from duetime_bench.midnight import SimQueue, SimStore, SimWorker, run_midnight


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@pytest.mark.parametrize(
    ("simulated", "real"), [(SimStore, MemoryStore), (SimQueue, MemoryQueue), (SimWorker, Worker)]
)
def test_no_simulation_class_overrides_a_private_member_of_the_real_one(simulated: type, real: type) -> None:
    own = {name for name in vars(simulated) if _private(name)}
    real_members = {name for cls in real.__mro__ for name in vars(cls)}

    assert own & real_members == set()


def test_the_simulation_imports_no_private_name_from_outside_the_benchmarks() -> None:
    tree = ast.parse(inspect.getsource(midnight))
    private = [
        f"{node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and not node.module.startswith("duetime_bench")
        for alias in node.names
        if _private(alias.name)
    ]

    assert private == []


def test_a_change_to_the_real_worker_shows_in_the_simulation(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(self: Worker, call: TargetCall, lease_until: object) -> TargetResponse:
        return TargetResponse(None, "", "refused by the test", 0, permanent=True)

    monkeypatch.setattr(Worker, "call_target", refused)

    result = run_midnight(300, model=AwsModel())

    assert "succeeded" not in result["run_statuses"]
    assert sum(Counter(result["run_statuses"]).values()) == 300


def test_the_simulation_reads_and_sets_no_private_attribute_of_a_production_object() -> None:
    """Besides overrides and imports: ``poller.preload._sender = ...`` or ``len(preload._pending)`` would tie
    the figures to a private detail; only the simulation's own classes' private members may be reached."""
    own = {
        name
        for cls in vars(midnight).values()
        if inspect.isclass(cls)
        for name in vars(cls)
        if _private(name)
    }
    reached = {
        (node.lineno, ast.unparse(node.value), node.attr)
        for node in ast.walk(ast.parse(inspect.getsource(midnight)))
        if isinstance(node, ast.Attribute) and _private(node.attr) and ast.unparse(node.value) != "self"
    }

    assert {hit for hit in reached if hit[2] not in own} == set()
