"""How a target's answer is judged, and when a retry happens. Pure functions."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from enum import StrEnum

from duetime.domain.models import MAX_SQS_DELAY_SECONDS, RetryPolicy
from duetime.ports import TargetResponse

RETRYABLE_STATUS = frozenset({408, 429})


class Verdict(StrEnum):
    SUCCESS = "success"
    RETRYABLE = "retryable"  # timeouts, connection errors, 408, 429, 5xx
    PERMANENT = "permanent"  # any other answer: retrying cannot help


def judge(response: TargetResponse) -> Verdict:
    code = response.status_code
    if response.permanent:
        return Verdict.PERMANENT
    if code is None or code in RETRYABLE_STATUS or code >= 500:
        return Verdict.RETRYABLE
    if 200 <= code < 300:
        return Verdict.SUCCESS
    return Verdict.PERMANENT


def retry_time(policy: RetryPolicy, failed_attempt: int, now: datetime, rng: random.Random) -> datetime:
    """When the next attempt may start: the policy's backoff plus up to a quarter of it (at least 1 s) of
    random jitter, so a burst of failures does not come back as a burst (at most the SQS delay limit)."""
    backoff = policy.backoff_for(failed_attempt)
    jitter = rng.uniform(0, max(1.0, backoff / 4))
    return now + timedelta(seconds=min(backoff + jitter, MAX_SQS_DELAY_SECONDS))
