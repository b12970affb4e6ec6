"""The answer to a CloudFormation custom resource request: a JSON document PUT to the request's pre-signed
``ResponseURL`` (https on AWS, http on LocalStack), retried a few times with backoff. Written here rather
than taken from ``crhelper``: that library speaks https only, makes three boto3 clients when it is created,
and retries a failed answer for ever."""

from __future__ import annotations

import functools
import json
from typing import Any

import urllib3


@functools.cache
def _http() -> urllib3.PoolManager:
    """Made at the first answer, not at import: five tries, 0.5 s, 1 s, 2 s, 4 s apart."""
    retries = urllib3.Retry(
        total=5, backoff_factor=0.5, allowed_methods=None, status_forcelist=[500, 502, 503]
    )
    return urllib3.PoolManager(retries=retries, timeout=urllib3.Timeout(connect=5, read=10))


def respond(event: dict[str, Any], physical_id: str, succeeded: bool, reason: str) -> int:
    """Send CloudFormation the outcome of ``event``; the HTTP status its URL answered."""
    body = {
        "Status": "SUCCESS" if succeeded else "FAILED",
        "Reason": reason[:3000],
        "PhysicalResourceId": physical_id,
        "StackId": event["StackId"],
        "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"],
        "Data": {},
    }
    data = json.dumps(body).encode()
    # An empty content type: the URL is signed without one (AWS's own cfn-response module sends it so).
    answer = _http().request("PUT", event["ResponseURL"], body=data, headers={"Content-Type": ""})
    return int(answer.status)
