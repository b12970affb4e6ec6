"""Poller Lambda: EventBridge invokes it every minute per partition group; it ticks each second."""

import time

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from duetime import wiring
from duetime.lambda_events import PollerTick
from duetime.observability import record_poll

logger = Logger(service="duetime-poller")
metrics = Metrics(namespace="duetime", service="poller")
tracer = Tracer(service="duetime-poller")


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict, context: LambdaContext) -> dict:
    tick = PollerTick.model_validate(event.get("detail") or event)
    poller = wiring.poller()
    if tick.partitions is not None:
        poller = poller.for_partitions(tick.partitions)
    started = time.monotonic()
    ticks = poller.run_until(
        stop=lambda: time.monotonic() - started >= tick.run_seconds,
        sleep=time.sleep,
        interval=wiring.settings().poll_interval_seconds,
        on_report=lambda claimed, recovered: record_poll(metrics, claimed, recovered),
    )
    return {"ticks": ticks, "partitions": list(poller.config.partitions)}
