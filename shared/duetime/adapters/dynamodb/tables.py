"""The three tables duetime uses, their keys and indexes. The CDK app builds the same shapes.

jobs     PK job_id.            GSI ``due``  (due_bucket, due_key), projection ALL, sparse:
         due_bucket = "<partition:02d>#<minute of the fire time, UTC>", due_key = "<fire time>#<job id>".
         Only scheduled, unpaused jobs carry the two attributes, so a poll reads only due work.
                               GSI ``team-jobs`` (team, job_id), KEYS_ONLY: a team's jobs for the API.
                               Claims never change its keys, so they never write to it.
runs     PK job_id, SK occurrence: a run is its job and its occurrence, which is what its run id
         ``<job id>@<occurrence>`` says. A scheduled run's occurrence is its nominal time ("<nominal>"),
         a manual run's is "<trigger time>~manual-<nonce>", so the two never collide and a job's runs,
         newest first, are one Query on the table itself (no index to write per run). The run id is kept
         as an attribute.
                               GSI ``reap`` (reap_shard, reap_at), projection INCLUDE run_id, sparse:
         reap_shard = "p<partition:02d>", reap_at = the run's next check: never later than it could need
         the reaper (its lease expiry while running, its queue deadline while waiting), and left alone by
         leases and heartbeats (``reap_checks``). Terminal runs drop both attributes and leave the index.
         The runs of a claim of 3 or more carry neither: a reap ticket covers them, an item of this table
         (``~reap-ticket-<random>``, ``ticket``) in the same index at their first check, listing their run
         ids (``reap_tickets``). TTL attribute ``ttl`` (30 days).
control  PK pk, SK sk.         Teams ("team#<id>", "team") with their exact-job counter, concurrency slots
         in groups of 25 per key ("team#<id>#slots#<group>"), five to an item ("slot#<first slot>", with
         "holder_<k>" and "until_<k>" for each of its slots k), API token hashes
         ("token#<sha256>", "token"), create idempotency keys ("idem#<team>#<key>", "idem"), per-partition
         low-water marks ("partition#NN", "watermark"), one poller lease per partition group
         ("poller#<group>", "lease": holder, term, since, expires_at, successor, handover_at; instants to
         the millisecond), locally stored alerts; jobs' label and name-word index items
         ("label#<team>#<key>=<value>", "<job id>"; "words#<team>", "<word>#<job id>") and change
         history ("history#<job id>", "<instant>#<nonce>", TTL 90 days): ``job_index``; teams' calendars
         ("calendar#<team>", "<name>") and their history ("calendar-history#<team>#<name>",
         "<version>.<0|1>", TTL 90 days): ``calendars``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

DUE_INDEX = "due"
TEAM_JOBS_INDEX = "team-jobs"
REAP_INDEX = "reap"
# Only what never changes: a lease or a heartbeat then writes nothing to the index (``reap_checks``).
REAP_PROJECTION = ["run_id"]
RUN_TTL_ATTRIBUTE = "ttl"


@dataclass(frozen=True)
class TableNames:
    jobs: str = "duetime-jobs"
    runs: str = "duetime-runs"
    control: str = "duetime-control"


def _s(*names: str) -> list[dict[str, str]]:
    return [{"AttributeName": n, "AttributeType": "S"} for n in names]


def table_definitions(names: TableNames) -> list[dict[str, Any]]:
    """CreateTable requests (on-demand) for the three tables."""
    return [
        {
            "TableName": names.jobs,
            "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": _s("job_id", "due_bucket", "due_key", "team"),
            "KeySchema": [{"AttributeName": "job_id", "KeyType": "HASH"}],
            "GlobalSecondaryIndexes": [
                {
                    "IndexName": DUE_INDEX,
                    "KeySchema": [
                        {"AttributeName": "due_bucket", "KeyType": "HASH"},
                        {"AttributeName": "due_key", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                },
                {
                    "IndexName": TEAM_JOBS_INDEX,
                    "KeySchema": [
                        {"AttributeName": "team", "KeyType": "HASH"},
                        {"AttributeName": "job_id", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                },
            ],
        },
        {
            "TableName": names.runs,
            "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": _s("job_id", "occurrence", "reap_shard", "reap_at"),
            "KeySchema": [
                {"AttributeName": "job_id", "KeyType": "HASH"},
                {"AttributeName": "occurrence", "KeyType": "RANGE"},
            ],
            "GlobalSecondaryIndexes": [
                {
                    "IndexName": REAP_INDEX,
                    "KeySchema": [
                        {"AttributeName": "reap_shard", "KeyType": "HASH"},
                        {"AttributeName": "reap_at", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": REAP_PROJECTION},
                },
            ],
        },
        {
            "TableName": names.control,
            "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": _s("pk", "sk"),
            "KeySchema": [
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
        },
    ]


class TableShapeMismatch(RuntimeError):
    """An existing table has other keys than this version of duetime expects."""


def create_tables(client: DynamoDBClient, names: TableNames) -> None:
    """Create any missing table and wait until all are active (idempotent). A table that exists with other
    keys (say, left by an older duetime in a long-running DynamoDB Local) is refused with its name."""
    existing = set(client.list_tables().get("TableNames", []))
    for definition in table_definitions(names):
        if definition["TableName"] in existing:
            _check_keys(client, definition)
            continue
        with contextlib.suppress(client.exceptions.ResourceInUseException):  # created concurrently
            client.create_table(**definition)
    waiter = client.get_waiter("table_exists")
    for definition in table_definitions(names):
        waiter.wait(TableName=definition["TableName"], WaiterConfig={"Delay": 1, "MaxAttempts": 60})
    for table in (names.runs, names.control):  # run history; create-request idempotency keys
        try:
            client.update_time_to_live(
                TableName=table,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": RUN_TTL_ATTRIBUTE},
            )
        except client.exceptions.ClientError as exc:  # already enabled
            if "TimeToLive is already enabled" not in str(exc):
                raise


def _check_keys(client: DynamoDBClient, definition: dict[str, Any]) -> None:
    name = definition["TableName"]
    found = client.describe_table(TableName=name)["Table"]["KeySchema"]
    if found != definition["KeySchema"]:
        raise TableShapeMismatch(
            f"table {name} is keyed by {[k['AttributeName'] for k in found]}, this duetime expects "
            f"{[k['AttributeName'] for k in definition['KeySchema']]}: delete the table (or restart "
            "DynamoDB Local, which keeps its data in memory) and start again"
        )
