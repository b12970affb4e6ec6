"""Metrics: what the logic publishes them through (powertools' ``Metrics`` on Lambda), and the dimensions
every metric of an installation carries.

A part of ``duetime.ports``: every port, its docstrings the contract every adapter keeps.
"""

from __future__ import annotations

from typing import Protocol


class MetricsSink(Protocol):
    def add_metric(self, name: str, unit: str, value: float) -> None: ...


def add_counts(metrics: MetricsSink, counts: dict[str, float], unit: str = "Count") -> None:
    """Publish each count that is not zero. A custom metric is billed for every hour it gets a data point,
    so an idle poller publishing zeros would pay for all of them (``capacity/fixed_cost.py``); the stack's
    alarms and dashboard read a missing data point as zero (``infra/cdk/duetime_cdk/observability.py``)."""
    for name, value in counts.items():
        if value:
            metrics.add_metric(name, unit, value)


INSTALLATION_DIMENSION = "installation"


def installation_dimensions(installation: str) -> dict[str, str]:
    """The default dimensions of every metric duetime publishes (with powertools' ``service``): the
    installation's name, so that two stacks in one account and region share no metric and no alarm."""
    return {INSTALLATION_DIMENSION: installation}
