"""The chaos run's watched and notified jobs (``duetime chaos``): a job held to a success deadline and a job
whose dead runs tell a webhook, run under the same faults as the rest, and what the run checks of them.

* **Deadlines:** every watched time whose deadline passed by the final check has a ``missed`` alert if and
  only if its run had not succeeded by its deadline (``duetime.execution.deadlines.met``): the first job's
  times are met unless the faults delay them, the second's are all missed.
* **Notifications:** every dead run of the notified job is one notice, and the notifications the webhook
  received (each id counted once, its ``count`` the notices it stands for) plus the notices still waiting in
  the outbox (a quiet window runs 5 minutes) add up to the dead runs, never more. Fewer means notices lost:
  a worker killed between its dead result and queueing the notice loses it (RELIABILITY.md), so they are
  reported as a figure, not a violation. A notification sent again must carry the same count.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from duetime.adapters.aws.alerts import StoredAlerts
from duetime.adapters.dynamodb.outbox import KEY_PREFIX as OUTBOX_KEY_PREFIX
from duetime.adapters.dynamodb.store import DynamoStore
from duetime.domain.claim_plan import initial_state
from duetime.domain.ids import new_job_id
from duetime.domain.models import Job, JobSpec, Run, RunStatus
from duetime.execution.deadlines import check_deadlines, met
from duetime.local.demo_target import Call
from duetime.ports import DeadlineWatch
from duetime_bench.harness import BenchStack

WATCH_TEAM = "team-b"
NOTIFY_GROUP = "notify"  # the sink's calls of this group are notifications, not runs
DEADLINE_SECONDS = 60


def watch_jobs(stack: BenchStack, created: datetime) -> list[Job]:
    """A job watched by a one-minute success deadline (its times met, unless the faults delay them), and a
    job whose runs die at once (503, one attempt) and tell a webhook of each, watched too (its times
    missed)."""
    sink = stack.sink.url
    specs = [
        {
            "name": "chaos watched",
            "schedule": {"rate": "1 minute"},
            "target": {"url": f"{sink}?group={WATCH_TEAM}&watched=1"},
            "jitter_seconds": 5,
            "success_deadline_seconds": DEADLINE_SECONDS,
        },
        {
            "name": "chaos notified",
            "schedule": {"rate": "1 minute"},
            "target": {"url": f"{sink}?group={WATCH_TEAM}&status=503&notified=1"},
            "jitter_seconds": 5,
            "retry": {"max_attempts": 1},
            "success_deadline_seconds": DEADLINE_SECONDS,  # watched too: every time of it is missed
            "notify": [{"type": "webhook", "url": f"{sink}?group={NOTIFY_GROUP}", "events": ["dead"]}],
        },
    ]
    jobs = []
    for body in specs:
        spec = JobSpec.model_validate(body)
        job = Job(
            **spec.model_dump(), id=new_job_id(), team=WATCH_TEAM, created_at=created, updated_at=created
        )
        jobs.append(job.model_copy(update={"state": initial_state(job, created)}))
    return jobs


def final_deadline_check(stack: BenchStack, now: datetime) -> None:
    """A last deadline check with the faults off, as a poller's next pass would make it."""
    alerts = StoredAlerts(stack.store)
    check_deadlines(stack.store, stack.store, stack.store, alerts, range(64), now)


def watch_figures(
    stack: BenchStack, jobs: Sequence[Job], runs: Mapping[str, Run], calls: Sequence[Call], now: datetime
) -> tuple[dict[str, Any], list[str]]:
    """The figures and violations of the watched and notified jobs (see the module's docstring)."""
    watched_ids = {j.id for j in jobs if j.success_deadline_seconds is not None}
    notified_ids = {j.id for j in jobs if j.notify}
    alerts = stack.store.list_alerts(WATCH_TEAM)
    missed = [a["run_id"] for a in alerts if a["kind"] == "missed"]
    judged = {
        run.run_id: met(run, watch)
        for run in runs.values()
        if run.job_id in watched_ids
        and (watch := DeadlineWatch.of(run)) is not None
        and watch.deadline_at < now
    }
    violations = []
    wrong = sorted(run_id for run_id, was_met in judged.items() if was_met == (run_id in missed))
    if wrong:
        violations.append(
            f"{len(wrong)} watched times whose missed alert disagrees with their run, e.g. {wrong[:2]}"
        )
    stray = sorted(set(missed) - set(judged))
    if stray:
        violations.append(
            f"{len(stray)} missed alerts for times not watched or not yet due, e.g. {stray[:2]}"
        )

    dead = sum(1 for r in runs.values() if r.job_id in notified_ids and r.status is RunStatus.DEAD)
    sent = [json.loads(c.body) for c in calls if c.query.get("group") == NOTIFY_GROUP]
    counts: dict[str, set[int]] = {}
    for notification in sent:
        counts.setdefault(notification["notification_id"], set()).add(notification["count"])
    if any(len(values) > 1 for values in counts.values()):
        violations.append("a notification sent again with another count")
    notified = sum(min(values) for values in counts.values())
    waiting = _waiting_notices(stack.store, notified_ids)
    if notified + waiting > dead:
        violations.append(f"more notices ({notified} sent + {waiting} waiting) than dead runs ({dead})")
    figures = {
        "deadlines": {
            "watched_times_judged": len(judged),
            "met": sum(judged.values()),
            "missed_alerts": len(set(missed)),
            "missed_alert_repeats": len(missed) - len(set(missed)),
        },
        "notifications": {
            "dead_runs": dead,
            "notifications_sent": len(counts),
            "repeats_sent": len(sent) - len(counts),
            "notices_delivered": notified,
            "notices_waiting": waiting,
            "notices_lost": dead - notified - waiting,
        },
    }
    return figures, violations


def _waiting_notices(store: DynamoStore, job_ids: set[str]) -> int:
    """The notices of ``job_ids`` still in the outbox (pending, not yet delivered)."""
    waiting = 0
    for job_id in job_ids:
        items = store.client.query(
            TableName=store.names.runs,
            KeyConditionExpression="job_id = :k",
            ExpressionAttributeValues={":k": {"S": OUTBOX_KEY_PREFIX + job_id}},
            ConsistentRead=True,
        )["Items"]
        waiting += sum(int(item["pending"]["N"]) for item in items)
    return waiting
