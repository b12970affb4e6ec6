"""The spike chart: starts per second and start lateness over the spike (PNG, matplotlib)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from duetime.execution.worker import WorkReport


def spike_chart(
    path: str,
    minute: datetime,
    start_times: list[float],
    started: list[WorkReport],
    result: dict[str, Any],
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    zero = minute.timestamp()
    per_second = Counter(int(t - zero) for t in start_times)
    seconds = sorted(per_second)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True)
    top.bar(seconds, [per_second[s] for s in seconds], width=1.0, color="#3b73b9")
    top.set_ylabel("runs started / s")
    top.set_title(
        f"duetime spike: {result['jobs']:,} jobs due at {minute:%H:%M} UTC (jitter {result['jitter_s']} s)"
        f" — {result['starts_per_s']:.0f} starts/s, lost {result['lost']}"
    )
    xs = [r.started_at.timestamp() - zero for r in started if r.started_at]
    ys = [r.start_lateness_seconds for r in started if r.started_at]
    bottom.scatter(xs, ys, s=2, alpha=0.4, color="#c0392b")
    bottom.set_ylabel("start lateness (s)")
    bottom.set_xlabel(f"seconds after {minute:%H:%M:%S} UTC")
    bottom.text(
        0.01,
        0.92,
        f"p50 {result['lateness_p50_s']} s   p99 {result['lateness_p99_s']} s   "
        f"max {result['lateness_max_s']} s",
        transform=bottom.transAxes,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
