"""API Lambda (API Gateway REST). The job and run routes arrive with the API issue; today: health."""

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.utilities.typing import LambdaContext

from duetime import __version__

logger = Logger(service="duetime-api")
app = APIGatewayRestResolver(enable_validation=True)


@app.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok", "version": __version__}


@logger.inject_lambda_context
def handler(event: dict, context: LambdaContext) -> dict:
    return app.resolve(event, context)
