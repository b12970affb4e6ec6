"""The AWS model `duetime bench midnight --simulate` charges the real code's calls against: latencies, CPU,
per-key write limits and the SQS event source's scale-up. Every figure is a knob (a CLI flag of the same
name) and every default is stated with its source here and in BENCHMARKS.md ("Midnight at full scale,
simulated"). Nothing in this module is measured by the simulation itself.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from duetime.capacity import calibration
from duetime.capacity.warm_throughput import (
    DEFAULT_WARM_WRITE_UNITS,
    NEW_TABLE_WRITE_UNITS,
    format_units,
    parse_units,
)
from duetime.domain.ids import DEFAULT_POLLER_GROUPS

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
    sqs_senders: int = 8  # SqsRunQueue's sender threads (adapters/aws/sqs.py)
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
    # a worker past the provisioned ones (assumption: Python + boto3 + pydantic)
    cold_start_ms: float = 1000.0
    invoke_ms: float = 5.0  # the event source invoking a warm worker (assumption)
    worker_memory_mb: int = 1024  # Workers: memory_mb=1024 -> 0.58 vCPU
    poller_memory_mb: int = 512  # pollers.poller_memory_mb at the default groups -> 0.29 vCPU
    poller_groups: int = DEFAULT_POLLER_GROUPS  # StackConfig.partition_groups' default
    # Claims that scale out (duetime.scheduling.fan_out; the stack's poller_fan_out): a holder whose coming
    # minute holds more than fan_out_holder_rows hands slices of fan_out_partitions_per_helper partitions to
    # helper invocations of helper_memory_mb (1,769 MB: one vCPU), each starting after invoke_ms and a cold
    # start (helper_cold_start_ms: an assumption, the poller's package without the worker's targets).
    fan_out: bool = True
    # Claims paced to the tables' capacity for claims and starts together (duetime.scheduling.claim_pace; the
    # stack gives each group its share): False, claims go as fast as the claimers go and the tables throttle.
    claims_paced: bool = True
    # The event source as the stack's prescaler sets it for the forecast spike (StackConfig.forecast_pollers:
    # provisioned mode with PrescalePolicy.pollers_for(the spike's runs) pollers), unless esm_min_pollers
    # pins it; False: standard mode.
    esm_forecast_pollers: bool = True
    esm_forecast_hold_minutes: float = 20.0
    fan_out_holder_rows: int = 5_000
    fan_out_partitions_per_helper: int = 2
    helper_memory_mb: int = LAMBDA_MB_PER_VCPU
    helper_cold_start_ms: float = 1500.0
    target_ms: float = 100.0  # each target call (assumption: a webhook answering in 100 ms)
    teams: int = 500  # teams the midnight jobs belong to (1,000 jobs each at 500,000), default caps
    # Lambda (docs, "Lambda scaling behavior" and "Lambda quotas"): each function scales by 1,000 execution
    # environments every 10 seconds; an account runs 1,000 concurrent executions by default (shared by the
    # pollers, the workers and every other function of the account: the pollers' are taken out here).
    lambda_scale_per_10s: int = 1000
    lambda_account_concurrency: int = 1000
    # DynamoDB on demand (docs, "Pre-warming a table for on-demand capacity mode", "Understanding DynamoDB
    # warm throughput", "Service, account, and table quotas"): a new table, and each of its GSIs, sustains
    # 4,000 write units a second (its warm throughput; pre-warming raises it, never lowers it) or twice the
    # previous peak, whichever is more; more than that within 30 minutes can throttle; 40,000 write units a
    # second is the default table-level quota. Modelled per table and per index as a ``KeyMeter`` of
    # ``table_write_capacity()`` units a second; a GSI that throttles holds its table's write back.
    ddb_warm_wru_per_s: float = 4000.0
    ddb_previous_peak_wru_per_s: float = 0.0
    ddb_table_quota_wru_per_s: float = 40_000.0
    # The stack's warm throughput per table and index (StackConfig.warm_write_units, the same syntax):
    # each named one takes that many units a second (within the quota), the rest table_write_capacity().
    ddb_warm_write_units: str = field(default_factory=lambda: format_units(DEFAULT_WARM_WRITE_UNITS))
    # CPU per run, measured by `duetime bench runcpu` on this machine (capacity/calibration.py; the result's
    # ``calibration`` says when and at which commit); a flag overrides one for a what-if. A Lambda vCPU is
    # taken as fast as one of this machine's cores (``lambda_vcpu_speed``: an assumption, not measured).
    poller_read_cpu_us_per_row: float = field(
        default_factory=lambda: calibration.saved().poller_read_cpu_us_per_row
    )
    poller_claim_cpu_us_per_run: float = field(
        default_factory=lambda: calibration.saved().poller_claim_cpu_us_per_run
    )
    worker_cpu_ms_per_run: float = field(default_factory=lambda: calibration.saved().worker_cpu_ms_per_run)
    lambda_vcpu_speed: float = 1.0
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

    def esm_cap_by_limit(self) -> dict[str, int]:
        """Each limit on concurrent batches: the event source's (MaximumConcurrency in standard mode, 1,000
        at most; the maximum pollers' invocations in provisioned mode, 20,000 at most) and the account's
        concurrency less the pollers' own."""
        if self.esm_provisioned:
            pollers = max(self.esm_min_pollers, self.esm_max_pollers)
            source = {"esm_max_pollers": min(20_000, pollers * self.esm_invokes_per_poller)}
        else:
            source = {"max_concurrency": min(self.max_concurrency, 1000)}
        return source | {"lambda_account_concurrency": self.lambda_account_concurrency - self.poller_groups}

    def esm_cap(self) -> int:
        """The most concurrent batches: the lowest of ``esm_cap_by_limit``."""
        return max(1, min(self.esm_cap_by_limit().values()))

    def esm_cap_bound_by(self) -> str:
        """The knob ``esm_cap`` is set by."""
        limits = self.esm_cap_by_limit()
        return min(limits, key=lambda name: limits[name])

    def table_write_capacity(self, name: str | None = None) -> float:
        """Write units a second a table (or one of its GSIs; ``name``: one of them, with its warm throughput
        from ``ddb_warm_write_units``) takes without throttling during the spike."""
        ready = max(self.ddb_warm_wru_per_s, 2 * self.ddb_previous_peak_wru_per_s)
        if name is not None:
            ready = max(ready, parse_units(self.ddb_warm_write_units, NEW_TABLE_WRITE_UNITS).get(name, 0))
        return min(self.ddb_table_quota_wru_per_s, ready)

    def table_write_capacities(self, names: Iterable[str]) -> dict[str, float]:
        return {name: self.table_write_capacity(name) for name in names}

    def vcpu(self, memory_mb: int) -> float:
        """Lambda's CPU share for a memory size, in this machine's cores; one Python process uses one vCPU at
        most (the GIL)."""
        return min(1.0, memory_mb / LAMBDA_MB_PER_VCPU) * self.lambda_vcpu_speed

    def worker_cpu_s(self, runs: int) -> float:
        return runs * self.worker_cpu_ms_per_run / 1000 / self.vcpu(self.worker_memory_mb)

    def poller_cpu_s(self, microseconds: float, memory_mb: int | None = None) -> float:
        """A poller's (or, with ``memory_mb``, a helper's) CPU seconds for ``microseconds`` of this
        machine's."""
        return microseconds / 1e6 / self.vcpu(memory_mb or self.poller_memory_mb)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def model_flags() -> list[tuple[str, Any, Any]]:
    """(flag name, type, default) for every knob: the CLI adds one flag each. A calibrated knob's default is
    None (the calibration's figure)."""
    flags: list[tuple[str, Any, Any]] = []
    for f in fields(AwsModel):
        name = f.name.replace("_", "-")
        if f.name in CALIBRATED:
            flags.append((name, float, None))
        elif f.default is MISSING:  # a default made at construction (the stack's warm throughput)
            flags.append((name, str, None))
        elif isinstance(f.default, bool):
            flags.append((name, _boolean, f.default))
        else:
            flags.append((name, type(f.default), f.default))
    return flags


