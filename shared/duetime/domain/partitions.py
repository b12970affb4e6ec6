"""Partition groups: the ranges a poller serves, as settings and rules name them (``"0-15"``, ``"0-7,32-39"``)
and as their leases are keyed."""

from __future__ import annotations

from collections.abc import Sequence

from duetime.domain.ids import PARTITIONS


def parse_partitions(text: str) -> list[int]:
    """``"0-15"``, ``"0,1,2"``, ``"0-7,32-39"`` or ``"all"`` -> partition numbers."""
    if text.strip() == "all":
        return list(range(PARTITIONS))
    partitions: list[int] = []
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        partitions.extend(range(int(low), int(high or low) + 1))
    if not partitions or any(not 0 <= p < PARTITIONS for p in partitions):
        raise ValueError(f"partitions must lie in 0..{PARTITIONS - 1}")
    return sorted(set(partitions))


def group_label(partitions: Sequence[int]) -> str:
    """A partition group's name in its lease key: its ranges, e.g. ``"0-15"`` or ``"0-7,32-39"``."""
    ranges: list[str] = []
    ordered = sorted(set(partitions))
    start = previous = ordered[0]
    for partition in [*ordered[1:], None]:
        if partition is not None and partition == previous + 1:
            previous = partition
            continue
        ranges.append(f"{start}-{previous}" if previous != start else f"{start}")
        if partition is not None:
            start = previous = partition
    return ",".join(ranges)
