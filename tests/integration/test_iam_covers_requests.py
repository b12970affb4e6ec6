"""Each deployed function's role grants every DynamoDB request its code makes.

LocalStack does not enforce IAM, so a request the code starts making (a new PartiQL verb, a batch read, a
table it never touched) passes every other test and fails only on AWS: that is how the pollers once went
without the grants of the claims without a transaction. Here the real handlers run on DynamoDB Local
while a botocore hook turns each request into the IAM actions AWS authorizes it by (a PartiQL statement
in a BatchExecuteStatement is authorized per statement, as PartiQLInsert / PartiQLUpdate / PartiQLDelete /
PartiQLSelect on its table; a Query of an index needs the index's ARN), and the synthesized template must
grant each of them to the role of the function that made it.

The paths run are the common ones of each function (what a test here can drive), not every branch: a
request only a rare branch makes is covered only if that branch runs here.
"""

from __future__ import annotations

import fnmatch
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import boto3
import pytest

from duetime.adapters.aws.clients import client
from duetime.domain.ids import partition_of
from duetime.domain.timeutil import minute_bucket

from ..infra.test_stack import resources, role_grants, synth
from ..job_support import create_job
from ..lambda_support import LambdaContext, load_handler
from .api_support import JOB, make_call, serving, stack_service
from .conftest import Stack, hooked, wait_until
from .test_handlers import deployed, forget_wiring, sqs_event  # noqa: F401 (deployed: a fixture)

# (action, table role, True for an index of it)
Need = tuple[str, str, bool]

_PARTIQL = re.compile(r'^\s*(INSERT\s+INTO|UPDATE|DELETE\s+FROM|SELECT\s.*?\sFROM)\s+"([^"]+)"', re.I | re.S)
_TRANSACT = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}
METHOD_ARN = "arn:aws:execute-api:us-east-1:123456789012:abc123/v1-stage/GET/v1/jobs"
HANDLERS = {
    "poller": "functions/poller/handler.handler",
    "worker": "functions/worker/handler.handler",
    "api": "functions/api/handler.handler",
    "authorizer": "functions/authorizer/handler.handler",
    "deploy_gate": "functions/deploy_gate/handler.handler",
}


@contextmanager
def cloudformation_url() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A URL that takes CloudFormation's answers (PUT), and the answers it took."""
    answers: list[dict[str, Any]] = []

    class Answered(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            answers.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Answered)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/answer", answers
    finally:
        server.shutdown()


def cloudformation_update(url: str) -> dict[str, Any]:
    return {
        "RequestType": "Update",
        "ResponseURL": url,
        "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/Duetime/1",
        "RequestId": "r-1",
        "LogicalResourceId": "DeployGateResource",
        "PhysicalResourceId": "duetime-deploy-check",
        "ResourceProperties": {"ServiceToken": "arn", "Release": "0.2.0", "Build": "abc1234"},
    }


