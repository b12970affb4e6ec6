"""An SQS batch of run messages, worked as one batch: what the worker function and the local event source
mapping both do with the records they receive.

Each record's body is a run message (``adapters.sqs.decode``); the worker works all of them together
(``Worker.process_batch``). A record fails (it comes back after the queue's visibility timeout, and after
``maxReceiveCount`` goes to the dead-letter queue) when its body is not a run message, when its own run
raised, or when the batch as a whole could not be worked (say the store refused the lease request): the
lease and result conditions make working it again harmless.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from duetime.execution.worker import WorkReport
from duetime.ports import RunMessage
from duetime.ports.queue import decode

log = logging.getLogger(__name__)


@dataclass
class BatchOutcome:
    reports: list[WorkReport] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # the message ids to hand back to the queue
    errors: list[Exception] = field(default_factory=list)


class BatchWorker(Protocol):
    """What ``work_batch`` needs of a worker (``duetime.execution.worker.Worker``)."""

    def process_batch(self, messages: Sequence[RunMessage]) -> list[WorkReport | Exception]: ...


def work_batch(worker: BatchWorker, records: Sequence[tuple[str, str]]) -> BatchOutcome:
    """Work ``records`` (message id, body) as one batch; the reports of the runs worked, and the ids of the
    records that failed."""
    outcome = BatchOutcome()
    decoded: list[tuple[str, RunMessage]] = []
    for message_id, body in records:
        try:
            decoded.append((message_id, decode(body)))
        except ValueError as exc:
            log.error("not a run message", extra={"message_id": message_id})
            outcome.failed.append(message_id)
            outcome.errors.append(exc)
    if not decoded:
        return outcome
    try:
        results = worker.process_batch([message for _, message in decoded])
    except Exception as exc:
        log.exception("the batch failed", extra={"messages": len(decoded)})
        outcome.failed.extend(message_id for message_id, _ in decoded)
        outcome.errors.append(exc)
        return outcome
    for (message_id, _), result in zip(decoded, results, strict=True):
        if isinstance(result, Exception):
            outcome.failed.append(message_id)
            outcome.errors.append(result)
        else:
            outcome.reports.append(result)
    return outcome
