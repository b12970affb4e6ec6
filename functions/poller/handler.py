"""Poller Lambda: EventBridge invokes it every minute per partition group, and each invocation may serve the
group for ``run_seconds`` (more than a minute, so the next one always comes before it ends). Of the
invocations alive, the one holding the group's lease claims; it hands the lease to the next at an agreed
second once that one is ready, and returns (``poller_lease``). When its group is quiet it gives the lease
back and returns early (``quiet``); a job written due before the next tick starts one with ``wake``.
A busy minute's holder starts helpers (``helper.py``, ``fan_out``) for slices of its group. Each invocation
logs the fan-out it runs with first (``fan_out.POLLER_INVOCATION_LOG``, its ``fan_out`` field).

A tick that raises is logged, counted (``PollerErrors``) and the invocation goes on. The invocation fails
(Lambda's ``Errors``) only when not one of its ticks or lease calls succeeded."""

import time

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from duetime import build_info, wiring
from duetime.domain.partitions import group_label
from duetime.scheduling.events import PollerTick
from duetime.scheduling.fan_out import POLLER_INVOCATION_LOG
from duetime.scheduling.poller_lease import invocation_id
from duetime.tracing import TRACED_MODULES

RETURN_MARGIN_SECONDS = 10  # the run ends this long before Lambda's timeout: give the lease up, return

logger = Logger(service="duetime-poller")
metrics = Metrics(namespace="duetime", service="poller")
metrics.set_default_dimensions(**wiring.metric_dimensions())  # the installation: stacks share no metric
tracer = Tracer(service="duetime-poller", patch_modules=TRACED_MODULES)
build_info.log_cold_start(logger)


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False, capture_error=False)
def handler(event: dict, context: LambdaContext) -> dict:
    tick = PollerTick.model_validate(event.get("detail") or event)
    budget = context.get_remaining_time_in_millis() / 1000 - RETURN_MARGIN_SECONDS
    shift = wiring.poller_shift()
    invocation = invocation_id(context.aws_request_id)  # unique even when an event is delivered twice
    group = group_label(tick.partitions) if tick.partitions else None
    logger.info(
        POLLER_INVOCATION_LOG, extra={"fan_out": shift.fan_out_setting().model_dump(), "group": group}
    )
    run_seconds = min(tick.run_seconds, budget)
    serve = shift.serve
    report = serve(invocation, tick.partitions, run_seconds, time.sleep, metrics=metrics, wake=tick.wake)
    return report.summary()