def _boolean(value: str) -> bool:
    """A flag's true or false (argparse's ``bool`` would take "false" as true)."""
    if value.lower() in ("true", "1", "yes", "on"):
        return True
    if value.lower() in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"{value!r} is not true or false")


CALIBRATED = ("poller_read_cpu_us_per_row", "poller_claim_cpu_us_per_run", "worker_cpu_ms_per_run")


class KeyMeter:
    """Write units per key (a partition key, or a table or index): offered per second (what the code asked
    for, when it asked), and per key a calendar of the units each second has taken, which holds a write
    past ``limit`` units in its second back to the next second with room (returns the wait). A calendar
    rather than a token bucket: the simulation's actors write at virtual times that interleave out of
    order, and a second's units are the same whichever of its writes came first."""

    def __init__(self, limit: float, limits: Mapping[str, float] | None = None) -> None:
        """``limits``: keys with a limit of their own (a table's warm throughput); the rest take ``limit``."""
        self.limit = limit
        self.limits = dict(limits or {})
        self.offered: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
        self._taken: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
        self.throttled_units = 0.0
        self.throttle_wait_s = 0.0
        self.throttled_writes = 0  # writes that waited for units (each a throttled request the SDK retries)

    def write(self, key: str, units: float, at: float) -> float:
        """Offer ``units`` on ``key`` at ``at`` (seconds); the wait before the key has taken them all."""
        first = second = math.floor(at)
        self.offered[key][first] += units
        taken = self._taken[key]
        limit = self.limits.get(key, self.limit)
        left = units
        while True:
            take = min(max(0.0, limit - taken[second]), left)
            taken[second] += take
            left -= take
            if left <= 1e-9:
                break
            if second == first:
                self.throttled_units += left
            second += 1
        if second == first:
            return 0.0
        wait = second - at
        self.throttle_wait_s += wait
        self.throttled_writes += 1
        return wait

    def write_many(self, units: Mapping[str, float], at: float) -> float:
        """Offer each key its units at ``at``; the wait for the slowest key."""
        return max((self.write(key, n, at) for key, n in units.items() if n > 0), default=0.0)

    def peaks(self) -> dict[str, float]:
        """The most units offered in one second, per key."""
        return {k: round(max(s.values(), default=0.0), 1) for k, s in sorted(self.offered.items())}

    def total(self) -> float:
        return sum(sum(s.values()) for s in self.offered.values())

    def hottest(self) -> tuple[str | None, float]:
        """The key with the most units offered in one second, and that figure."""
        best: tuple[str | None, float] = (None, 0.0)
        for key, seconds in self.offered.items():
            peak = max(seconds.values(), default=0.0)
            if peak > best[1]:
                best = (key, peak)
        return best

    def keys_over(self) -> list[str]:
        return sorted(
            k
            for k, s in self.offered.items()
            if max(s.values(), default=0.0) > self.limits.get(k, self.limit)
        )

    def peak_by_kind(self) -> dict[str, float]:
        """The highest units offered in one second on any key of each kind (due bucket, reap shard, slot
        group, low-water mark)."""
        kinds: dict[str, float] = {}
        for key, seconds in self.offered.items():
            kind = key.split(":", 1)[0]
            kinds[kind] = max(kinds.get(kind, 0.0), max(seconds.values(), default=0.0))
        return {k: round(v, 1) for k, v in sorted(kinds.items())}


def esm_concurrency(model: AwsModel, since_first_message: float) -> int:
    """Concurrent batches the event source runs ``since_first_message`` seconds after messages appeared:
    its own ramp, never faster than Lambda adds environments to the function (``lambda_scale_per_10s``
    every 10 seconds, the first of them at once)."""
    since = max(0.0, since_first_message)
    grown = model.esm_start() + math.floor(since * model.esm_growth_per_minute() / 60 + 1e-9)
    lambda_scaled = model.lambda_scale_per_10s * (1 + math.floor(since / 10 + 1e-9))
    return max(1, min(model.esm_cap(), grown, lambda_scaled))


def esm_activation(model: AwsModel, index: int) -> float:
    """Seconds after the first message at which the event source's ``index``-th concurrent batch (from 0)
    starts: the inverse of ``esm_concurrency``."""
    start = model.esm_start()
    ramp = 0.0 if index < start else (index - start + 1) * 60 / model.esm_growth_per_minute()
    return max(ramp, 10.0 * (index // model.lambda_scale_per_10s))
