"""The upgrade drill's accounting: what should have run, against what the target saw.

Pure: the drill hands it the fires it expected (a run id and the instant the run should have started) and
the calls its target recorded (each with the run id it carried as its idempotency key), and the phases'
windows. Nothing here reads a clock or a store.

* **lost**: an expected fire due at or before the cut-off with no call at all carrying its run id.
* **repeated**: a run whose target was called again after a call that succeeded (2xx), or twice with the
  same attempt number: what at-least-once allows and the idempotency key is for, counted per run id. A
  retry after a failed attempt is not a repeat (it is the next attempt).
* **late**: the first call's arrival minus the instant the run should have started (the nominal time plus
  the job's jitter, or a trigger's instant), per fire; ``late_max_s`` the largest.

A phase owns the fires due in its window ``[start, end)`` and the calls received in it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from duetime.local.demo_target import Call


@dataclass(frozen=True)
class ExpectedFire:
    run_id: str
    job: str  # the drill's name for the job (cron-exact, slow, ...)
    due_at: float  # epoch seconds: when the run should start


@dataclass(frozen=True)
class TargetCall:
    run_id: str
    attempt: int
    status: int  # what the target answered (0: it had not answered when read)
    received_at: float  # epoch seconds
    replayed: bool = False  # answered from the target's saved answer for the key


def target_calls(recorded: Iterable[Call]) -> list[TargetCall]:
    """The calls a ``DemoTarget`` recorded, by the run id each carried (its idempotency key) and attempt."""
    return [
        TargetCall(
            run_id=c.headers.get("idempotency-key") or c.headers.get("x-duetime-run-id", ""),
            attempt=int(c.headers.get("x-duetime-attempt") or 0),
            status=c.status,
            received_at=c.received_at,
            replayed=c.replayed,
        )
        for c in recorded
    ]


@dataclass(frozen=True)
class PhaseWindow:
    name: str
    start: float
    end: float


@dataclass
class Tally:
    """What one phase (or the whole drill) saw."""

    due: int = 0  # expected fires due in the window (and by the cut-off)
    called: int = 0  # of those, with at least one call
    lost: list[str] = field(default_factory=list)
    calls: int = 0  # calls received in the window, for any run
    repeated: dict[str, int] = field(default_factory=dict)  # run id -> calls, for runs repeated in the window
    late_max_s: float | None = None
    late_p50_s: float | None = None
    latest: list[tuple[float, str, str]] = field(default_factory=list)  # (seconds late, job, run id), top 3
    jobs: dict[str, int] = field(default_factory=dict)  # expected fires due, per drill job

    def as_dict(self) -> dict[str, Any]:
        return {
            "due": self.due,
            "called": self.called,
            "lost": len(self.lost),
            "lost_runs": sorted(self.lost),
            "calls": self.calls,
            "repeated": len(self.repeated),
            "repeated_runs": dict(sorted(self.repeated.items())),
            "late_max_s": self.late_max_s,
            "late_p50_s": self.late_p50_s,
            "latest": [{"late_s": late, "job": job, "run_id": run} for late, job, run in self.latest],
            "due_by_job": dict(sorted(self.jobs.items())),
        }


def is_success(status: int) -> bool:
    return 200 <= status < 300


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def tally(
    expected: Iterable[ExpectedFire],
    calls: Iterable[TargetCall],
    cutoff: float,
    start: float = float("-inf"),
    end: float = float("inf"),
) -> Tally:
    """The fires due in ``[start, end)`` and by ``cutoff``, and the calls received in ``[start, end)``."""
    by_run: dict[str, list[TargetCall]] = defaultdict(list)
    all_calls = list(calls)
    for call in all_calls:
        by_run[call.run_id].append(call)
    result = Tally()
    lateness: list[float] = []
    for fire in expected:
        if not (start <= fire.due_at < end) or fire.due_at > cutoff:
            continue
        result.due += 1
        result.jobs[fire.job] = result.jobs.get(fire.job, 0) + 1
        seen = by_run.get(fire.run_id)
        if not seen:
            result.lost.append(fire.run_id)
            continue
        result.called += 1
        lateness.append(min(c.received_at for c in seen) - fire.due_at)
        result.latest = sorted([*result.latest, (round(lateness[-1], 3), fire.job, fire.run_id)])[::-1][:3]
    result.calls = sum(1 for c in all_calls if start <= c.received_at < end)
    for run_id, seen in by_run.items():
        # a repeat belongs to the window of the call that made it one
        if start <= repeat_instant(seen) < end:
            result.repeated[run_id] = len(seen)
    result.late_max_s = round(max(lateness), 3) if lateness else None
    median = _median(lateness)
    result.late_p50_s = round(median, 3) if median is not None else None
    return result


def repeat_instant(calls: Sequence[TargetCall]) -> float:
    """When a run's calls became a repeat: the arrival of a call after a successful one, or of a second call
    with one attempt number; infinity if they hold none."""
    seen_attempts: set[int] = set()
    succeeded = False
    for call in sorted(calls, key=lambda c: c.received_at):
        if succeeded or call.attempt in seen_attempts:
            return call.received_at
        seen_attempts.add(call.attempt)
        succeeded = is_success(call.status)
    return float("inf")


def account(
    expected: Sequence[ExpectedFire],
    calls: Sequence[TargetCall],
    phases: Sequence[PhaseWindow],
    cutoff: float,
) -> dict[str, Any]:
    """The whole drill's figures and each phase's."""
    overall = tally(expected, calls, cutoff)
    return {
        "overall": overall.as_dict(),
        "phases": {p.name: tally(expected, calls, cutoff, p.start, p.end).as_dict() for p in phases},
    }
