"""Reconciler Lambda: EventBridge invokes it every minute; it checks from the stores that what was due got
claimed and what was claimed got started, and publishes ``MissedFires``, ``OldestUnclaimedDueSeconds``,
``OldestQueuedSeconds`` and its heartbeat ``Reconciliations`` (``duetime.scheduling.reconcile``). A failed
tick is Lambda's ``Errors``, and its missing heartbeat the ``EngineHeartbeat`` alarm's."""

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from duetime import build_info, wiring
from duetime.domain.alarms import RECONCILER_SERVICE
from duetime.tracing import TRACED_MODULES

logger = Logger(service="duetime-reconciler")
metrics = Metrics(namespace="duetime", service=RECONCILER_SERVICE)
metrics.set_default_dimensions(**wiring.metric_dimensions())  # the installation: stacks share no metric
tracer = Tracer(service="duetime-reconciler", patch_modules=TRACED_MODULES)
build_info.log_cold_start(logger)


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False, capture_error=False)
def handler(event: dict, context: LambdaContext) -> dict:
    figures = wiring.reconciler().tick(metrics).figures()
    logger.info("reconciled", extra=figures)
    return figures
