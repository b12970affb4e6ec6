"""Worker Lambda: SQS event source, the batch's runs worked together, partial batch failures reported; a
poller's warm-up event (``duetime.scheduling.warmup``) is answered at once."""

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.data_classes import SQSEvent
from aws_lambda_powertools.utilities.typing import LambdaContext

from duetime import build_info, wiring
from duetime.execution.run_batch import work_batch
from duetime.execution.worker_metrics import record_work
from duetime.scheduling.warmup import is_warmup
from duetime.tracing import TRACED_MODULES

logger = Logger(service="duetime-worker")
metrics = Metrics(namespace="duetime", service="worker")
metrics.set_default_dimensions(**wiring.metric_dimensions())  # the installation: stacks share no metric
tracer = Tracer(service="duetime-worker", patch_modules=TRACED_MODULES)
build_info.log_cold_start(logger)


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False, capture_error=False)
def handler(event: dict, context: LambdaContext) -> dict:
    if is_warmup(event):  # a poller warming an environment before a minute with runs: nothing to do
        return {"warmed": True}
    outcome = work_batch(wiring.worker(), [(r.message_id, r.body) for r in SQSEvent(event).records])
    for report in outcome.reports:
        record_work(metrics, report)
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in outcome.failed]}
