"""Each team's API rate on DynamoDB Local: many API Lambdas at once never let a team past ``burst + rate *
elapsed``, other teams are unaffected, and over the rate the API answers 429 with ``Retry-After`` and
writes nothing. Each team's budget of runs made on request (``runs_per_minute``): one contract for the
in-memory twin and DynamoDB, and many API Lambdas triggering at once never create more than it allows."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from duetime.adapters.dynamodb import conditions
from duetime.adapters.dynamodb.catalog import DynamoCatalog
from duetime.adapters.dynamodb.rate_limits import DynamoRateLimiter, rate_limit_key
from duetime.adapters.dynamodb.run_budgets import DynamoRunBudget
from duetime.api.service import JobService
from duetime.domain.errors import RateLimited
from duetime.domain.models import Team
from duetime.domain.rate_limit import Decision, micros
from duetime.domain.run_budget import InMemoryRunBudget, RunBudget, Spend, minute_of
from duetime.wiring import run_budget

from .api_support import JOB, a_fresh_minute, make_call
from .conftest import Stack, hooked, new_clients

HAMMER_SECONDS = 2.5
THREADS = 16


@dataclass
class Tally:
    allowed: int = 0
    refused: int = 0
    retry_afters: set[int] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, decision: Decision) -> None:
        with self.lock:
            if decision.allowed:
                self.allowed += 1
            else:
                self.refused += 1
                self.retry_afters.add(decision.retry_after_seconds)


def hammer(
    stack: Stack, who: Team, threads: int, seconds: float, also: Any = None, cold: bool = False
) -> tuple[Tally, float]:
    """``threads`` API Lambdas (a limiter and a DynamoDB client each) taking requests of ``who`` as fast as
    they can for ``seconds``, all on the store's clock; ``also`` runs beside them. ``cold``: every request
    in a limiter of its own, as if each came to a new Lambda environment (no guess from the last one).
    Returns the tally and the elapsed store time from before the first request to after the last."""
    tally = Tally()
    limiters = [DynamoRateLimiter(new_clients()[0], stack.names.control) for _ in range(threads)]
    for number, limiter in enumerate(limiters):  # a client's first request loads the service model: not now
        limiter.take(Team(team_id=f"warm-up-{number}"), stack.clock.now())
    start = threading.Barrier(threads + 1 + (also is not None))
    began = stack.clock.now()

    def lambda_environment(limiter: DynamoRateLimiter) -> None:
        start.wait()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            taker = DynamoRateLimiter(limiter.client, limiter.table) if cold else limiter
            tally.count(taker.take(who, stack.clock.now()))

    workers = [threading.Thread(target=lambda_environment, args=(limiter,)) for limiter in limiters]
    if also is not None:
        workers.append(threading.Thread(target=lambda: (start.wait(), also())))
    for worker in workers:
        worker.start()
    start.wait()
    for worker in workers:
        worker.join()
    return tally, (stack.clock.now() - began).total_seconds()


@pytest.mark.parametrize("cold", [False, True], ids=["warm", "cold"])
def test_many_api_lambdas_at_once_never_let_a_team_past_its_burst_plus_its_rate(
    stack: Stack, cold: bool
) -> None:
    busy = Team(team_id="busy")  # the defaults: 20 a second, 40 at once
    quiet = Team(team_id="quiet", api_rate_per_second=1, api_burst=5)
    quiet_decisions: list[Decision] = []

    def quiet_team() -> None:  # another team, a few requests while "busy" is hammered
        limiter = DynamoRateLimiter(new_clients()[0], stack.names.control)
        time.sleep(0.5)
        # All six at one instant: at 1 a second, six requests spread over more than a second (a loaded CI
        # machine took that long) would rightly earn a sixth token, and the assertion is about the burst.
        at = stack.clock.now()
        quiet_decisions.extend(limiter.take(quiet, at) for _ in range(6))

    tally, elapsed = hammer(stack, busy, THREADS, HAMMER_SECONDS, also=quiet_team, cold=cold)

    most = busy.api_burst + busy.api_rate_per_second * elapsed
    assert tally.allowed <= most, (tally, elapsed)
    # ...and at least the whole burst: a lost race never refuses a request the bucket had room for. (Not
    # "at least burst + rate * elapsed less a little": a request whose ``now`` is old by the time DynamoDB
    # sees it finds less room, and on a loaded machine that is a lot. A fresh-clone CI run at load ~10 got
    # 74 allowed in 3.66 s where that bound wanted 93: the bucket was right, the requests were stale.)
    assert tally.allowed >= busy.api_burst, (tally, elapsed)
    assert tally.refused >= 10, tally  # hammered past the limit (a loaded host sends fewer: not 2x as once)
    assert 1 in tally.retry_afters and min(tally.retry_afters) >= 1  # 50 ms to wait is one whole second
    assert [d.allowed for d in quiet_decisions] == [True] * 5 + [False]  # its own burst, unaffected


def test_a_refused_request_writes_nothing_and_waiting_its_retry_after_is_enough(stack: Stack) -> None:
    slow = Team(team_id="slow", api_rate_per_second=0.5, api_burst=2)
    limiter = DynamoRateLimiter(stack.dynamodb, stack.names.control)
    now = stack.clock.now()
    assert [limiter.take(slow, now).allowed for _ in range(2)] == [True, True]
    stored = bucket(stack, "slow")
    assert stored["tat"] == micros(now) + 2 * 2_000_000  # two requests, two seconds apart

    assert limiter.take(slow, now) == Decision(False, 2)
    assert DynamoRateLimiter(stack.dynamodb, stack.names.control).take(slow, now) == Decision(False, 2)
    assert bucket(stack, "slow") == stored

    later = stack.clock.now()
    wait = (stored["tat"] - micros(later) - 2_000_000) / 1e6  # the exact wait, under Retry-After's 2 s
    assert limiter.take(slow, later).allowed is False
    time.sleep(max(0.0, wait) + 0.05)
    assert limiter.take(slow, stack.clock.now()).allowed


def bucket(stack: Stack, team_id: str) -> dict[str, int]:
    item = stack.dynamodb.get_item(
        TableName=stack.names.control, Key=rate_limit_key(team_id), ConsistentRead=True
    )["Item"]
    return {name: int(value["N"]) for name, value in item.items() if "N" in value}


@contextmanager
def counted_writes(client: Any) -> Iterator[list[str]]:
    """The UpdateItem requests ``client`` sends, by the condition each carries."""
    sent: list[str] = []
    by_expression = {c.expression: c.name for c in conditions.ALL_CONDITIONS}

    def record(params: dict[str, Any], **_: Any) -> None:
        sent.append(by_expression[params["ConditionExpression"]])

    with hooked(client, "provide-client-params.dynamodb.UpdateItem", record):
        yield sent


def test_a_request_costs_one_conditional_write_and_never_more_than_two(stack: Stack) -> None:
    alpha = Team(team_id="alpha", api_rate_per_second=20, api_burst=3)
    first, second = (DynamoRateLimiter(new_clients()[0], stack.names.control) for _ in range(2))
    now = stack.clock.now()
    with counted_writes(first.client) as by_first, counted_writes(second.client) as by_second:
        assert first.take(alpha, now).allowed  # an idle bucket: one write
        assert by_first == ["API_RATE_IDLE"]
        assert first.take(alpha, now).allowed  # this process knows the burst is under way: one write
        assert by_first[1:] == ["API_RATE_WITHIN_BURST"]
        assert second.take(alpha, now).allowed  # another process guesses idle, is shown the TAT: two
        assert by_second == ["API_RATE_IDLE", "API_RATE_WITHIN_BURST"]
        assert not second.take(alpha, now).allowed  # full: one write (failed), nothing written
        assert not first.take(alpha, now).allowed
        assert by_first[2:] == ["API_RATE_WITHIN_BURST"] and by_second[2:] == ["API_RATE_WITHIN_BURST"]


# --- through the API --------------------------------------------------------------------------------------


def test_over_its_rate_the_api_answers_429_with_retry_after_and_a_refused_create_creates_no_job(
    stack: Stack, service: JobService
) -> None:
    team, token = service.create_team("slow")
    stack.store.put_team(team.model_copy(update={"api_rate_per_second": 0.2, "api_burst": 2}))
    slow = make_call(token)
    assert slow("GET", "/v1/jobs").status == 200
    assert slow("GET", "/v1/jobs").status == 200
    refused = slow("POST", "/v1/jobs", JOB, headers={"Idempotency-Key": "k1"})
    assert refused.status == 429, refused.body
    assert refused.headers["Retry-After"] in {"4", "5"}  # one request every 5 s, the last a moment ago
    assert refused.body["error"]["code"] == "rate_limited"
    assert "0.2 requests a second (2 at once)" in refused.body["error"]["message"]

    jobs = stack.dynamodb.scan(TableName=stack.names.jobs, ConsistentRead=True)["Items"]
    assert jobs == []  # the refused create wrote no job...
    control = stack.dynamodb.scan(TableName=stack.names.control, ConsistentRead=True)["Items"]
    assert not [item for item in control if item["pk"]["S"].startswith("idem#")]  # ...nor its key

    other = make_call(service.create_team("other")[1])  # another team is not slowed
    assert [other("GET", "/v1/jobs").status for _ in range(5)] == [200] * 5
    assert make_call(token)("GET", "/healthz").status == 200  # public paths are not counted


@pytest.mark.parametrize(
    ("removed", "cold"),
    [
        ("API_RATE_IDLE", True),  # every request restarts the bucket from its own now
        ("API_RATE_WITHIN_BURST", False),  # a Lambda that saw the burst under way adds to a full bucket
    ],
)
def test_without_its_conditions_the_bucket_would_let_a_hammered_team_through(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, removed: str, cold: bool
) -> None:
    """The conditions are what holds the limit: either made always true, the same hammering gets far more
    than ``burst + rate * elapsed``."""
    always = {
        "API_RATE_IDLE": "attribute_not_exists(tat) OR tat <= :now OR tat > :now",
        "API_RATE_WITHIN_BURST": "tat > :now OR tat <= :last_allowed OR attribute_not_exists(tat)",
    }
    original = getattr(conditions, removed)
    monkeypatch.setattr(conditions, removed, conditions.Condition(removed, always[removed], original.why))
    # A slow rate, so that even a loaded machine's few requests a second are far over it: at the defaults
    # (20 a second, 40 at once) a fresh-clone CI run sent only 123 in 1.28 s, all allowed, and "far more
    # than 40 + 20 * 1.28" could not be shown by so few.
    busy = Team(team_id="busy", api_rate_per_second=2, api_burst=10)
    tally, elapsed = hammer(stack, busy, 8, 1.0, cold=cold)
    assert tally.allowed > 2 * (busy.api_burst + busy.api_rate_per_second * elapsed), (tally, elapsed)


# --- each team's runs made on request: runs_per_minute ----------------------------------------------------

MINUTE = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # a minute's start; a spend's instant is injected


@pytest.fixture(params=["memory", "dynamodb"])
def budget(request: pytest.FixtureRequest) -> RunBudget:
    """The run budget under contract: the in-memory twin and the control table's on DynamoDB Local."""
    if request.param == "memory":
        return InMemoryRunBudget()
    stack: Stack = request.getfixturevalue("stack")
    return DynamoRunBudget(stack.dynamodb, stack.names.control)


