"""``duetime local``'s gateway hands every method to the api handler, as API Gateway's ANY does, and answers
Lambda's reserved-concurrency operations for its functions, so the operator's switch (``duetime system
pollers|workers|reconciler stop|start``) works on it as on AWS, through boto3's own Lambda client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
import urllib3
from botocore.exceptions import ClientError

from duetime.adapters.aws.function_switch import (
    EngineFunctions,
    EngineSwitchFailed,
    local_engine_functions,
)
from duetime.api import app as api
from duetime.api.request_path import decoded_path
from duetime.local.gateway import LocalGateway
from duetime.local.lambda_sandbox import LocalFunction, register, registered


@pytest.fixture
def gateway() -> Iterator[LocalGateway]:
    server = LocalGateway(api.handle, 0).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("method", ["TRACE", "PUT", "POST", "DELETE", "PROPFIND", "OPTIONS"])
def test_an_undeclared_method_is_405_with_allow_through_the_gateway(
    gateway: LocalGateway, method: str
) -> None:
    response = urllib3.PoolManager().request(method, f"{gateway.url}/healthz", retries=False)
    assert response.status == 405
    assert response.headers["Allow"] == "GET"
    assert json.loads(response.data)["error"]["code"] == "method_not_allowed"


def test_declared_methods_still_answer_through_the_gateway(gateway: LocalGateway) -> None:
    response = urllib3.PoolManager().request("GET", f"{gateway.url}/healthz", retries=False)
    assert response.status == 200 and json.loads(response.data)["status"] == "ok"
    assert "Allow" not in response.headers


def lambda_at(gateway: LocalGateway):  # type: ignore[no-untyped-def]
    return boto3.client(
        "lambda",
        endpoint_url=gateway.url,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


def test_stop_and_start_the_local_pollers_through_boto3s_lambda_client(
    gateway: LocalGateway, tmp_path: Path
) -> None:
    poller = register(LocalFunction("poller", 135, handler_file=tmp_path / "handler.py"))
    pollers = local_engine_functions(lambda_at(gateway), "pollers")
    assert [(s.name, s.stopped, s.reserved) for s in pollers.states()] == [("poller", False, None)]
    assert [(s.name, s.stopped, s.reserved) for s in pollers.stop()] == [("poller", True, 0)]
    assert registered("poller") is poller and poller.stopped
    assert poller.invoke_async({"partitions": "0-15"}) is None and poller.throttled == 1
    assert [(s.name, s.stopped, s.reserved) for s in pollers.start()] == [("poller", False, None)]
    assert not poller.stopped


def test_an_unknown_function_and_a_bad_figure_are_refused_as_lambda_refuses(
    gateway: LocalGateway,
) -> None:
    client = lambda_at(gateway)
    with pytest.raises(ClientError) as refused:
        client.get_function_concurrency(FunctionName="no-such-function")
    assert refused.value.response["Error"]["Code"] == "ResourceNotFoundException"
    with pytest.raises(EngineSwitchFailed, match="no-such-function"):
        EngineFunctions(client, {"no-such-function": None}).stop()
    register(LocalFunction("worker", 900))
    answer = urllib3.request(
        "PUT",
        f"{gateway.url}/2017-10-31/functions/worker/concurrency",
        body=b'{"ReservedConcurrentExecutions": -1}',
    )
    assert answer.status == 400 and b"ReservedConcurrentExecutions" in answer.data
    assert registered("worker") is not None and not registered("worker").stopped  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("sent", "read"),
    [
        ("/v1/runs/01JDZ%402026-12-07T16%3A03%3A00Z", "/v1/runs/01JDZ@2026-12-07T16:03:00Z"),
        ("/v1/runs/01JDZ@2026-12-07T16:03:00Z", "/v1/runs/01JDZ@2026-12-07T16:03:00Z"),  # sent as it is
        ("/v1/jobs/by-key/billing/nightly%20export", "/v1/jobs/by-key/billing/nightly export"),
        ("/v1/runs/a%2Fb/cancel", "/v1/runs/a%2Fb/cancel"),  # an encoded slash would split its segment
        ("/v1/runs/a%2fb%25", "/v1/runs/a%2Fb%"),
        ("/v1/calendars/caf%C3%A9", "/v1/calendars/café"),
    ],
)
def test_each_path_segment_is_read_decoded_as_a_rest_api_hands_it_on_encoded(sent: str, read: str) -> None:
    assert decoded_path(sent) == read


def test_the_gateway_hands_the_path_on_encoded_as_api_gateways_rest_api_does(gateway: LocalGateway) -> None:
    seen: list[str] = []
    gateway.api = lambda event, _: seen.append(event["path"]) or {"statusCode": 204}  # type: ignore[assignment]
    urllib3.request("GET", f"{gateway.url}/v1/runs/j%402026-12-07T16%3A03%3A00Z")
    assert seen == ["/v1/runs/j%402026-12-07T16%3A03%3A00Z"]
