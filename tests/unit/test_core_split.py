"""How a benchmark splits the machine's cores between DynamoDB Local and everything else."""

from __future__ import annotations

from duetime_bench.isolation import split_cores


def test_two_cores_give_the_emulator_one_and_everything_else_the_other() -> None:
    split = split_cores({0, 1})
    assert split is not None
    assert split.emulator == {1} and split.others == {0}
    assert split.describe() == ("DynamoDB Local on cpu 1; duetime, its workers and LocalStack on cpu 0")


def test_the_emulator_gets_the_upper_half_and_the_sets_never_overlap() -> None:
    split = split_cores({2, 3, 5, 7, 11})
    assert split is not None
    assert split.emulator == {5, 7, 11} and split.others == {2, 3}
    assert not split.emulator & split.others


def test_a_single_core_cannot_be_split() -> None:
    assert split_cores({0}) is None
