"""One way to try again: exponential backoff with full jitter, capped, for a bounded number of attempts.

AWS's advice ("Exponential Backoff And Jitter", the Architecture Blog; the SDKs' retry modes): wait a random
time between 0 and ``min(cap, base * 2 ** (retry - 1))`` before each retry, so that many clients throttled
together spread out instead of coming back in step. Built on tenacity, with the sleep and the random source
injected: a test passes a list's ``append`` as the sleep and a seeded ``random.Random``, and nothing waits.

Two shapes:

* ``retrying(backoff, retry_on=..., retry_if=...)``: a tenacity ``Retrying`` that calls a function again when
  it raises one of ``retry_on`` or returns a value ``retry_if`` accepts. When the attempts run out it raises
  the last error itself (never tenacity's ``RetryError``), or returns the last value.
* ``resend(send, first, backoff)``: for a batch answered in part (BatchWriteItem's ``UnprocessedItems``,
  BatchGetItem's ``UnprocessedKeys``, the statements of a BatchExecuteStatement that failed for a passing
  reason, SQS's ``Failed`` entries): ``send`` is given what is left until it leaves nothing.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import tenacity
from tenacity.wait import wait_base

T = TypeVar("T")
Sleep = Callable[[float], object]
_RNG = random.Random()  # one for the process (seeding one a call from os.urandom showed in profiles)
_MAX_DOUBLINGS = 60  # past this the cap has long applied (an unbounded loop's ceiling stays a finite float)


@dataclass(frozen=True)
class Backoff:
    """``attempts``: the calls in all, the first one included (None: until done); the n-th retry waits a
    random time up to ``min(cap_seconds, base_seconds * 2 ** (n - 1))``."""

    attempts: int | None
    base_seconds: float
    cap_seconds: float

    def __post_init__(self) -> None:
        assert self.attempts is None or self.attempts >= 1, self.attempts
        assert 0 <= self.base_seconds <= self.cap_seconds, (self.base_seconds, self.cap_seconds)

    def ceiling(self, retry: int) -> float:
        """The longest wait before the ``retry``-th retry (1 for the first)."""
        return min(self.cap_seconds, math.ldexp(self.base_seconds, min(retry - 1, _MAX_DOUBLINGS)))

    def delay(self, retry: int, rng: random.Random) -> float:
        """Full jitter: anywhere from 0 to the ceiling."""
        return rng.uniform(0.0, self.ceiling(retry))


class _FullJitter(wait_base):
    def __init__(self, backoff: Backoff, rng: random.Random) -> None:
        self.backoff = backoff
        self.rng = rng

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        # attempt_number counts the calls made so far: after the first, the wait is the first retry's
        return self.backoff.delay(retry_state.attempt_number, self.rng)


# A batch's unprocessed part (BatchWriteItem's UnprocessedItems, BatchGetItem's UnprocessedKeys) is sent
# again until none is left, as AWS's references say ("Typically, you would call BatchWriteItem in a loop
# ... until all items have been processed"), after a wait: "If DynamoDB returns any unprocessed items, you
# should retry the batch operation on those items. However, we strongly recommend that you use an
# exponential backoff algorithm. If you retry the batch operation immediately, the underlying read or write
# requests can still fail due to throttling on the individual tables." (BatchWriteItem, BatchGetItem API
# references.) Up to 50 ms before the first resend, doubling to at most 2 s.
UNPROCESSED = Backoff(attempts=None, base_seconds=0.05, cap_seconds=2.0)


def _last_outcome(retry_state: tenacity.RetryCallState) -> Any:
    """When the attempts run out: the last call's error raised as it was, or its value returned."""
    assert retry_state.outcome is not None
    return retry_state.outcome.result()


def retrying(
    backoff: Backoff,
    *,
    retry_on: type[BaseException] | tuple[type[BaseException], ...] = (),
    retry_if: Callable[[Any], bool] | None = None,
    sleep: Sleep = time.sleep,
    rng: random.Random | None = None,
) -> tenacity.Retrying:
    """A tenacity ``Retrying`` for ``backoff``: call it with the function and its arguments. It tries again
    when the function raises one of ``retry_on`` or returns a value for which ``retry_if`` is true; any other
    error is raised at once. Once the attempts are spent, the last error is raised (not a ``RetryError``) or
    the last value returned, so a caller's outcome on giving up is its own."""
    retry: tenacity.retry_base = tenacity.retry_never
    if retry_on:
        retry = tenacity.retry_if_exception_type(retry_on)
    if retry_if is not None:
        retry = retry | tenacity.retry_if_result(retry_if)
    return tenacity.Retrying(
        stop=tenacity.stop_never
        if backoff.attempts is None
        else tenacity.stop_after_attempt(backoff.attempts),
        wait=_FullJitter(backoff, rng or _RNG),
        retry=retry,
        sleep=cast(Callable[[float], None], sleep),  # its answer is ignored (an Event's wait returns one)
        reraise=True,
        retry_error_callback=_last_outcome,
    )


def resend(
    send: Callable[[T], T],
    first: T,
    backoff: Backoff,
    *,
    sleep: Sleep = time.sleep,
    rng: random.Random | None = None,
) -> T:
    """``send(first)``, then, while its answer is something left (truthy), ``send`` of that after a backoff;
    the last answer: empty when all went, else what was still left when the attempts ran out. An error
    ``send`` raises is raised at once."""
    left = first

    def once() -> T:
        nonlocal left
        left = send(left)
        return left

    answer: T = retrying(backoff, retry_if=bool, sleep=sleep, rng=rng)(once)
    return answer
