"""A benchmark gives DynamoDB Local cores of its own, and gives them back afterwards."""

from __future__ import annotations

import os
from urllib.parse import urlparse

import psutil
import pytest

from duetime_bench.isolation import emulator_on_own_cores, listening_pid

# With the benches (test_bench_smoke) on one xdist worker, in turn: the spike bench also moves DynamoDB Local
# onto cores of its own, and the two must not do it at once.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("bench")]


def thread_cpus(pid: int) -> set[frozenset[int]]:
    """The distinct CPU sets of a process's threads."""
    cpus = set()
    for thread in psutil.Process(pid).threads():
        try:
            cpus.add(frozenset(os.sched_getaffinity(thread.id)))
        except ProcessLookupError:
            continue
    return cpus


def test_dynamodb_local_runs_on_its_own_cores_during_the_block_and_gets_every_core_back() -> None:
    ddb_url, sqs_url = os.environ["AWS_ENDPOINT_URL_DYNAMODB"], os.environ["AWS_ENDPOINT_URL_SQS"]
    emulator = listening_pid(urlparse(ddb_url).port or 0)
    assert emulator is not None, "DynamoDB Local should be listening"
    before_emulator, before_self = thread_cpus(emulator), thread_cpus(os.getpid())
    cores = len(os.sched_getaffinity(0))

    with emulator_on_own_cores(ddb_url, sqs_url) as split:
        if cores < 2:
            assert split is None  # one core: nothing to split, everything left as it was
            return
        assert split is not None
        assert thread_cpus(emulator) == {split.emulator}
        assert thread_cpus(os.getpid()) == {split.others}
        assert os.sched_getaffinity(0) == split.others  # so worker processes started now inherit it

    assert thread_cpus(emulator) == before_emulator
    assert thread_cpus(os.getpid()) == before_self
