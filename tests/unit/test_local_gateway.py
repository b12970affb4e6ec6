"""``duetime local``'s gateway hands every method to the api handler, as API Gateway's ANY does."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import urllib3

from duetime.api import app as api
from duetime.local.gateway import LocalGateway


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
