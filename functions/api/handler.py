"""API Lambda (API Gateway REST): the duetime REST API (routes in ``duetime.api.app``). Its events hold tokens
and targets' header secrets, its answers tokens just issued and jobs' signing keys: neither is recorded, in
traces (no answer or error as metadata) or logs (no event), whatever the environment says (SECURITY.md)."""

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from duetime import build_info, wiring
from duetime.api.app import handle, use_defaults
from duetime.tracing import TRACED_MODULES

logger = Logger(service="duetime-api")
tracer = Tracer(service="duetime-api", patch_modules=TRACED_MODULES)
build_info.log_cold_start(logger)
use_defaults(wiring.job_service, wiring.api_rate_limiter)  # the stack's tables, queue and clock


@logger.inject_lambda_context(correlation_id_path="requestContext.requestId", log_event=False)
@tracer.capture_lambda_handler(capture_response=False, capture_error=False)
def handler(event: dict, context: LambdaContext) -> dict:
    return handle(event, context)
