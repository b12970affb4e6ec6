"""This machine's speed, as the CPU of a fixed workload: the yardstick beside ``bench runcpu``'s figures.

The same code measured 0.507 ms of poller CPU a run on one machine of this kind and 0.219 ms on another a
day later: a run's CPU moves with the host as much as with the code. ``reference_cpu_ms`` times a workload
that no change of duetime can move (the standard library only) doing what a claim's path does most: JSON
out and in, an HMAC-SHA256, ISO instants formatted and parsed, an HTTP answer's headers parsed. Figures of
two days compare as ``figure / reference``: a change of the code moves that ratio, a change of host should
not, as far as the workload stands for the path (not yet checked across hosts: each calibration keeps its
host's figure, so the next one measured on another host shows whether the ratio held).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import io
import json
import statistics
import time
from datetime import UTC, datetime, timedelta

# An item of the shape the claim writes and reads (a run row in DynamoDB's JSON), fixed for ever.
_ITEM = {
    "run_id": {"S": "01JEXAMPLEJOBID0000000000#2026-12-04T00:00:00Z"},
    "job_id": {"S": "01JEXAMPLEJOBID0000000000"},
    "team": {"S": "bench"},
    "status": {"S": "queued"},
    "attempt": {"N": "1"},
    "scheduled_for": {"S": "2026-12-04T00:00:00Z"},
    "queue_deadline": {"S": "2026-12-04T00:05:00Z"},
    "target": {"S": '{"type":"http","url":"http://127.0.0.1:8080/demo/target","method":"POST","body":"{}"}'},
    "retry": {"S": '{"max_attempts":3,"backoff_seconds":10.0,"max_backoff_seconds":600.0}'},
    "expires_at": {"N": "1765000000"},
    "reap_bucket": {"S": "17#2026-12-04T00:01"},
}
_HEADERS = (
    b"HTTP/1.1 200 OK\r\nDate: Fri, 04 Dec 2026 10:00:00 GMT\r\nContent-Type: application/x-amz-json-1.0\r\n"
    b"Content-Length: 1234\r\nx-amzn-RequestId: 0123456789ABCDEF0123456789ABCDEF\r\n"
    b"x-amz-crc32: 123456789\r\nConnection: keep-alive\r\n\r\n"
)
_KEY = b"k" * 32
_ROUNDS = 2000  # about 50 ms on the machines this project runs on


def _workload() -> int:
    """One pass; returns a number derived from every step so none of them can be skipped."""
    start = datetime(2026, 12, 4, tzinfo=UTC)
    total = 0
    for i in range(_ROUNDS):
        text = json.dumps({"Statements": [_ITEM, _ITEM]}, separators=(",", ":"))
        total += len(json.loads(text)["Statements"])
        total += hmac.new(_KEY, text.encode(), hashlib.sha256).digest()[0]
        instant = (start + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        total += datetime.fromisoformat(instant.replace("Z", "+00:00")).second
        if i % 4 == 0:
            status = io.BytesIO(_HEADERS)
            status.readline()
            total += len(http.client.parse_headers(status))
    return total


def reference_cpu_ms(repeats: int = 5) -> float:
    """The workload's process CPU in milliseconds, the median of ``repeats`` passes (after one to warm)."""
    _workload()
    passes = []
    for _ in range(repeats):
        cpu = time.process_time()
        _workload()
        passes.append((time.process_time() - cpu) * 1000)
    return round(statistics.median(passes), 2)