def test_a_run_budget_pays_for_a_spend_whole_or_not_at_all_and_starts_over_each_minute(
    budget: RunBudget,
) -> None:
    team = Team(team_id="t", runs_per_minute=10)
    first = budget.spend(team, 6, MINUTE + timedelta(seconds=5))
    assert (first.allowed, first.left) == (True, 4)
    refused = budget.spend(team, 5, MINUTE + timedelta(seconds=15))
    assert refused == Spend(False, minute_of(MINUTE), 4, 45)  # nothing counted: still 4 left
    assert budget.spend(team, 4, MINUTE + timedelta(seconds=20)).left == 0
    assert not budget.spend(team, 1, MINUTE + timedelta(seconds=59, microseconds=1)).allowed
    assert budget.spend(Team(team_id="other", runs_per_minute=10), 10, MINUTE).allowed  # teams apart
    later = budget.spend(team, 10, MINUTE + timedelta(minutes=1))  # the next minute: all of it again
    assert (later.allowed, later.minute, later.left) == (True, minute_of(MINUTE) + 1, 0)


def test_a_run_budget_takes_back_only_into_the_minute_it_was_spent_in(budget: RunBudget) -> None:
    team = Team(team_id="t", runs_per_minute=10)
    spent = budget.spend(team, 8, MINUTE)
    budget.give_back(team, spent, 5)  # 5 of the 8 were not created
    assert budget.spend(team, 7, MINUTE + timedelta(seconds=1)).left == 0
    budget.give_back(team, spent, 20)  # more than it holds: a lost race, nothing changes
    assert not budget.spend(team, 1, MINUTE + timedelta(seconds=2)).allowed
    again = budget.spend(team, 10, MINUTE + timedelta(minutes=1))
    budget.give_back(team, spent, 8)  # the first minute is over: nothing to give back to
    assert not budget.spend(team, 1, MINUTE + timedelta(minutes=1, seconds=1)).allowed
    assert again.allowed


