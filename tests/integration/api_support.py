"""Calling the api handler as API Gateway does, with a team's token (fixtures shared by the API tests)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from duetime.adapters.dynamodb.catalog import DynamoCatalog
from duetime.adapters.dynamodb.rate_limits import DynamoRateLimiter
from duetime.api import app as api
from duetime.api.service import JobService
from duetime.wiring import run_budget

from ..lambda_support import LambdaContext, load_handler
from .conftest import Stack

HANDLER = load_handler("api")
JOB = {
    "name": "nightly",
    "schedule": {"cron": "0 0 * * *", "timezone": "Europe/Berlin"},
    "target": {"url": "https://example.com/hook"},
}


@dataclass
class Answer:
    status: int
    body: Any
    headers: dict[str, str]


Call = Callable[..., Answer]


def stack_service(stack: Stack, catalog: DynamoCatalog | None = None, **options: Any) -> JobService:
    """The API's logic on the stack's tables and queue as the wiring builds it (the run budget in the
    control table), with ``JobService``'s ``options``."""
    catalog = catalog or DynamoCatalog(stack.dynamodb, stack.names)
    return JobService(
        catalog, stack.store, stack.queue, stack.clock, run_budget=run_budget(catalog), **options
    )


@contextmanager
def serving(stack: Stack, svc: JobService) -> Iterator[JobService]:
    """The api handler on ``svc``, each team's API rate counted in the stack's control table."""
    api.use_service(lambda: svc)
    api.use_rate_limiter(lambda: DynamoRateLimiter(stack.dynamodb, stack.names.control))
    try:
        yield svc
    finally:
        api.use_service(None)  # type: ignore[arg-type]
        api.use_rate_limiter(None)


@pytest.fixture
def service(stack: Stack) -> Iterator[JobService]:
    svc = stack_service(stack)
    with serving(stack, svc):
        yield svc


def make_call(token: str | None) -> Call:
    def call(
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        query: dict[str, str] | None = None,
        raw: str | None = None,
    ) -> Answer:
        all_headers = {"Content-Type": "application/json", **(headers or {})}
        if token:
            all_headers["Authorization"] = f"Bearer {token}"
        event = {
            "httpMethod": method,
            "path": path,
            "resource": path,
            "headers": all_headers,
            "multiValueHeaders": {k: [v] for k, v in all_headers.items()},
            "queryStringParameters": query,
            "multiValueQueryStringParameters": {k: [v] for k, v in (query or {}).items()} or None,
            "requestContext": {"requestId": "r", "stage": "v1", "httpMethod": method, "path": path},
            "body": raw if raw is not None else (json.dumps(body) if body is not None else None),
            "isBase64Encoded": False,
            "pathParameters": None,
        }
        response = HANDLER.handler(event, LambdaContext())
        text = response.get("body") or ""
        headers = {
            **(response.get("headers") or {}),  # both, as API Gateway merges them
            **{k: ", ".join(v) for k, v in (response.get("multiValueHeaders") or {}).items()},
        }
        return Answer(response["statusCode"], json.loads(text) if text else None, headers)

    return call


@pytest.fixture
def alpha(service: JobService) -> Call:
    return make_call(service.create_team("alpha", exact_quota=1)[1])


@pytest.fixture
def beta(service: JobService) -> Call:
    return make_call(service.create_team("beta")[1])


@pytest.fixture
def local_team(stack: Stack) -> Iterator[Call]:
    """A team of an API that allows private targets (as ``duetime local`` does): its jobs call ``target``."""
    svc = stack_service(stack, allow_private_targets=True)
    with serving(stack, svc):
        yield make_call(svc.create_team("local", exact_quota=1)[1])


def a_fresh_minute(stack: Stack, needed: float = 15.0) -> None:
    """Wait, if need be, until the store's clock has ``needed`` seconds of its minute left."""
    now = stack.clock.now()
    if now.second + now.microsecond / 1e6 > 60 - needed:
        time.sleep(60 - now.second - now.microsecond / 1e6 + 0.1)
