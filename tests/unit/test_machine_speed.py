"""The yardstick beside `bench runcpu`: a fixed workload's CPU, which no change of duetime's code moves."""

from __future__ import annotations

import ast
from pathlib import Path

from duetime_bench import machine_speed


def test_the_yardstick_is_a_positive_figure_in_milliseconds() -> None:
    assert machine_speed.reference_cpu_ms(repeats=1) > 0


def test_the_yardstick_imports_nothing_of_duetime_so_no_change_of_the_code_moves_it() -> None:
    tree = ast.parse(Path(machine_speed.__file__).read_text())
    imported = {
        name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in (
            [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
        )
    }
    assert imported and not any(name.startswith("duetime") for name in imported)


def test_every_step_of_the_workload_counts_so_none_can_be_skipped() -> None:
    assert machine_speed._workload() > machine_speed._ROUNDS
