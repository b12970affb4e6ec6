"""What DynamoDB leaves of a batch (BatchWriteItem's ``UnprocessedItems``, BatchGetItem's ``UnprocessedKeys``)
is sent again after a backoff, by the one retry helper (``adapters/retrying.py``), until none is left: the
store's reads and deletes, the strict-limits check's reads of stored sizes, the benchmarks' bulk loads.
AWS: "we strongly recommend that you use an exponential backoff algorithm" (BatchWriteItem's reference)."""

from __future__ import annotations

import json
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

from duetime.adapters.aws import aws_limits
from duetime.adapters.dynamodb import reap_index
from duetime.adapters.dynamodb.codec import string_attribute
from duetime.adapters.dynamodb.reads import batch_get
from duetime.adapters.retrying import UNPROCESSED
from duetime_bench import preload
from duetime_bench.harness import BenchStack

from ..twin_support import T0, a_job


class Unprocessing:
    """A DynamoDB client whose first ``times`` batch answers leave the last ``leave`` entries of the request
    unprocessed; a read finds every key it is sent as an item (the key plus a ``size`` attribute)."""

    def __init__(self, leave: int = 1, times: int = 1) -> None:
        self.leave = leave
        self.times = times
        self.requests: list[dict[str, Any]] = []

    def _split(self, entries: list[Any]) -> tuple[list[Any], list[Any]]:
        cut = len(entries) - self.leave if len(self.requests) <= self.times else len(entries)
        return entries[:cut], entries[cut:]

    def batch_write_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(RequestItems)
        unprocessed = {}
        for table, writes in RequestItems.items():
            _, left = self._split(writes)
            if left:
                unprocessed[table] = left
        return {"UnprocessedItems": unprocessed}

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(RequestItems)
        responses, unprocessed = {}, {}
        for table, read in RequestItems.items():
            done, left = self._split(read["Keys"])
            responses[table] = [{**key, "size": string_attribute("x" * 10)} for key in done]
            if left:
                unprocessed[table] = {**read, "Keys": left}
        return {"Responses": responses, "UnprocessedKeys": unprocessed}


def keys(count: int) -> list[dict[str, Any]]:
    return [{"job_id": string_attribute(f"job-{i}")} for i in range(count)]


def test_a_batch_get_sends_the_unprocessed_keys_again_after_a_backoff() -> None:
    client, pauses = Unprocessing(leave=2), list[float]()
    found = batch_get(client, "jobs", keys(5), consistent=True, sleep=pauses.append)
    assert sorted(item["job_id"]["S"] for item in found) == [f"job-{i}" for i in range(5)]
    assert [len(request["jobs"]["Keys"]) for request in client.requests] == [5, 2]
    assert client.requests[1]["jobs"]["ConsistentRead"] is True  # the read as it was asked for
    assert len(pauses) == 1 and 0 <= pauses[0] <= UNPROCESSED.ceiling(1)


def test_a_batch_get_keeps_sending_while_keys_are_left_waiting_longer_each_time() -> None:
    client, pauses = Unprocessing(leave=1, times=6), list[float]()
    found = batch_get(client, "jobs", keys(8), sleep=pauses.append)
    assert len(found) == 8 and len(client.requests) == 7  # no limit: AWS says to resend until done
    assert all(0 <= pause <= UNPROCESSED.ceiling(n) for n, pause in enumerate(pauses, start=1))
    assert len(pauses) == 6


def test_the_stores_deletes_send_the_unprocessed_items_again_after_a_backoff() -> None:
    client, pauses = Unprocessing(leave=3), list[float]()
    reap_index.delete_items(client, "runs", keys(30), sleep=pauses.append)
    sizes = [len(request["runs"]) for request in client.requests]
    assert sizes == [25, 3, 5]  # the first 25 (3 of them left, sent again), then the other 5
    assert client.requests[1]["runs"] == client.requests[0]["runs"][22:]  # the very writes left
    assert len(pauses) == 1


def test_the_strict_check_reads_every_stored_size_past_unprocessed_keys() -> None:
    client, pauses = Unprocessing(leave=1), list[float]()
    wanted = [("jobs", json.dumps(key, sort_keys=True)) for key in keys(3)]
    sizes = aws_limits._stored_sizes(client, wanted, sleep=pauses.append)
    assert set(sizes) == set(wanted) and len(client.requests) == 2 and len(pauses) == 1


def test_the_benchmarks_bulk_loads_send_the_unprocessed_items_again() -> None:
    client = Unprocessing(leave=4)
    items = [{"job_id": string_attribute(f"job-{i}")} for i in range(10)]
    preload._write(client, "jobs", items)
    assert [len(request["jobs"]) for request in client.requests] == [10, 4]

    client = Unprocessing(leave=2)
    marks: list[int] = []
    stack = SimpleNamespace(
        names=SimpleNamespace(jobs="jobs"),
        dynamodb=client,
        store=SimpleNamespace(ensure_low_water_mark=lambda partition, bucket: marks.append(partition)),
    )
    jobs = [a_job(T0 + timedelta(minutes=1)) for _ in range(3)]
    BenchStack.write_jobs(stack, jobs, T0)  # type: ignore[arg-type]
    assert [len(request["jobs"]) for request in client.requests] == [3, 2]
    assert marks  # and every partition got its low-water mark, as before
