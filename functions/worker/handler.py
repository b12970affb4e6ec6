"""Worker Lambda: SQS event source, one run attempt per record, partial batch failures reported; a poller's
warm-up event (``duetime.warmup``) is answered at once."""

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from duetime import wiring
from duetime.adapters.sqs import decode
from duetime.observability import record_work
from duetime.warmup import is_warmup

logger = Logger(service="duetime-worker")
metrics = Metrics(namespace="duetime", service="worker")
tracer = Tracer(service="duetime-worker")
processor = BatchProcessor(event_type=EventType.SQS)


def record_handler(record: SQSRecord) -> str:
    report = wiring.worker().process(decode(record.body))
    record_work(metrics, report)
    return report.outcome.value


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict, context: LambdaContext) -> dict:
    if is_warmup(event):  # a poller warming an environment before a minute with runs: nothing to do
        return {"warmed": True}
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
