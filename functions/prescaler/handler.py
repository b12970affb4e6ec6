"""Prescaler Lambda: EventBridge invokes it every 5 minutes; it counts the due index over the next minutes
and sets the worker alias's provisioned concurrency ahead of a busy minute, lowering it once the queue has
drained, and switches the worker's event source to provisioned mode and back the same way
(``duetime.scheduling.prescale``). A failed call is logged (raised, for the workers); the next invocation
looks again."""

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from duetime import build_info, wiring
from duetime.tracing import TRACED_MODULES

logger = Logger(service="duetime-prescaler")
tracer = Tracer(service="duetime-prescaler", patch_modules=TRACED_MODULES)
build_info.log_cold_start(logger)


@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False, capture_error=False)
def handler(event: dict, context: LambdaContext) -> dict:
    decision = wiring.prescaler().tick().summary()
    logger.info("prescaled", extra=decision)
    return decision
