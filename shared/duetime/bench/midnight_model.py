"""The AWS model `duetime bench midnight --simulate` charges the real code's calls against: latencies, CPU,
per-key write limits and the SQS event source's scale-up. Every figure is a knob (a CLI flag of the same
name) and every default is stated with its source here and in BENCHMARKS.md ("Midnight at full scale,
simulated"). Nothing in this module is measured by the simulation itself.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass, fields
from typing import Any

from duetime.ids import DEFAULT_POLLER_GROUPS

LAMBDA_MB_PER_VCPU = 1769  # AWS Lambda docs: "at 1,769 MB, a function has the equivalent of one vCPU"


@dataclass(frozen=True)
class AwsModel:
    # DynamoDB per-call latencies (ms). AWS: "single-digit millisecond" reads and writes at any scale; a
    # BatchExecuteStatement of 25 writes and a Query page of ~1,000 rows are taken above that (assumptions).
    ddb_read_ms: float = 4.0  # GetItem
    ddb_write_ms: float = 6.0  # one UpdateItem / PutItem
    ddb_batch_get_ms: float = 8.0  # BatchGetItem (up to 100 keys)
    ddb_batch_statement_ms: float = 10.0  # BatchExecuteStatement (up to 25 conditional writes)
    ddb_query_ms: float = 10.0  # one Query page (the due index: up to 1,000 rows / 1 MB)
    # DynamoDB: 1,000 write units per second per partition; a key's writes all land on one partition. A
    # write beyond it is throttled and retried by the SDK: modelled as a token bucket per key holding one
    # second of units, the write waiting for the units it lacks.
    key_write_limit: float = 1000.0
    # SQS: "typical latencies for SendMessage, ReceiveMessage and DeleteMessage requests are in the tens or
    # low hundreds of milliseconds" (SQS developer guide). 10 messages a batch.
    sqs_send_ms: float = 20.0
    sqs_receive_ms: float = 20.0
    sqs_delete_ms: float = 20.0
    sqs_senders: int = 8  # SqsRunQueue's sender threads (adapters/sqs.py)
    claim_concurrency: int = 4  # DynamoStore's claim requests in flight
    # Lambda's SQS event source (docs, "Configuring scaling behavior for SQS event source mappings"): five
    # concurrent batches when messages appear, then up to 300 more a minute, up to 1,000; the stack's
    # MaximumConcurrency (worker_max_concurrency) caps it at 100.
    esm_initial: int = 5
    esm_scale_per_minute: float = 300.0
    max_concurrency: int = 100
    # The event source in provisioned mode (the stack's worker_min_pollers; 0: standard mode, as above).
    # Lambda docs and pricing page: each SQS event poller runs up to 10 concurrent invocations; provisioned
    # mode grows by up to 1,000 concurrency a minute to esm_max_pollers' worth (20,000 at most), and bills
    # $0.00925 per poller-hour. MaximumConcurrency does not apply in provisioned mode.
    esm_min_pollers: int = 0
    esm_max_pollers: int = 200
    esm_invokes_per_poller: int = 10
    esm_provisioned_scale_per_minute: float = 1000.0
    provisioned_workers: int = 90  # StackConfig.peak_workers, provisioned before midnight
    cold_start_ms: float = (
        1000.0  # a worker past the provisioned ones (assumption: Python + boto3 + pydantic)
    )
    invoke_ms: float = 5.0  # the event source invoking a warm worker (assumption)
    worker_memory_mb: int = 1024  # Workers: memory_mb=1024 -> 0.58 vCPU
    poller_memory_mb: int = 512  # pollers.poller_memory_mb at the default groups -> 0.29 vCPU
    poller_groups: int = DEFAULT_POLLER_GROUPS  # StackConfig.partition_groups' default
    target_ms: float = 100.0  # each target call (assumption: a webhook answering in 100 ms)
    teams: int = 500  # teams the midnight jobs belong to (1,000 jobs each at 500,000), default caps
    # CPU on this machine's cores, measured once (BENCHMARKS.md), divided by the function's vCPU share:
    worker_cpu_ms_per_run: float = 2.4  # "A worker's batch": the workers' share of client CPU per run
    # Planning and write-building per claim, measured on this machine: 414 us with every schedule new
    # to the poller, 125 us once its next cron instant is cached (schedule.cron_next_after): midnight's case.
    claim_cpu_us: float = 125.0
    row_build_cpu_us: float = 45.0  # "Preload memory": DueRow.job() per fired row (32-49 us)
    load_cpu_us_per_row: float = 63.0  # "Preload memory": 7.86 CPU s to load 125,000 rows
    sweep_cpu_us_per_row: float = 55.0  # "Preload memory": item_to_job per row a sweep's Query returns
    # The poller's resident memory: the process before any load, and the heap per row held (measured,
    # "Preload memory"); 512 MB is the default poller's memory.
    poller_base_mb: float = 73.0
    preload_bytes_per_row: float = 422.0

    @property
    def esm_provisioned(self) -> bool:
        return self.esm_min_pollers > 0

    def esm_start(self) -> int:
        """Concurrent batches the event source runs as soon as messages appear."""
        if self.esm_provisioned:
            return min(self.esm_cap(), self.esm_min_pollers * self.esm_invokes_per_poller)
        return min(self.esm_cap(), self.esm_initial)

    def esm_growth_per_minute(self) -> float:
        return self.esm_provisioned_scale_per_minute if self.esm_provisioned else self.esm_scale_per_minute

    def esm_cap(self) -> int:
        """The most concurrent batches: the stack's MaximumConcurrency (standard mode, 1,000 at most), or
        the maximum pollers' invocations (provisioned mode, 20,000 at most)."""
        if self.esm_provisioned:
            return min(20_000, max(self.esm_min_pollers, self.esm_max_pollers) * self.esm_invokes_per_poller)
        return min(self.max_concurrency, 1000)

    def vcpu(self, memory_mb: int) -> float:
        """Lambda's CPU share for a memory size; one Python process uses one vCPU at most (the GIL)."""
        return min(1.0, memory_mb / LAMBDA_MB_PER_VCPU)

    def worker_cpu_s(self, runs: int) -> float:
        return runs * self.worker_cpu_ms_per_run / 1000 / self.vcpu(self.worker_memory_mb)

    def poller_cpu_s(self, microseconds: float) -> float:
        return microseconds / 1e6 / self.vcpu(self.poller_memory_mb)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def model_flags() -> list[tuple[str, type, Any]]:
    """(flag name, type, default) for every knob: the CLI adds one flag each."""
    return [(f.name.replace("_", "-"), type(f.default), f.default) for f in fields(AwsModel)]