def test_a_spend_on_a_clock_behind_is_counted_in_the_later_minute_never_more_generously(
    budget: RunBudget,
) -> None:
    team = Team(team_id="t", runs_per_minute=10)
    assert budget.spend(team, 9, MINUTE + timedelta(minutes=1)).allowed  # one API Lambda's clock
    behind = budget.spend(team, 2, MINUTE + timedelta(seconds=59))  # another's, a second behind
    assert (behind.allowed, behind.minute, behind.left) == (False, minute_of(MINUTE) + 1, 1)
    assert budget.spend(team, 1, MINUTE + timedelta(seconds=59)).minute == minute_of(MINUTE) + 1


def test_more_than_the_whole_budget_is_never_paid_for(budget: RunBudget) -> None:
    assert not budget.spend(Team(team_id="t", runs_per_minute=10), 11, MINUTE).allowed
    assert budget.spend(Team(team_id="t", runs_per_minute=10), 10, MINUTE).allowed


def trigger_from_many_lambdas(stack: Stack, team: Team, job_id: str, threads: int, each: int) -> Tally:
    """``threads`` API Lambdas (a service and a DynamoDB client each, on the store's clock) triggering the
    job ``each`` times as fast as they can, all at once."""
    tally = Tally()
    catalogs = [DynamoCatalog(new_clients()[0], stack.names) for _ in range(threads)]
    services = [
        JobService(catalog, stack.store, stack.queue, stack.clock, run_budget=run_budget(catalog))
        for catalog in catalogs
    ]
    start = threading.Barrier(threads)

    def lambda_environment(service: JobService) -> None:
        start.wait()
        for _ in range(each):
            try:
                service.trigger(team, job_id)
                tally.count(Decision(True))
            except RateLimited as exc:
                tally.count(Decision(False, exc.retry_after_seconds))

    workers = [threading.Thread(target=lambda_environment, args=(s,)) for s in services]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return tally


