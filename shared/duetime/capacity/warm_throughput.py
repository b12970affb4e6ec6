"""Warm throughput: the read and write units a second each DynamoDB table and index takes at once.

A new on-demand table, and each of its GSIs, takes 4,000 write units and 12,000 read units a second at
once (AWS, "Understanding DynamoDB warm throughput" and "Pre-warming a table for on-demand capacity mode",
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput.html); more than twice its
previous peak within 30 minutes can throttle. Pre-warming (``WarmThroughput`` on CreateTable/UpdateTable, or
on the ``AWS::DynamoDB::GlobalTable`` and each of its ``GlobalSecondaryIndexes``: ``ReadUnitsPerSecond``,
``WriteUnitsPerSecond``, integers of at least 1, updated without interruption) raises that, per table and
per index. AWS: the default values are free; raising them is charged for those requests (a one-time
purchase: it adds nothing to the monthly bill of an idle installation; AWS gives the price on its DynamoDB
pricing page, which ``prices.py`` does not hold); once raised they cannot be lowered; a table is pre-warmed
up to its account's table quota in the Region (40,000 units a second by default, raised in Service Quotas).

The stack's ``warm_write_units`` and ``warm_read_units`` settings and ``duetime plan`` name the tables and
indexes as ``jobs``, ``jobs/due``, ``jobs/team-jobs``, ``runs``, ``runs/reap`` and ``control``: a table by its
role, an index as ``<table>/<index name>``. Written ``jobs:9000,runs/reap:5000`` (``-c`` takes a string) or
as an object of those names (``cdk.json``); 0 for a name: no warm throughput (what a new table takes).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from duetime.adapters.dynamodb.tables import TableNames, table_definitions

NEW_TABLE_WRITE_UNITS = 4_000  # a new on-demand table's (and GSI's) warm write throughput
NEW_TABLE_READ_UNITS = 12_000  # ... and read throughput
TABLE_QUOTA_UNITS = 40_000  # the default table-level quota, reads and writes each, per table and index
ROLES = ("jobs", "runs", "control")  # table_definitions' order (the CDK app's Storage uses the same)

# Write units a second each table and index is pre-warmed to by default: what the seed's midnight (500,000
# jobs due at 00:00, all exact) asks of it when its claims are paced to end within 45 s (``plan_midnight.
# SPIKE_CLAIM_SECONDS``: 11,111 claims a second, each run's start as fast) on the default stack, at the
# pace's 90% of what a table takes (``duetime.scheduling.claim_pace.PACE_HEADROOM``), rounded up to a
# thousand: a claim and its start write 1 unit on the jobs table, 2 on its due index, 3.06 on the runs table,
# 2 on the control table (the team's slots). Two are set above the plan's figure, where the simulation of that
# midnight finds writes in bursts the plan's even pace leaves out: the runs table's reap index (its tickets
# settle in bursts that reach whatever the index takes) and the control table (the workers' slot writes); at
# these values the simulation finds no table or index over what it takes (BENCHMARKS.md, "The midnight").
# ``tests/unit/test_plan.py`` checks the plan asks no more than these.
DEFAULT_WARM_WRITE_UNITS: dict[str, int] = {
    "jobs": 13_000,
    "jobs/due": 25_000,
    "runs": 38_000,
    "runs/reap": 15_000,
    "control": 28_000,
}
# Reads: the midnight's reads (~2.7 read units a run, spread over the tables) stay under a new table's
# 12,000 a second on the default stack; none bought by default.
DEFAULT_WARM_READ_UNITS: dict[str, int] = {}


def targets() -> tuple[str, ...]:
    """Every table and index that takes warm throughput, by the names above."""
    names: list[str] = []
    for role, definition in zip(ROLES, table_definitions(TableNames()), strict=True):
        names.append(role)
        names += [f"{role}/{index['IndexName']}" for index in definition.get("GlobalSecondaryIndexes", [])]
    return tuple(names)


def parse_units(value: Any, floor: int) -> dict[str, int]:
    """``"runs:9000,control:7000"`` (or a mapping of the same) -> ``{"runs": 9000, "control": 7000}``. Each
    name must be a table or index of ``targets()``, each value 0 (none) or at least ``floor`` (what a new
    table already takes: less would buy nothing). ValueError says what is wrong."""
    if isinstance(value, str):
        pairs: dict[str, Any] = {}
        for item in (part.strip() for part in value.split(",")):
            if not item:
                continue
            name, colon, units = item.rpartition(":")
            if not colon or not name.strip():
                raise ValueError(f"{item!r} is not <table or index>:<units a second>, e.g. runs:9000")
            pairs[name.strip()] = units.strip()
        value = pairs
    if not isinstance(value, Mapping):
        raise ValueError("must be <table or index>:<units a second>,... e.g. runs:9000,control:7000")
    known = targets()
    parsed: dict[str, int] = {}
    for name, units in value.items():
        if name not in known:
            raise ValueError(f"{name!r} is no table or index; they are: {', '.join(known)}")
        try:
            number = int(str(units))
        except ValueError:
            raise ValueError(f"{name}: {units!r} is not a whole number of units a second") from None
        if number != 0 and not floor <= number:
            raise ValueError(
                f"{name}: {number:,} is under the {floor:,} a new on-demand table already takes: give 0 (no "
                f"warm throughput) or at least {floor:,}"
            )
        parsed[name] = number
    return parsed


def format_units(units: Mapping[str, int]) -> str:
    """The ``-c`` form of a setting: ``runs:9000,control:7000``, in ``targets()``' order."""
    return ",".join(f"{name}:{units[name]}" for name in targets() if name in units)


def rounded_up(units: float) -> int:
    """Units a second as the plan buys them: up to the next thousand."""
    return math.ceil(units / 1000) * 1000