class KeyMeter:
    """Write units per partition key: offered per second (what the code asked for, when it asked), and a
    token bucket per key that holds back writes past ``limit`` units a second (returns the wait)."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.offered: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
        self._tokens: dict[str, float] = {}
        self._at: dict[str, float] = {}
        self.throttled_units = 0.0
        self.throttle_wait_s = 0.0

    def write(self, key: str, units: float, at: float) -> float:
        """Offer ``units`` on ``key`` at ``at`` (seconds); the wait before the key has taken them all."""
        self.offered[key][math.floor(at)] += units
        last = self._at.get(key, at)
        tokens = min(self.limit, self._tokens.get(key, self.limit) + max(0.0, at - last) * self.limit)
        tokens -= units
        self._tokens[key], self._at[key] = tokens, max(last, at)
        if tokens >= 0:
            return 0.0
        wait = -tokens / self.limit
        self.throttled_units += min(units, -tokens)
        self.throttle_wait_s += wait
        return wait

    def hottest(self) -> tuple[str | None, float]:
        """The key with the most units offered in one second, and that figure."""
        best: tuple[str | None, float] = (None, 0.0)
        for key, seconds in self.offered.items():
            peak = max(seconds.values(), default=0.0)
            if peak > best[1]:
                best = (key, peak)
        return best

    def keys_over(self) -> list[str]:
        return sorted(k for k, s in self.offered.items() if max(s.values(), default=0.0) > self.limit)

    def peak_by_kind(self) -> dict[str, float]:
        """The highest units offered in one second on any key of each kind (due bucket, reap shard, slot
        group, low-water mark)."""
        kinds: dict[str, float] = {}
        for key, seconds in self.offered.items():
            kind = key.split(":", 1)[0]
            kinds[kind] = max(kinds.get(kind, 0.0), max(seconds.values(), default=0.0))
        return {k: round(v, 1) for k, v in sorted(kinds.items())}


def esm_concurrency(model: AwsModel, since_first_message: float) -> int:
    """Concurrent batches the event source runs ``since_first_message`` seconds after messages appeared."""
    grown = model.esm_start() + math.floor(
        max(0.0, since_first_message) * model.esm_growth_per_minute() / 60 + 1e-9
    )
    return max(1, min(model.esm_cap(), grown))
