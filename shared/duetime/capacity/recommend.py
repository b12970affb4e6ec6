"""`duetime plan`'s recommended configuration: of the settings the stack takes (its tables' capacity mode,
the worker's memory, the poller groups), the cheapest by the whole month's bill (``bill.monthly_bill``)
whose spike still starts within its window on the AWS model (``plan_midnight.midnight_estimate``).

Worker memories tried start at 256 MB: a worker's process (Python, boto3, pydantic, its clients) is
measured well above half of 128 MB before any run (``bench runcpu``'s process; the pollers' is 73 MB), so
128 MB leaves no room for a batch's bodies. Poller groups tried divide the 64 partitions; more of them claim
a spike sooner and cost more at rest."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from duetime.capacity.bill import CAPACITY_MODES, BillInputs, CapacityMode, monthly_bill
from duetime.capacity.fixed_cost import StackDefaults
from duetime.capacity.midnight_model import AwsModel
from duetime.capacity.plan_midnight import midnight_estimate, poller_claims_per_s

WORKER_MEMORY_TRIED = (256, 512, 1024)
# The worker's cold start is CPU-bound (importing its code and wiring its clients): 0.59-0.62 s of CPU
# measured on the bench machine (``python -c "import functions.worker.handler"``, 2026-12-07), at the
# memory's share of a vCPU. A spike's workers past the provisioned ones start that much later.
WORKER_INIT_CPU_S = 0.6


def worker_cold_start_s(memory_mb: int, model: AwsModel) -> float:
    """Seconds a worker's cold start takes at ``memory_mb`` (its CPU share)."""
    return WORKER_INIT_CPU_S / model.vcpu(memory_mb)


POLLER_GROUPS_TRIED = (1, 2, 4, 8, 16)
# The share of its claim rate a group's holder may spend on the day's average load (the spike apart): an
# hour twice as busy as the average then takes half its rate, the rest left to its sweeps and a margin.
STEADY_CLAIM_SHARE = 0.25


def groups_claim_the_steady_load(runs_per_day: int, spike_jobs: int, groups: int, model: AwsModel) -> bool:
    """Whether ``groups`` holders claim the day's runs outside the spike within ``STEADY_CLAIM_SHARE`` of
    their rate (``plan_midnight.poller_claims_per_s``: rows read by the sweeps, not preloaded)."""
    steady_per_s = max(0, runs_per_day - spike_jobs) / 86_400
    return steady_per_s <= STEADY_CLAIM_SHARE * groups * poller_claims_per_s(model)


@dataclass(frozen=True)
class Choice:
    capacity_mode: CapacityMode
    worker_memory_mb: int
    poller_groups: int


def spike_estimate(
    spike_jobs: int,
    window_s: int,
    exact_fraction: float,
    partitions: int,
    stack: StackDefaults,
    model: AwsModel,
) -> dict[str, Any]:
    """The spike on the AWS model of ``stack``'s groups and worker memory."""
    model = replace(model, poller_groups=stack.poller_groups, worker_memory_mb=stack.worker_memory_mb)
    return midnight_estimate(spike_jobs, window_s, model, partitions, exact_fraction, stack.warm_write_units)


def recommend(
    bill_inputs: BillInputs,
    window_s: int,
    exact_fraction: float,
    stack: StackDefaults,
    model: AwsModel,
) -> dict[str, Any]:
    """The cheapest ``Choice`` whose spike starts in time (the stack's own settings when none does: the plan
    then warns and names flags), its bill, the flags that deploy it and each capacity mode's total beside
    it."""
    best: tuple[float, Choice, dict[str, Any], dict[str, Any]] | None = None
    runs, spike_jobs = bill_inputs.runs_per_day, bill_inputs.spike_jobs
    for groups in (
        g
        for g in POLLER_GROUPS_TRIED
        if bill_inputs.partitions % g == 0 and groups_claim_the_steady_load(runs, spike_jobs, g, model)
    ):
        for memory in WORKER_MEMORY_TRIED:
            tried = replace(stack, poller_groups=groups, worker_memory_mb=memory)
            spike = spike_estimate(
                bill_inputs.spike_jobs, window_s, exact_fraction, bill_inputs.partitions, tried, model
            )
            late_workers_s = worker_cold_start_s(memory, model)
            if bill_inputs.spike_jobs and spike["seconds_to_all_started"] + late_workers_s > window_s:
                continue
            for mode in CAPACITY_MODES:
                bill = monthly_bill(replace(bill_inputs, capacity_mode=mode), tried, model, spike)
                if best is None or bill["monthly_usd"] < best[0]:
                    best = (bill["monthly_usd"], Choice(mode, memory, groups), bill, spike)
    if best is None:
        choice = Choice(bill_inputs.capacity_mode, stack.worker_memory_mb, stack.poller_groups)
        spike = spike_estimate(
            bill_inputs.spike_jobs, window_s, exact_fraction, bill_inputs.partitions, stack, model
        )
        bill = monthly_bill(bill_inputs, stack, model, spike)
        starts_in_time = False
    else:
        _, choice, bill, spike = best
        starts_in_time = True
    chosen = replace(stack, poller_groups=choice.poller_groups, worker_memory_mb=choice.worker_memory_mb)
    by_mode = {
        mode: monthly_bill(replace(bill_inputs, capacity_mode=mode), chosen, model, spike)
        for mode in CAPACITY_MODES
    }
    return {
        "capacity_mode": choice.capacity_mode,
        "worker_memory_mb": choice.worker_memory_mb,
        "poller_groups": choice.poller_groups,
        "spike_starts_in_time": starts_in_time,
        "seconds_to_all_started": spike["seconds_to_all_started"],
        "flags": deploy_flags(choice),
        "bill": bill,
        "by_capacity_mode": {
            mode: {"monthly_usd": b["monthly_usd"], "usd_per_million_runs": b["usd_per_million_runs"]}
            for mode, b in by_mode.items()
        },
    }


def deploy_flags(choice: Choice) -> str:
    """The ``cdk deploy`` context flags of a choice (every one, so a reader sees the whole configuration)."""
    return (
        f"-c capacity_mode={choice.capacity_mode} -c worker_memory_mb={choice.worker_memory_mb} "
        f"-c partition_groups={choice.poller_groups}"
    )
