"""Poller Lambda: EventBridge invokes it every minute per partition group; it ticks each second.

A tick that raises is logged, counted (``PollerErrors``) and the invocation goes on with the next tick. The
invocation itself fails (Lambda's ``Errors``) only when not one of its sweeps succeeded."""

import time

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from duetime import wiring
from duetime.lambda_events import PollerTick
from duetime.observability import record_fire, record_poll, record_poller_error

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
    errors: list[Exception] = []

    def failed(error: Exception) -> None:
        errors.append(error)
        record_poller_error(metrics)

    started = time.monotonic()
    ticks = poller.run_until(
        stop=lambda: time.monotonic() - started >= tick.run_seconds,
        sleep=time.sleep,
        interval=wiring.settings().poll_interval_seconds,
        on_report=lambda claimed, recovered: record_poll(metrics, claimed, recovered),
        on_fire=lambda fired: record_fire(metrics, fired),
        on_error=failed,
    )
    if errors and not ticks:
        message = f"every poller tick of the invocation failed ({len(errors)} errors)"
        raise RuntimeError(message) from errors[-1]
    return {"ticks": ticks, "errors": len(errors), "partitions": list(poller.config.partitions)}