def needs_of(operation: str, params: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """The IAM actions (with their table's name) that AWS checks for one request."""
    if operation in ("BatchExecuteStatement", "ExecuteStatement", "ExecuteTransaction"):
        statements = params.get("Statements") or params.get("TransactStatements") or [params]
        found = []
        for statement in statements:
            match = _PARTIQL.match(statement["Statement"])
            assert match, f"a PartiQL statement this test cannot read: {statement['Statement']}"
            verb = match.group(1).split()[0].capitalize()
            found.append((f"dynamodb:PartiQL{verb}", match.group(2), False))
        return found
    if operation in ("BatchGetItem", "BatchWriteItem"):
        return [(f"dynamodb:{operation}", table, False) for table in params["RequestItems"]]
    if operation == "TransactWriteItems":
        return [
            (f"dynamodb:{_TRANSACT[kind]}", body["TableName"], False)
            for entry in params["TransactItems"]
            for kind, body in entry.items()
        ]
    if operation == "TransactGetItems":
        return [("dynamodb:GetItem", entry["Get"]["TableName"], False) for entry in params["TransactItems"]]
    return [(f"dynamodb:{operation}", params["TableName"], "IndexName" in params)]


@contextmanager
def recording(*clients: Any) -> Iterator[set[tuple[str, str, bool]]]:
    """Every DynamoDB request ``clients`` make in the block, as ``needs_of`` reads it."""
    made: set[tuple[str, str, bool]] = set()

    def keep(params: dict[str, Any], model: Any, **_: Any) -> None:
        made.update(needs_of(model.name, params))

    with ExitStack() as hooks:
        for one in clients:
            hooks.enter_context(hooked(one, "provide-client-params.dynamodb", keep))
        yield made


def grants(template: Any, handler: str) -> list[tuple[list[str], str, bool]]:
    """Each (actions, table role, index) the roles of ``handler``'s functions are granted on a table."""
    roles_of_tables = {
        name: next(role for role in ("jobs", "runs", "control") if role in name.lower())
        for name in resources(template, "AWS::DynamoDB::GlobalTable")
    }
    found: list[tuple[list[str], str, bool]] = []
    for actions, target in role_grants(template, handler):
        table, index = _table_of(target)
        if table in roles_of_tables:
            found.append((actions, roles_of_tables[table], index))
    return found


def _table_of(resource: Any) -> tuple[str | None, bool]:
    """A resource as (table logical id, whether it names the table's indexes)."""
    if isinstance(resource, dict) and "Fn::GetAtt" in resource:
        return resource["Fn::GetAtt"][0], False
    if isinstance(resource, dict) and "Fn::Join" in resource:
        parts = resource["Fn::Join"][1]
        if parts and isinstance(parts[0], dict) and "Fn::GetAtt" in parts[0]:
            return parts[0]["Fn::GetAtt"][0], any(isinstance(p, str) and "/index/" in p for p in parts[1:])
    return None, False


def missing(template: Any, handler: str, made: set[Need]) -> list[Need]:
    granted = grants(template, handler)
    return sorted(
        need
        for need in made
        if not any(
            role == need[1] and index == need[2] and any(fnmatch.fnmatchcase(need[0], a) for a in actions)
            for actions, role, index in granted
        )
    )


@pytest.fixture(scope="module")
def template() -> Any:
    return synth(deletion_protection="false")[1]


@pytest.fixture
def handlers_env(deployed: Stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:  # noqa: F811
    """The handlers wired to the test stack (``deployed``) with 2-s leases, so that reap checks come within
    the test, and alerts to an SNS topic as deployed (without one they are kept in the control table)."""
    topic = boto3.client("sns").create_topic(Name=f"{deployed.names.jobs}-alerts")["TopicArn"]
    monkeypatch.setenv("DUETIME_LEASE_SECONDS", "2")
    monkeypatch.setenv("DUETIME_ALERTS_TOPIC_ARN", topic)
    forget_wiring()  # ``deployed`` does it again when it ends
    yield deployed


def as_roles(stack: Stack, made: set[tuple[str, str, bool]]) -> set[Need]:
    """The requests made to this stack's tables, by the table's role. Requests to other tables are left out:
    the handlers share their boto3 clients, and a store clock wired by an earlier test keeps probing that
    test's (deleted) control table from its refiner thread through them."""
    names = {stack.names.jobs: "jobs", stack.names.runs: "runs", stack.names.control: "control"}
    return {(action, names[table], index) for action, table, index in made if table in names}


def delivered(stack: Stack, job_id: str) -> bool:
    """Whether a notification of ``job_id`` was delivered (``adapters/dynamodb/outbox.py``); read by a client
    of its own, so that the test's read is not taken for the poller's."""
    items = boto3.client("dynamodb").query(
        TableName=stack.names.runs,
        KeyConditionExpression="job_id = :k",
        ExpressionAttributeValues={":k": {"S": f"~notify-{job_id}"}},
        ConsistentRead=True,
    )["Items"]
    return any(int(item.get("delivered", {"N": "0"})["N"]) > 0 for item in items)


def poll(seconds: int = 3) -> None:
    load_handler("poller").handler(
        {"detail-type": "Scheduled Event", "detail": {"partitions": "0-63", "run_seconds": seconds}},
        LambdaContext(),
    )


def test_each_functions_role_grants_every_dynamodb_request_its_code_makes(
    template: Any, handlers_env: Stack, target
) -> None:
    stack = handlers_env
    shared = client("dynamodb")
    made: dict[str, set[Need]] = {}

    # The API: jobs created (one an exact job, one again under the same idempotency key), read, listed,
    # changed, paused, resumed, previewed, their runs listed, one deleted, one triggered and its run read.
    service = stack_service(stack)
    with serving(stack, service):
        _, token = service.create_team("iam", exact_quota=10)
        with recording(stack.dynamodb, shared) as api_requests:
            call = make_call(token)
            created = call("POST", "/v1/jobs", JOB, headers={"Idempotency-Key": "k1"})
            assert created.status == 201, created.body
            assert call("POST", "/v1/jobs", JOB, headers={"Idempotency-Key": "k1"}).status in (200, 201)
            exact = call("POST", "/v1/jobs", {**JOB, "name": "exact", "exact": True})
            assert exact.status == 201, exact.body
            # A watched job with a notify channel: every answer that shows it reads its missing flag.
            hook = {"type": "webhook", "url": "https://example.com/notify", "events": ["missed"]}
            watched = call("POST", "/v1/jobs", {**JOB, "success_deadline_seconds": 3600, "notify": [hook]})
            assert watched.status == 201 and watched.body["missing_since"] is None, watched.body
            assert call("GET", f"/v1/jobs/{watched.body['id']}").status == 200
            job_id = created.body["id"]
            # Labels and name words: index items put and deleted with the job, found by Query (job_index.py).
            for method, path, body in [
                ("GET", f"/v1/jobs/{job_id}", None),
                ("GET", "/v1/jobs", None),
                ("PATCH", f"/v1/jobs/{job_id}", {"name": "renamed", "labels": {"env": "prod"}}),
                ("GET", f"/v1/jobs/{job_id}/history", None),
                ("GET", "/v1/team", None),
                # AWS targets: the team's role registered and removed (a team change with its audit event)
                (
                    "PUT",
                    "/v1/team/aws-role",
                    {"role_arn": "arn:aws:iam::123456789012:role/duetime-target-iam"},
                ),
                ("DELETE", "/v1/team/aws-role", None),
                ("POST", f"/v1/jobs/{job_id}/pause", None),
                ("POST", f"/v1/jobs/{job_id}/resume", None),
                ("GET", f"/v1/jobs/{job_id}/runs", None),
                ("GET", f"/v1/jobs/{job_id}/preview", None),
                ("DELETE", f"/v1/jobs/{exact.body['id']}", None),
                # Calendars: items of the control table, each change with its history row (calendars.py)
                ("POST", "/v1/calendars", {"name": "fr", "source": {"holidays": {"country": "FR"}}}),
                ("GET", "/v1/calendars", None),
                ("GET", "/v1/calendars/fr", None),
                ("PUT", "/v1/calendars/fr", {"source": {"dates": ["2026-12-24"]}, "version": 1}),
                ("GET", "/v1/calendars/fr/history", None),
                ("DELETE", "/v1/calendars/fr", None),
            ]:
                answer = call(method, path, body)
                assert answer.status < 300, (method, path, answer.body)
            search = {"label": "env:prod", "q": "ren", "last_run": "true"}
            found = call("GET", "/v1/jobs", query=search)
            assert found.status == 200 and [j["id"] for j in found.body["jobs"]] == [job_id], found.body
            triggered = call("POST", f"/v1/jobs/{job_id}/trigger")
            assert triggered.status == 201, triggered.body
            assert call("GET", f"/v1/runs/{triggered.body['run_id']}").status == 200
            cancelled = call("POST", f"/v1/jobs/{job_id}/trigger").body["run_id"]
            assert call("POST", f"/v1/runs/{cancelled}/cancel").status == 200
            hour = stack.clock.now().replace(minute=0, second=0, microsecond=0)
            window = {"from": (hour - timedelta(days=2)).isoformat(), "to": hour.isoformat()}
            backfilled = call("POST", f"/v1/jobs/{job_id}/backfill", window)  # a daily job: 2 runs or so
            assert backfilled.status == 202 and backfilled.body["runs"] >= 1, backfilled.body
        made["api"] = as_roles(stack, api_requests)

        with recording(stack.dynamodb, shared) as authorizer_requests:
            policy = load_handler("authorizer").handler(
                {
                    "type": "TOKEN",
                    "authorizationToken": f"Bearer {token}",
                    "methodArn": METHOD_ARN,
                },
                LambdaContext(),
            )
            assert policy["principalId"] == "iam"
        made["authorizer"] = as_roles(stack, authorizer_requests)

    # The deploy check, as CloudFormation asks it on an update (its answer PUT to a local URL), alone: the
    # clocks the API's wiring keeps refined in the background (BatchGetItem on control) are stopped first.
    forget_wiring()
    with recording(stack.dynamodb, shared) as gate_requests, cloudformation_url() as (url, answers):
        load_handler("deploy_gate").handler(cloudformation_update(url), LambdaContext())
    assert [a["Status"] for a in answers] == ["SUCCESS"], answers
    made["deploy_gate"] = as_roles(stack, gate_requests)

    # The poller: three jobs due at one second (their claim writes a reap ticket), the minute preload,
    # sweeps, marks and its group's lease.
    for url in (target.url, target.url, target.url + "?status=503"):
        stack.job_due_now("team-a", url)
    stack.job_due_now("team-a", target.url, overlap="skip")  # its claim: one transaction
    # Success deadlines: one met by the worker at once (it settles the watch), one claimed past its
    # deadline (the poller's first reap pass finds it missed and flags the job).
    met_in_time = stack.job_due_now("team-a", target.url, success_deadline_seconds=600)
    late = create_job(
        stack.store,
        "team-a",
        {**JOB, "schedule": {"rate": "1 hour"}, "exact": True, "target": {"url": target.url}}
        | {"success_deadline_seconds": 60, "catchup_window_seconds": 600},
        stack.clock.now() - timedelta(minutes=62),  # its one time: 2 minutes ago, its deadline 1 minute ago
    )
    # A job is never due before the minute it was written in, and a partition's low-water mark is set by its
    # first job (WATERMARK_MISSING). This one is written 62 minutes back: when an earlier job of this test
    # shares its partition (about one run in five), the mark is already at this minute and the sweep would
    # never read its time. So the mark is put back to its minute, as if it had been written then.
    assert late.state.next_fire_at is not None
    stack.dynamodb.update_item(
        TableName=stack.names.control,
        Key={"pk": {"S": f"partition#{partition_of(late.id):02d}"}, "sk": {"S": "watermark"}},
        UpdateExpression="SET low_water = :bucket",
        ExpressionAttributeValues={":bucket": {"S": minute_bucket(late.state.next_fire_at)}},
    )
    # Notifications: a run that dies tells the job's webhook (the worker queues it, a poller sends it).
    hook = {"type": "webhook", "url": target.url, "events": ["dead"]}
    notified = stack.job_due_now(
        "team-a", target.url + "?status=503", retry={"max_attempts": 1}, notify=[hook]
    )
    poller_requests: set[tuple[str, str, bool]] = set()
    for _ in range(5):  # a 3 s poll on a loaded host may end before its reap pass reaches the late run
        with recording(stack.dynamodb, shared) as polled:
            poll()
        poller_requests |= polled
        if stack.store.missing_since(late.id) is not None:
            break
    assert stack.store.missing_since(late.id) is not None  # the deadline check ran, and found it missed
    backfill_ids = f"{job_id}@"  # the runs the API backfilled, sent by it: not the poller's
    messages = [m for m in stack.messages() if "~" in m.run_id or not m.run_id.startswith(backfill_ids)]
    scheduled = [
        json.dumps({"run_id": m.run_id, "attempt": m.attempt}) for m in messages if "~" not in m.run_id
    ]
    triggered = [
        json.dumps({"run_id": m.run_id, "attempt": m.attempt})
        for m in messages
        if "~" in m.run_id and m.run_id != cancelled  # the cancelled one's message: left alone
    ]
    assert (len(scheduled), len(triggered)) == (7, 1), messages
    watched = [m for m in scheduled if met_in_time.id in m or notified.id in m]

    # The worker: a batch of two runs of one team (one fails and waits to retry; their slots taken and freed
    # in a batch), and a batch of one (the API's triggered run); the third scheduled run's message is left
    # alone, so that it is still queued at its reap check.
    with recording(stack.dynamodb, shared) as worker_requests:
        load_handler("worker").handler(sqs_event(scheduled[:2]), LambdaContext())
        load_handler("worker").handler(sqs_event(watched), LambdaContext())
        load_handler("worker").handler(sqs_event(triggered), LambdaContext())
    made["worker"] = as_roles(stack, worker_requests)

    # The poller again, once the reap checks have come: the ticket is settled (its runs read, the live
    # ones given a check of their own, the ticket deleted), and lost messages are sent again.
    time.sleep(3)
    with recording(stack.dynamodb, shared) as poller_again:
        poll()
        wait_until(lambda: delivered(stack, notified.id), timeout=10)  # in the poller's background
    made["poller"] = as_roles(stack, poller_requests | poller_again)

    # The paths ran as they do at a spike: a claim by batched statements with a ticket, settled later;
    # a batch's leases and slots by batched statements.
    assert {("dynamodb:PartiQLInsert", "runs", False), ("dynamodb:BatchWriteItem", "runs", False)} <= made[
        "poller"
    ]
    assert ("dynamodb:PartiQLUpdate", "jobs", False) in made["poller"]
    assert {("dynamodb:PartiQLUpdate", "runs", False), ("dynamodb:PartiQLInsert", "control", False)} <= made[
        "worker"
    ]
    gaps = {name: missing(template, HANDLERS[name], requests) for name, requests in made.items()}
    assert gaps == {name: [] for name in made}, json.dumps(gaps, indent=1)
