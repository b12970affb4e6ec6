"""The deploy check inside the deploy (``Custom::DuetimeDeployCheck``): what it answers CloudFormation for a
release, and how the answer reaches CloudFormation's pre-signed URL."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, ClassVar

import pytest

from duetime.adapters.aws.cfn_response import respond
from duetime.adapters.memory.installation import MemoryInstallation
from duetime.upgrades.deploy_gate import PHYSICAL_ID, answer_cloudformation

T0 = datetime(2026, 12, 7, 5, 0, tzinfo=UTC)


def request(kind: str, release: str | None = "0.2.0", url: str = "http://127.0.0.1:9/none") -> dict[str, Any]:
    return {
        "RequestType": kind,
        "ResponseURL": url,
        "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/Duetime/1",
        "RequestId": "r-1",
        "LogicalResourceId": "DeployGateResource",
        "ResourceProperties": {"ServiceToken": "arn", **({"Release": release} if release else {})},
    }


class Answers:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bool, str]] = []

    def __call__(self, event: dict[str, Any], physical_id: str, succeeded: bool, reason: str) -> None:
        self.sent.append((physical_id, succeeded, reason))


def finalized(stored_format: int, release: str) -> MemoryInstallation:
    record = MemoryInstallation()
    record.finalize_installation(stored_format, release, T0, was=1)
    return record


@pytest.mark.parametrize("kind", ["Create", "Update"])
def test_a_release_the_installation_may_take_is_allowed(kind: str) -> None:
    answers = Answers()
    answer_cloudformation(request(kind), lambda: MemoryInstallation(), answers)
    assert answers.sent == [(PHYSICAL_ID, True, "release 0.2.0 may be deployed over this installation")]


def test_a_rollback_past_a_finalize_fails_the_deploy_with_the_reason() -> None:
    answers = Answers()
    answer_cloudformation(request("Update", "0.1.0"), lambda: finalized(2, "0.2.0"), answers)
    ((physical_id, succeeded, reason),) = answers.sent
    assert (physical_id, succeeded) == (PHYSICAL_ID, False)
    assert reason.startswith("rollback refused") and "0.2.0" in reason


def test_a_delete_is_allowed_without_reading_the_record() -> None:
    def unread() -> MemoryInstallation:
        raise AssertionError("a delete reads no record")

    answers = Answers()
    answer_cloudformation(request("Delete"), unread, answers)
    assert answers.sent == [(PHYSICAL_ID, True, "nothing to check on delete")]


def test_a_check_that_cannot_read_the_record_is_answered_as_a_failure_naming_why() -> None:
    def unreachable() -> MemoryInstallation:
        raise ConnectionError("the table is throttled")

    answers = Answers()
    answer_cloudformation(request("Update"), unreachable, answers)
    ((_, succeeded, reason),) = answers.sent
    assert not succeeded and "the table is throttled" in reason


def test_a_request_without_a_release_is_refused() -> None:
    answers = Answers()
    answer_cloudformation(request("Create", None), lambda: MemoryInstallation(), answers)
    assert answers.sent == [(PHYSICAL_ID, False, "the deploy check was given no Release")]


class _Recorder(BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, str, dict[str, Any]]]] = []

    def do_PUT(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.received.append((self.path, self.headers.get("Content-Type", "?"), body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def response_url() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Recorder.received = []
    yield f"http://127.0.0.1:{server.server_port}/cfn/r-1?X-Amz-Signature=abc"
    server.shutdown()


def test_the_answer_is_put_to_the_presigned_url_as_cloudformation_reads_it(response_url: str) -> None:
    assert (
        respond(request("Update", url=response_url), PHYSICAL_ID, False, "rollback refused: x" * 300) == 200
    )
    ((path, content_type, body),) = _Recorder.received
    assert path == "/cfn/r-1?X-Amz-Signature=abc" and content_type == ""  # signed without a content type
    assert body["Status"] == "FAILED" and body["PhysicalResourceId"] == PHYSICAL_ID
    assert (body["StackId"], body["RequestId"], body["LogicalResourceId"]) == (
        "arn:aws:cloudformation:us-east-1:123456789012:stack/Duetime/1",
        "r-1",
        "DeployGateResource",
    )
    assert len(body["Reason"]) == 3000  # CloudFormation's reason is short: cut, never refused
