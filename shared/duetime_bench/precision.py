"""`duetime bench precision`: exact one-time jobs spread over ordinary minutes; how late do they start?"""

from __future__ import annotations

import random
import threading
from datetime import timedelta
from typing import Any

from duetime.domain.claim_plan import initial_state
from duetime.domain.ids import new_job_id
from duetime.domain.models import Job, JobSpec
from duetime.execution.worker import WorkOutcome
from duetime_bench.harness import BenchStack, percentile, wait_until


def run_precision(jobs: int, minutes: float, workers: int = 8, seed: int = 7) -> dict[str, Any]:
    stack = BenchStack.create()
    try:
        now = stack.clock.now()
        window_start = now + timedelta(seconds=20)
        rng = random.Random(seed)
        created = now - timedelta(seconds=1)
        batch: list[Job] = []
        for _ in range(jobs):
            at = (window_start + timedelta(seconds=rng.uniform(0, minutes * 60))).replace(microsecond=0)
            spec = JobSpec.model_validate(
                {
                    "name": "exact",
                    "schedule": {"at": at.isoformat()},
                    "exact": True,
                    "target": {"url": stack.sink.url},
                    "retry": {"max_attempts": 1},
                }
            )
            job = Job(
                **spec.model_dump(), id=new_job_id(), team="bench", created_at=created, updated_at=created
            )
            batch.append(job.model_copy(update={"state": initial_state(job, created)}))
        stack.write_jobs(batch, created)
        stop = threading.Event()
        poller = stack.poller()
        fleet = stack.fleet(processes=2, threads=max(1, workers // 2))
        fleet.start()
        poller_thread = threading.Thread(
            target=poller.run_until, kwargs={"stop": stop.is_set, "sleep": stop.wait}
        )
        poller_thread.start()

        def started() -> int:
            return len({r.run_id for r in fleet.collect() if r.outcome is not WorkOutcome.DUPLICATE})

        wait_until(lambda: started() >= jobs, timeout=minutes * 60 + 120, every=0.5)
        stop.set()
        poller_thread.join(timeout=60)
        fleet.stop()
        lateness = [r.start_lateness_seconds for r in fleet.reports if r.start_lateness_seconds is not None]
        return {
            "jobs": jobs,
            "minutes": minutes,
            "runs_started": started(),
            "lost": jobs - started(),
            "lateness_p50_s": round(percentile(lateness, 0.50), 3),
            "lateness_p99_s": round(percentile(lateness, 0.99), 3),
            "lateness_max_s": round(max(lateness), 3) if lateness else None,
            "lateness_min_s": round(min(lateness), 3) if lateness else None,  # < 0: started early
        }
    finally:
        stack.close()