def created_runs(stack: Stack) -> int:
    items = stack.dynamodb.scan(TableName=stack.names.runs, ConsistentRead=True, Select="COUNT")
    return int(items["Count"])


def test_many_concurrent_triggers_never_create_more_than_the_teams_runs_per_minute(
    stack: Stack, service: JobService
) -> None:
    team, _ = service.create_team("busy")
    team = team.model_copy(update={"runs_per_minute": 20})
    job = service.create_job(team, JOB)
    a_fresh_minute(stack)
    tally = trigger_from_many_lambdas(stack, team, job.id, threads=8, each=6)
    assert (tally.allowed, tally.refused) == (20, 28), tally
    assert created_runs(stack) == 20  # a refused trigger created no run
    assert tally.retry_afters and max(tally.retry_afters) <= 60


def test_without_its_condition_the_run_budget_would_let_concurrent_triggers_through(
    stack: Stack, service: JobService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RUN_BUDGET_HAS_ROOM is what holds the budget: made always true, the same triggers all get through."""
    original = conditions.RUN_BUDGET_HAS_ROOM
    always = "#minute >= :minute OR #runs <= :most_held OR attribute_not_exists(#minute)"
    monkeypatch.setattr(conditions, original.name, conditions.Condition(original.name, always, original.why))
    team, _ = service.create_team("busy")
    team = team.model_copy(update={"runs_per_minute": 20})
    job = service.create_job(team, JOB)
    a_fresh_minute(stack)
    tally = trigger_from_many_lambdas(stack, team, job.id, threads=8, each=6)
    assert created_runs(stack) == tally.allowed >= 8 * 5, tally  # all but perhaps each one's first


# --- GET /v1/load: charged by the work it does ------------------------------------------------------------


def test_a_load_that_computes_more_than_the_teams_rate_can_pay_is_429_naming_its_cost(
    stack: Stack, service: JobService
) -> None:
    """Three jobs of a run a minute over 24 hours are 4,320 fire times: 5 requests' worth, more than a burst
    of 3 can pay, so the walk ends in a 429 that says what load costs. An hour of them costs one request."""
    team, token = service.create_team("planner")
    for _ in range(3):
        service.create_job(team, {**JOB, "schedule": {"rate": "1 minute"}, "exact": True})
    stack.store.put_team(team.model_copy(update={"api_rate_per_second": 0.1, "api_burst": 3}))
    planner = make_call(token)
    start = stack.clock.now().replace(second=0, microsecond=0) + timedelta(minutes=2)
    hour = {"from": start.isoformat(), "to": (start + timedelta(hours=1)).isoformat()}
    answer = planner("GET", "/v1/load", query=hour)
    assert answer.status == 200 and answer.body["total"] == 3 * 60, answer.body

    day = {"from": start.isoformat(), "to": (start + timedelta(hours=24)).isoformat()}
    refused = planner("GET", "/v1/load", query=day)
    assert refused.status == 429, refused.body
    assert refused.body["error"]["code"] == "rate_limited" and int(refused.headers["Retry-After"]) >= 1
    assert (
        "GET /v1/load costs one request per 100 jobs it reads and per 1,000 runs"
        in refused.body["error"]["message"]
    )
    assert planner("GET", "/v1/jobs").status == 429  # the team's rate is spent, as by 3 requests
