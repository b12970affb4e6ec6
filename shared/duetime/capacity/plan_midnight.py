"""`duetime plan`'s midnight estimate: how long a spike takes to claim and to start, how fast a worker starts
runs, how many workers it needs and how hard its busiest keys are written, by arithmetic on the same AWS
model `duetime bench midnight --simulate` charges the real code against (``midnight_model.AwsModel``, its
defaults and flags), and on the code's own sizes (a sweep's page, a claim's requests, an SQS batch).

The simulation runs the code; this is the arithmetic of what the simulation found the code does, so the two
can be compared (the simulation prints both). What each term leaves out is said next to it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from duetime.capacity.midnight_model import AwsModel
from duetime.capacity.prices import PRICES_USD
from duetime.scheduling.claim_pace import PACE_HEADROOM
from duetime.scheduling.poller import PollerConfig

SQS_BATCH = 10  # runs a worker gets per invocation (the event source's batch size)
CLAIM_STATEMENTS = 25  # DynamoStore: a request of run rows, then one of schedule moves, 25 claims each
VERSION_READ_KEYS = 100  # DynamoStore: the jobs' versions are read first, a BatchGetItem per 100 claims
SWEEP_PAGE = PollerConfig.page_size  # rows a sweep claims of one partition at once
# Write units a run costs each table and index, by the writes `bench midnight --simulate` charges the code
# with (its ``write_units_per_item``: a midnight job's item and its run's are each under 1 KB, 1 unit a
# write). Claim: the job's row (1), its due-index entry moved (a delete and a put: 2), the run's row (1);
# its reap entry is a ticket's share (1/18) and the ticket's row beside it. Worker: the lease (1) and the
# result (1) on the run's row, the team's slot taken and freed (2, on the control table: a batch's runs are
# mostly of different teams). Reap-index removals at the result are a ticket's share too.
CLAIM_UNITS_PER_RUN = {"jobs": 1.0, "jobs/due": 2.0, "runs": 1.0 + 1 / 18, "runs/reap": 1 / 18}
# The reaper deletes the tickets whose check came at each reap pass (every 5 sweeps, 5 s), so a spike's
# ticket deletions land 5 seconds' worth at once: 5/18 a run at the peak, beside the ticket's own 1/18.
REAP_PASS_SECONDS = 5
START_UNITS_PER_RUN = {"runs": 2.0, "runs/reap": (1 + REAP_PASS_SECONDS) / 18, "control": 2.0}
TABLE_NAMES = {
    "jobs": "the jobs table",
    "jobs/due": "the jobs table's due index",
    "runs": "the runs table",
    "runs/reap": "the runs table's reap index",
    "control": "the control table",
}


def poller_claims_per_s(model: AwsModel, loaded: bool = False, memory_mb: int | None = None) -> float:
    """One poller's claims a second when the spike keeps it busy: each claim's CPU (the rest of the claim,
    and reading its row unless ``loaded``: the preload read it before its second; both as calibrated by
    ``bench runcpu``) at the poller's vCPU share, plus its share of the claim's latency (a read of 100
    jobs' versions, then two requests of 25 claims, the run rows then the schedule moves,
    ``claim_concurrency`` in flight). Left out: the sweeps' re-reads of rows the preload holds, and waits
    on throttled keys and tables."""
    cpu_us = model.poller_claim_cpu_us_per_run + (0 if loaded else model.poller_read_cpu_us_per_row)
    commit_us = 2 * model.ddb_batch_statement_ms * 1000 / (CLAIM_STATEMENTS * model.claim_concurrency)
    commit_us += model.ddb_batch_get_ms * 1000 / VERSION_READ_KEYS  # the versions, read before the writes
    return 1e6 / (model.poller_cpu_s(cpu_us, memory_mb) * 1e6 + commit_us)


def fan_out_of(jobs: float, model: AwsModel, partitions: int = 64) -> tuple[int, float]:
    """The helpers a minute of ``jobs`` rows (spread evenly over the partitions) starts
    (``duetime.scheduling.fan_out``: each holder hands its biggest slices to helpers until what is left fits
    ``fan_out_holder_rows``), and the claims a second all the claimers (holders and helpers) make together:
    the minute takes as long as its slowest claimer. A helper's claims are read ahead (its preload) and
    held to its partitions' keys' ``key_write_limit`` (a claim writes one unit on its due-bucket key)."""
    groups = model.poller_groups
    alone = groups * poller_claims_per_s(model)
    per_group = jobs / groups
    if not model.fan_out or per_group <= model.fan_out_holder_rows:
        return 0, alone
    size = model.fan_out_partitions_per_helper
    slices = math.ceil(partitions / groups / size)
    per_slice = jobs / partitions * min(size, partitions // groups)
    delegated = min(slices, math.ceil((per_group - model.fan_out_holder_rows) / per_slice))
    left = max(0.0, per_group - delegated * per_slice)
    helper_rate = min(
        poller_claims_per_s(model, loaded=True, memory_mb=model.helper_memory_mb),
        min(size, partitions // groups) * model.key_write_limit,
    )
    slowest_s = max(left / poller_claims_per_s(model), per_slice / helper_rate)
    return groups * delegated, jobs / slowest_s


def teams_in_batch(teams: int) -> float:
    """Teams expected among a batch's ``SQS_BATCH`` runs when the runs belong to ``teams`` teams evenly."""
    return teams * (1 - (1 - 1 / teams) ** SQS_BATCH) if teams else 1.0


