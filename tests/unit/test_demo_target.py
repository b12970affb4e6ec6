"""The demo target (``duetime local``'s and the benches' target) answers like a real endpoint would."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import ClassVar

import pytest
import urllib3

from duetime.local.demo_target import DemoTargetServer, _DemoHandler


class _NoDelayProbe(_DemoHandler):
    """The demo handler, noting whether its connection sends small writes at once (TCP_NODELAY)."""

    seen: ClassVar[list[int]] = []

    def setup(self) -> None:
        super().setup()
        self.seen.append(self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))


@pytest.fixture
def probed_server() -> Iterator[DemoTargetServer]:
    server = DemoTargetServer()
    server.RequestHandlerClass = _NoDelayProbe
    server.start()
    _NoDelayProbe.seen.clear()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_answers_are_sent_without_waiting_for_the_callers_delayed_ack(
    probed_server: DemoTargetServer,
) -> None:
    # An answer is two writes (head, then body); with Nagle's algorithm the body waited ~40 ms for the
    # caller's delayed ACK of the head, so every demo and bench call took 40 ms longer than its target.
    response = urllib3.request("POST", probed_server.url, body=b"{}", headers={"Idempotency-Key": "j@1"})
    assert response.status == 200
    assert _NoDelayProbe.seen and all(_NoDelayProbe.seen)
