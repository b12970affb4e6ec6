"""API Gateway TOKEN authorizer: a team's bearer token -> an allow policy with the team in its context. The
event (the token) is never logged, whatever ``POWERTOOLS_LOGGER_LOG_EVENT`` says."""

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from duetime import build_info, wiring
from duetime.api.authorizer import authorize

logger = Logger(service="duetime-authorizer")
build_info.log_cold_start(logger)


@logger.inject_lambda_context(log_event=False)
def handler(event: dict, context: LambdaContext) -> dict:
    return authorize(event.get("authorizationToken"), event["methodArn"], wiring.job_service())