def worker_billed_ms(model: AwsModel) -> float:
    """Milliseconds of one worker invocation (a batch), as Lambda bills it: the CPU of its runs at the
    worker's vCPU share, the leases (a read and a write), a slot taken and freed per team in the batch (one
    write each: with many teams a batch's runs are mostly of different teams), the calls (at once), the
    results."""
    return (
        model.worker_cpu_s(SQS_BATCH) * 1000
        + model.ddb_batch_get_ms
        + model.ddb_batch_statement_ms
        + teams_in_batch(model.teams) * 2 * model.ddb_write_ms
        + model.target_ms
        + model.ddb_batch_statement_ms
    )


def worker_starts_per_s(model: AwsModel) -> float:
    """One worker's starts a second: an SQS batch of 10 over one cycle: the receive and the invoke (the event
    source's), the invocation (``worker_billed_ms``), the delete. Left out: waits on throttled keys,
    retries, deferrals."""
    cycle_ms = model.sqs_receive_ms + model.invoke_ms + worker_billed_ms(model) + model.sqs_delete_ms
    return SQS_BATCH / (cycle_ms / 1000)


def seconds_to_start(jobs: int, model: AwsModel, rate: float) -> float:
    """Seconds for the event source to start ``jobs`` runs at ``rate`` a worker: its concurrency grows from
    ``esm_start`` by ``esm_growth_per_minute`` to ``esm_cap`` (standard or provisioned mode, ``AwsModel``),
    and the runs started by T are ``rate`` times the area under that curve. Left out: cold starts past the
    provisioned workers."""
    start, grow, cap = model.esm_start(), model.esm_growth_per_minute() / 60, model.esm_cap()
    ramp_s = max(0.0, (cap - start) / grow) if grow else 0.0
    ramp_runs = rate * (start * ramp_s + grow * ramp_s**2 / 2)
    if jobs <= ramp_runs:  # done while still growing: solve rate * (start T + grow T^2 / 2) = jobs
        if not grow:
            return jobs / (rate * start)
        return (-start + math.sqrt(start**2 + 2 * grow * jobs / rate)) / grow
    return ramp_s + (jobs - ramp_runs) / (rate * cap)


# A paced spike wants its claims done within this long, so that the last runs start within the minute.
SPIKE_CLAIM_SECONDS = 45.0


def claims_per_second_within(capacity: Mapping[str, float]) -> float:
    """The claims a second the stack paces a spike's claims to (``duetime.scheduling.claim_pace``):
    ``PACE_HEADROOM`` of what the tables take when each claim's run starts as fast (its claim's units and its
    start's, on each table and index)."""
    both = {n: CLAIM_UNITS_PER_RUN.get(n, 0.0) + START_UNITS_PER_RUN.get(n, 0.0) for n in TABLE_NAMES}
    return PACE_HEADROOM * min(capacity[n] / units for n, units in both.items() if units)


