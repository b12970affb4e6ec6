"""Records the shapes this release stores and queues, in the stored format it writes once finalized, into
tests/fixtures/formats/<its version>/ (run once per release, when it is cut; the folders of earlier releases
are never rewritten), or into the folder named as its argument (``next``: the release being made, while the
changelog says Unreleased). docs/stored-formats.md."""

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from duetime import __version__
from duetime.adapters.aws.sqs import encode
from duetime.adapters.dynamodb.codec import job_to_item, run_to_item, stamped, string_attribute
from duetime.adapters.dynamodb.jobs import mark_key
from duetime.adapters.dynamodb.quarantine_record import DynamoQuarantineRecord
from duetime.adapters.dynamodb.reconciler import DynamoReconciler
from duetime.adapters.dynamodb.table_modes import DynamoTableModes
from duetime.adapters.dynamodb.tables import TableNames
from duetime.domain.claim_plan import PlannedRun, new_run
from duetime.domain.ids import partition_of
from duetime.domain.models import Job, RunResult, RunStatus, Team
from duetime.domain.stored_format import FORMAT
from duetime.ports import ReconcilerReport, RunMessage, UnreadableRow

folder = sys.argv[1] if len(sys.argv) > 1 else __version__
out = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "formats" / folder
out.mkdir(parents=True, exist_ok=True)
now = datetime(2026, 12, 7, 3, 0, tzinfo=UTC)
spec = {
    "name": "nightly export",
    "key": "billing/nightly-export",
    "labels": {"env": "prod"},
    "schedule": {"cron": "30 2 * * *", "timezone": "Europe/Paris"},
    "dst": {"gap": "skip", "overlap": "both"},
    "target": {
        "url": "https://billing.example.com/export",
        "method": "POST",
        "headers": {"X-Key": "s3cret"},
        "body": '{"a": 1}',
    },
    "retry": {"max_attempts": 3, "backoff_seconds": [10, 30]},
    "misfire": "run_once",
    "overlap": "allow",
    "notify": [{"type": "webhook", "url": "https://hooks.example.com/x", "events": ["dead"]}],
}
job = Job.model_validate(
    {
        **spec,
        "id": "01JDZ3K6R2V9Q8T7S6P5N4M3K2",
        "team": "team-a",
        "created_at": now,
        "updated_at": now,
        "state": {
            "next_nominal_at": now + timedelta(hours=23, minutes=30),
            "next_fire_at": now + timedelta(hours=23, minutes=31),
            "last_scheduled_at": now - timedelta(minutes=30),
            "version": 4,
        },
    }
)
sqs_spec = {
    **spec,
    "name": "queue ping",
    "key": None,
    "dst": None,
    "notify": [],
    "schedule": {"rate": "5 minutes"},
    "target": {
        "type": "sqs",
        "queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/pings",
        "message": "ping",
    },
}
sqs_job = Job.model_validate(
    {**sqs_spec, "id": "01JDZ3K6R2V9Q8T7S6P5N4M3K3", "team": "team-a", "created_at": now, "updated_at": now}
)
(out / "job_item.json").write_text(json.dumps(job_to_item(job, now, FORMAT), indent=2, sort_keys=True) + "\n")
(out / "job_item_aws_target.json").write_text(
    json.dumps(job_to_item(sqs_job, now, FORMAT), indent=2, sort_keys=True) + "\n"
)
run = new_run(
    job,
    PlannedRun(now - timedelta(minutes=30), now - timedelta(minutes=29)),
    now,
    now + timedelta(minutes=10),
)
queued_item = run_to_item(run, stored_format=FORMAT)
(out / "run_item_queued.json").write_text(json.dumps(queued_item, indent=2, sort_keys=True) + "\n")
done = run.model_copy(
    update={
        "status": RunStatus.SUCCEEDED,
        "finished_at": now,
        "queue_deadline": None,
        "result": RunResult(status_code=200, duration_ms=412, body="ok"),
    }
)
done_item = run_to_item(done, stored_format=FORMAT)
(out / "run_item_succeeded.json").write_text(json.dumps(done_item, indent=2, sort_keys=True) + "\n")
carried = new_run(sqs_job, PlannedRun(now, now), now, now + timedelta(minutes=10))
(out / "run_message_carrying.json").write_text(
    json.dumps(json.loads(encode(RunMessage.carrying(carried), FORMAT)), indent=2, sort_keys=True) + "\n"
)
(out / "run_message_by_id.json").write_text(
    json.dumps(json.loads(encode(RunMessage(run.run_id, 2), FORMAT)), indent=2, sort_keys=True) + "\n"
)
team = Team(team_id="team-a", name="Team A")
(out / "team.json").write_text(
    json.dumps(json.loads(team.model_dump_json()), indent=2, sort_keys=True) + "\n"
)


class _Recorded:
    """A DynamoDB client that keeps the items put, so the stores' own writers record their items."""

    def __init__(self) -> None:
        self.items: list[dict] = []

    def put_item(self, **request: object) -> None:
        self.items.append(request["Item"])  # type: ignore[arg-type]


def _written_by(part: type) -> object:
    store = part.__new__(part)
    store.client, store.names, store.write_format = _Recorded(), TableNames("j", "r", "c"), lambda: FORMAT
    return store


reconciler = _written_by(DynamoReconciler)
figures = {
    "MissedFires": 0.0,
    "OldestUnclaimedDueSeconds": 3.5,
    "OldestQueuedSeconds": 0.0,
    "Reconciliations": 1.0,
}
reconciler.record_reconciliation(ReconcilerReport(now, figures))
quarantine = _written_by(DynamoQuarantineRecord)
unreadable = UnreadableRow(
    job_id=job.id,
    partition=partition_of(job.id),
    bucket="2026-12-07T03:00",
    due_key=f"2026-12-07T03:00:30Z#{job.id}",
    error="spec: schedule: Extra inputs are not permitted",
)
quarantine.record_unreadable([unreadable], now)
mark = stamped({**mark_key(partition_of(job.id)), "low_water": string_attribute("2026-12-07T02:59")}, FORMAT)
switch_log = _written_by(DynamoTableModes)
kept = {"table": {"read": 5, "write": 2651}, "indexes": {"due": {"read": 5, "write": 1800}}}
switch_log._write_log([now], 0, {"duetime-jobs": kept})
for name, item in (
    ("table_modes_log", switch_log.client.items[0]),
    ("reconciler_report", reconciler.client.items[0]),
    ("quarantine_record", quarantine.client.items[0]),
    ("low_water_mark", mark),
):
    (out / f"{name}.json").write_text(json.dumps(item, indent=2, sort_keys=True) + "\n")
print(sorted(p.name for p in out.iterdir()))
