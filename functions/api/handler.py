"""API Lambda (API Gateway REST): the duetime REST API (routes in ``duetime.api.app``)."""

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from duetime.api.app import handle

logger = Logger(service="duetime-api")
tracer = Tracer(service="duetime-api")


@logger.inject_lambda_context(correlation_id_path="requestContext.requestId")
@tracer.capture_lambda_handler
def handler(event: dict, context: LambdaContext) -> dict:
    return handle(event, context)
