"""LocalStack's SQS event source mapping, made to poll the way AWS's does (``DUETIME_SQS_LONG_POLLING=1``).

What AWS documents (Lambda developer guide, "Configuring scaling behavior for SQS event source mappings"):
for standard queues "Lambda uses long polling to poll a queue until it becomes active. When messages are
available, Lambda starts processing five batches at a time with five concurrent invocations of your
function", and scales up from there (up to 300 more per minute, to the mapping's maximum concurrency).

What LocalStack 2026.3's ``SqsPoller`` does instead: one thread per mapping receives with
``WaitTimeSeconds`` = the mapping's ``MaximumBatchingWindowInSeconds`` (0 by default, so short polls),
invokes the function and waits for it before it receives again, sleeps 1 s after every batch, and after an
empty receive backs off from 0.5-1.5 s up to 5-15 s. A message that arrives into an idle queue therefore
waits up to 15 s, and messages that arrive together run one batch after another. Both are the emulator's,
and both dominate any latency measured through it (BENCHMARKS.md, "Precision on the deployed stack").

``install()`` replaces ``SqsPoller.poll_events`` for standard queues with AWS's pattern, kept small:

- a receive long-polls (``WaitTimeSeconds`` 20, up to 10 messages), so it returns when a message arrives;
  an empty long poll is a normal return, not LocalStack's "empty" that starts a backoff;
- each batch is handed to a thread of its own, at most ``DUETIME_SQS_CONCURRENT_BATCHES`` (default 5, AWS's
  starting point; no scaling beyond it) at once; the receive waits while all of them are busy, as a mapping
  at its maximum concurrency does;
- filtering, partial batch failures and deletes are LocalStack's own ``handle_messages``, unchanged.

FIFO queues keep LocalStack's behaviour (ordering per message group is LocalStack's to keep). The deployed
LocalStack (``scripts/emulators.sh start-deployed``) also sets
``LAMBDA_EVENT_SOURCE_MAPPING_POLL_INTERVAL_SEC=0`` so that the mapping's loop receives again at once after
a batch instead of 1 s later.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

LOG = logging.getLogger(__name__)

ENABLED_BY = "DUETIME_SQS_LONG_POLLING"
CONCURRENCY_FROM = "DUETIME_SQS_CONCURRENT_BATCHES"
AWS_STARTING_BATCHES = 5
LONG_POLL_SECONDS = 20  # SQS's maximum WaitTimeSeconds
MESSAGES_PER_RECEIVE = 10  # SQS's maximum MaxNumberOfMessages
FREE_SLOT_WAIT_SECONDS = 1.0  # how long a receive waits for a free batch before the mapping's loop goes round

_installed = False


def enabled() -> bool:
    return os.environ.get(ENABLED_BY, "").strip().lower() in {"1", "true", "yes"}


def concurrent_batches() -> int:
    raw = os.environ.get(CONCURRENCY_FROM, "").strip()
    return max(1, int(raw)) if raw else AWS_STARTING_BATCHES


def install() -> None:
    """Patch ``SqsPoller.poll_events`` once (a no-op unless ``DUETIME_SQS_LONG_POLLING`` is set)."""
    global _installed
    if _installed or not enabled():
        return
    from localstack.services.lambda_.event_source_mapping.pollers.sqs_poller import SqsPoller

    localstack_poll_events = SqsPoller.poll_events
    slots_per_mapping = concurrent_batches()

    def poll_events(self: Any) -> None:
        if self.is_fifo_queue:
            return localstack_poll_events(self)
        slots: threading.BoundedSemaphore = self.__dict__.setdefault(
            "_duetime_batch_slots", threading.BoundedSemaphore(slots_per_mapping)
        )
        if not slots.acquire(timeout=FREE_SLOT_WAIT_SECONDS):
            return  # every batch busy: the mapping's loop comes back (and sees a shutdown meanwhile)
        try:
            messages = self.source_client.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=min(self.batch_size, MESSAGES_PER_RECEIVE),
                WaitTimeSeconds=LONG_POLL_SECONDS,
                MessageAttributeNames=["All"],
                MessageSystemAttributeNames=["All"],
            ).get("Messages", [])
        except BaseException:
            slots.release()
            raise
        if not messages:
            slots.release()
            return
        threading.Thread(
            target=_run_batch, args=(self, messages, slots), name="duetime-sqs-batch", daemon=True
        ).start()

    SqsPoller.poll_events = poll_events  # type: ignore[method-assign]
    _installed = True
    LOG.info("SQS event source mappings long-poll with up to %d concurrent batches", slots_per_mapping)


def _run_batch(poller: Any, messages: list[dict[str, Any]], slots: threading.BoundedSemaphore) -> None:
    try:
        poller.handle_messages(messages)
    except Exception as e:  # as LocalStack's own poll_events: log, the messages come back after visibility
        LOG.warning("SQS batch processing failed: %s", e, exc_info=LOG.isEnabledFor(logging.DEBUG))
    finally:
        slots.release()
