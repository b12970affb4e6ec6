"""The deploy check (CloudFormation custom resource ``Custom::DuetimeDeployCheck``): refuses a release the
installation's record says may not replace the one it runs (``duetime.upgrades.deploy_gate``), before any
function of the stack is updated."""

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from duetime import build_info, wiring
from duetime.upgrades.deploy_gate import answer_cloudformation

logger = Logger(service="duetime-deploy-gate")
build_info.log_cold_start(logger)


@logger.inject_lambda_context(log_event=False)
def handler(event: dict, context: LambdaContext) -> dict:
    answer = answer_cloudformation(event, wiring.deploy_gate_record, wiring.cfn_respond)
    logger.info("deploy check", extra={"allowed": answer.allowed, "reason": answer.reason})
    return {"allowed": answer.allowed}
