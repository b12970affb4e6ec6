"""Poller helper Lambda: a busy minute's holder invokes it (asynchronously) to claim a slice of its group
for that minute (``duetime.scheduling.fan_out``): the event is the ``HelperAssignment``. It holds the slice's
own lease, preloads, fires and sweeps the slice, and returns once the minute is claimed
(``PollerShift.serve_helper``); if it dies, the holder takes the slice back when the lease expires. Each
invocation logs first the partitions and minute it serves (``fan_out.HELPER_INVOCATION_LOG``, field
``helper``; not its group label: nothing of an event is echoed in the logs verbatim, SECURITY.md)."""

import time

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from duetime import build_info, wiring
from duetime.scheduling.events import HelperEvent
from duetime.scheduling.fan_out import HELPER_INVOCATION_LOG
from duetime.scheduling.poller_lease import invocation_id
from duetime.tracing import TRACED_MODULES

logger = Logger(service="duetime-poller-helper")
metrics = Metrics(namespace="duetime", service="poller-helper")
metrics.set_default_dimensions(**wiring.metric_dimensions())  # the installation: stacks share no metric
tracer = Tracer(service="duetime-poller-helper", patch_modules=TRACED_MODULES)
build_info.log_cold_start(logger)


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False, capture_error=False)
def handler(event: dict, context: LambdaContext) -> dict:
    assignment = HelperEvent.model_validate(event).helper
    invocation = invocation_id(context.aws_request_id)
    served = assignment.model_dump(mode="json", include={"partitions", "minute"})
    logger.info(HELPER_INVOCATION_LOG, extra={"helper": served})
    report = wiring.poller_shift().serve_helper(invocation, assignment, time.sleep, metrics=metrics)
    return report.summary()
