"""The lean transport's signer writes botocore's SigV4 signature, byte for byte: the emulators accept any
signature, so this comparison is what shows it is the one AWS checks."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from duetime.adapters.aws.sigv4 import PostSigner

INSTANT = datetime.datetime(2026, 12, 3, 23, 59, 58, tzinfo=datetime.UTC)
BODY = json.dumps({"TableName": "jobs", "Key": {"job_id": {"S": "j-1"}}}).encode()


def botocore_headers(
    url: str, headers: dict[str, str], credentials: Credentials, service: str, monkeypatch: Any
) -> dict[str, str]:
    monkeypatch.setattr("botocore.auth.get_current_datetime", lambda: INSTANT.replace(tzinfo=None))
    request = AWSRequest(method="POST", url=url, data=BODY, headers=dict(headers))
    SigV4Auth(credentials.get_frozen_credentials(), service, "eu-west-1").add_auth(request)
    return dict(request.headers.items())


@pytest.mark.parametrize(
    ("url", "host", "service", "extra", "token"),
    [
        (
            "https://dynamodb.eu-west-1.amazonaws.com/",
            "dynamodb.eu-west-1.amazonaws.com",
            "dynamodb",
            {},
            None,
        ),
        (
            "https://dynamodb.eu-west-1.amazonaws.com/",
            "dynamodb.eu-west-1.amazonaws.com",
            "dynamodb",
            {"X-Amzn-Trace-Id": "Root=1-abc"},  # added by botocore's before-call hook; never signed
            "session-token/with+odd=chars",  # a Lambda's temporary credentials
        ),
        (
            "http://127.0.0.1:4566/",
            "127.0.0.1:4566",  # a port that is not the scheme's: part of the host header, and signed so
            "sqs",
            {"x-amzn-query-mode": "true"},
            "t",
        ),
    ],
)
def test_the_signature_is_botocores_for_the_same_request_instant_and_credentials(
    monkeypatch: pytest.MonkeyPatch,
    url: str,
    host: str,
    service: str,
    extra: dict[str, str],
    token: str | None,
) -> None:
    credentials = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token)
    target = "DynamoDB_20120810.GetItem" if service == "dynamodb" else "AmazonSQS.SendMessageBatch"
    headers = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": target, **extra}
    expected = botocore_headers(url, headers, credentials, service, monkeypatch)

    ours = {"Host": host, **headers}
    PostSigner(service, "eu-west-1", clock=INSTANT.timestamp).sign(
        ours, BODY, credentials.get_frozen_credentials()
    )

    assert ours["Authorization"] == expected["Authorization"]
    assert ours["X-Amz-Date"] == expected["X-Amz-Date"] == "20261203T235958Z"
    assert ours.get("X-Amz-Security-Token") == expected.get("X-Amz-Security-Token") == token


def test_signing_again_replaces_the_old_signature_and_a_new_day_gets_a_new_key() -> None:
    now = [INSTANT.timestamp()]
    signer = PostSigner("dynamodb", "eu-west-1", clock=lambda: now[0])
    credentials = Credentials("AKID", "secret").get_frozen_credentials()
    headers = {"Host": "dynamodb.eu-west-1.amazonaws.com", "X-Amz-Target": "DynamoDB_20120810.GetItem"}
    signer.sign(headers, BODY, credentials)
    first = headers["Authorization"]
    now[0] += 3  # 00:00:01 the next day (a retry after midnight)
    signer.sign(headers, BODY, credentials)
    assert headers["Authorization"] != first
    assert "/20261204/eu-west-1/dynamodb/aws4_request" in headers["Authorization"]
    assert headers["Authorization"].count("Signature=") == 1
    assert "x-amz-date" in headers["Authorization"].split("SignedHeaders=")[1]