def table_capacities(model: AwsModel, warm_write_units: Mapping[str, float]) -> dict[str, float]:
    """Write units a second each table and index takes during the spike: ``model.table_write_capacity()``
    (a new table's, or ``ddb_warm_wru_per_s``), or the warm throughput ``warm_write_units`` gives it (the
    stack's ``warm_write_units``: ``duetime.capacity.warm_throughput``), within the table quota."""
    any_table = model.table_write_capacity()
    quota = model.ddb_table_quota_wru_per_s
    return {name: max(any_table, min(quota, warm_write_units.get(name, 0.0))) for name in TABLE_NAMES}


def midnight_estimate(
    jobs: int,
    window_s: float,
    model: AwsModel,
    partitions: int = 64,
    exact_fraction: float = 0.05,
    warm_write_units: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """``jobs`` due over the first ``window_s`` - 60 seconds (the simulation's window is 60 s plus its
    jitter), each to start within 60 s of its second, by the arithmetic above; the simulation's figures of
    the same names are what it is compared with. Spread over seconds, the ``exact_fraction`` of them (no
    jitter) still falls due at the spike's first second; with no spread, all of them do. Tables and indexes
    in ``warm_write_units`` take that many write units a second (``table_capacities``); the simulation
    takes one capacity for all, ``model``'s."""
    spread_s = max(0.0, window_s - 60)
    claims_per_s = poller_claims_per_s(model)
    # A minute's rows (the spike's first, for a spread one) decide the fan-out; its claimers' pace, all.
    minute_rows = jobs if not spread_s else jobs * min(1.0, 60 / spread_s)
    helpers, claimers_per_s = fan_out_of(minute_rows, model, partitions)
    capacity = table_capacities(model, warm_write_units or {})
    # Each table and index takes its ``capacity`` units a second: the claims are held to what the tightest
    # of their tables takes, and the starts (which overlap the claims) to the tightest for both.
    claims_table_cap = min(capacity[n] / units for n, units in CLAIM_UNITS_PER_RUN.items())
    starts_table_cap = claims_per_second_within(capacity)
    # Paced (``duetime.scheduling.claim_pace``), the claims take no more than the tables take of claims and
    # starts.
    pace_cap = starts_table_cap if model.claims_paced else claims_table_cap
    claimed_s = max(spread_s, jobs / min(claimers_per_s, pace_cap))
    rate = worker_starts_per_s(model)
    started_s = max(claimed_s, seconds_to_start(jobs, model, rate), jobs / starts_table_cap)
    # Units a second each table is asked for: the claims at the pace the spike wants (its claimers' pace, or
    # all in SPIKE_CLAIM_SECONDS, or as the runs fall due, spread; paced claims are held below it, and what
    # is asked past a table's capacity is what to pre-warm it to), the starts at the claims' pace or the
    # window's, within the workers'.
    claims_pace = min(
        claimers_per_s, jobs / max(spread_s, SPIKE_CLAIM_SECONDS if model.claims_paced else 1.0)
    )
    starts_pace = min(model.esm_cap() * rate, max(claims_pace, jobs / window_s))
    offered = _units_asked(model, claims_pace, starts_pace)
    peak_claims, peak_units = _peak_key_writes(
        jobs, window_s, model, partitions, exact_fraction, (spread_s, claimed_s), helpers
    )
    return {
        "poller_claims_per_s": round(claims_per_s, 1),
        "spike_cost_usd": spike_cost_estimate(jobs, model, helpers, claimed_s, rate),
        "helpers_invoked": helpers,
        "seconds_to_all_claimed": round(claimed_s, 1),
        "worker_starts_per_s_each": round(rate, 1),
        "seconds_to_all_started": round(started_s, 1),
        "workers_needed": math.ceil(jobs / window_s / rate),
        "peak_claims_per_s_per_partition": round(peak_claims, 1),
        "peak_write_units_per_s_hottest_key": round(peak_units, 1),
        "peak_table_wru_per_s_asked": offered,
    }


def _units_asked(model: AwsModel, claims_pace: float, starts_pace: float) -> dict[str, float]:
    """Write units a second each table and index is asked for at these paces of claims and starts."""
    headroom = PACE_HEADROOM if model.claims_paced else 1.0  # a paced table runs at 90% of what it takes
    return {
        name: round(
            (
                claims_pace * CLAIM_UNITS_PER_RUN.get(name, 0.0)
                + starts_pace * START_UNITS_PER_RUN.get(name, 0.0)
            )
            / headroom,
            1,
        )
        for name in TABLE_NAMES
    }


def _peak_key_writes(
    jobs: int,
    window_s: float,
    model: AwsModel,
    partitions: int,
    exact_fraction: float,
    spread_and_claimed_s: tuple[float, float],
    helpers: int,
) -> tuple[float, float]:
    """The peak claims a second on one partition, and the peak write units a second on its hottest key."""
    spread_s, claimed_s = spread_and_claimed_s
    groups = model.poller_groups
    rate = worker_starts_per_s(model)
    # Claims land on a poller's partitions at the rate it claims: its share of what falls due each second,
    # or all it can fire when more falls due (rows the preload read ahead). A poller still claiming a minute
    # after the last second falls due has left its preload behind, and its sweep claims a page of a
    # partition at once (the preload's pages land on as many partitions as pages). A partition's due-bucket
    # key takes 1 write a claim; its reap shard 1 a claim (the run's entry) and 1 a result (it leaves).
    # Results come at the workers' pace, spread over the partitions, except after a burst: the queue hands a
    # burst's runs out together, so its results land together too, in a later second that also takes a
    # burst of claims (2 writes a claim at the peak).
    at_once = jobs * (exact_fraction if spread_s else 1.0) / groups
    due_per_poller_s = at_once + (jobs / groups - at_once) / spread_s if spread_s else at_once
    if claimed_s > spread_s + 60:
        peak_claims = float(SWEEP_PAGE)
        peak_units = 2 * peak_claims
    else:
        peak_claims = min(due_per_poller_s, poller_claims_per_s(model, loaded=True)) / (partitions / groups)
        if helpers:  # a helper fires its slice's rows as fast as it claims
            size = min(model.fan_out_partitions_per_helper, partitions // groups)
            helper = poller_claims_per_s(model, loaded=True, memory_mb=model.helper_memory_mb)
            peak_claims = max(peak_claims, min(helper / size, model.key_write_limit))
        peak_units = peak_claims + min(jobs / window_s, model.esm_cap() * rate) / partitions
    return peak_claims, peak_units


# SQS requests a run makes at the spike: its message sent, received and deleted, in batches of 10.
SQS_REQUESTS_PER_RUN = 3 / SQS_BATCH


def spike_cost_estimate(
    jobs: int, model: AwsModel, helpers: int, claimed_s: float, rate: float
) -> dict[str, float]:
    """One spike's own bill by the arithmetic above, at ``prices.PRICES_USD``, as ``bench midnight``'s
    ``spike_cost_usd`` bills the simulated one: the write units of every run's claim and start
    (``CLAIM_UNITS_PER_RUN``, ``START_UNITS_PER_RUN``), the workers' batches (a request each, and one cycle,
    ``SQS_BATCH / rate``, of duration each), the helpers (a request each, and the claims' duration plus a
    cold start), the SQS requests, and the event source's provisioned pollers for the prescaler's hold.
    Left out, as there: read units, the pollers' own invocations (the fixed cost pays for them every minute,
    spike or not) and the warm throughput bought ahead (a one-time purchase)."""
    units = sum(CLAIM_UNITS_PER_RUN.values()) + sum(START_UNITS_PER_RUN.values())
    batches = jobs / SQS_BATCH
    worker_gb_s = batches * (SQS_BATCH / rate) * model.worker_memory_mb / 1024
    helper_gb_s = helpers * (claimed_s + model.helper_cold_start_ms / 1000) * model.helper_memory_mb / 1024
    pollers = model.esm_min_pollers if model.esm_forecast_pollers else 0
    parts = {
        "dynamodb_writes": jobs * units * PRICES_USD["dynamodb_write_request_unit"],
        "worker_duration": worker_gb_s * PRICES_USD["lambda_gb_second_arm64"],
        "worker_requests": batches * PRICES_USD["lambda_request"],
        "helper_duration": helper_gb_s * PRICES_USD["lambda_gb_second_arm64"],
        "helper_requests": helpers * PRICES_USD["lambda_request"],
        "sqs_requests": jobs * SQS_REQUESTS_PER_RUN * PRICES_USD["sqs_request"],
        "event_pollers": pollers
        * model.esm_forecast_hold_minutes
        / 60
        * PRICES_USD["lambda_sqs_event_poller_hour"],
    }
    return {"total": round(sum(parts.values()), 4)} | {k: round(v, 4) for k, v in parts.items()}
