"""What the stack's own tables and logs say about a fire the drill found with no call: read straight from
DynamoDB and CloudWatch Logs (not through the API, which a deploy may have left unanswering), so a report
can tell a run that exists but was never sent, a claim under another id, a job still waiting behind its
partition's low-water mark, and a schedule that moved past a time with no run (a lost fire)."""

from __future__ import annotations

from typing import Any

from boto3.dynamodb.types import TypeDeserializer

from duetime.adapters.aws.clients import new_client
from duetime.domain.ids import RUN_ID_SEPARATOR, partition_of

_deserialize = TypeDeserializer().deserialize
_LOG_LINES_KEPT = 40


def _plain(item: dict[str, Any] | None) -> dict[str, Any] | None:
    if item is None:
        return None
    return {key: str(_deserialize(value)) for key, value in sorted(item.items())}


def fire_forensics(
    endpoint: str, tables: dict[str, str], run_id: str, logs: dict[str, list[str]]
) -> dict[str, Any]:
    """The job's item, every run row of the job, the low-water mark of its partition, and the log lines
    (per function) naming the job, as they are now. ``tables``: the stack's jobs/runs/control table names;
    ``logs``: each function's log lines since the drill began."""
    job_id, _, occurrence = run_id.partition(RUN_ID_SEPARATOR)
    dynamodb = new_client("dynamodb", endpoint)
    found: dict[str, Any] = {"job_id": job_id, "occurrence": occurrence, "partition": partition_of(job_id)}
    try:
        item = dynamodb.get_item(TableName=tables["jobs"], Key={"job_id": {"S": job_id}}, ConsistentRead=True)
        found["job_item"] = _plain(item.get("Item"))
        runs = dynamodb.query(
            TableName=tables["runs"],
            KeyConditionExpression="job_id = :job",
            ExpressionAttributeValues={":job": {"S": job_id}},
            ConsistentRead=True,
        )
        found["run_rows"] = [_plain(run) for run in runs.get("Items", [])]
        mark = dynamodb.get_item(
            TableName=tables["control"],
            Key={"pk": {"S": f"partition#{found['partition']:02d}"}, "sk": {"S": "watermark"}},
            ConsistentRead=True,
        )
        found["low_water_mark"] = _plain(mark.get("Item"))
    except Exception as exc:  # a report, not a verdict: say what could not be read
        found["read_failed"] = f"{type(exc).__name__}: {exc}"
    found["log_lines"] = {
        function: [line for line in lines if job_id in line][:_LOG_LINES_KEPT]
        for function, lines in logs.items()
        if any(job_id in line for line in lines)
    }
    return found
