"""Calling targets: HTTP and AWS, and the roles they are called under.

A part of ``duetime.ports``: every port, its docstrings the contract every adapter keeps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from duetime.domain.aws_targets import AwsTarget, RunEnvelope


@dataclass(frozen=True)
class TargetRequest:
    url: str
    method: str
    headers: dict[str, str]
    body: bytes | None
    timeout_seconds: float


@dataclass(frozen=True)
class TargetResponse:
    status_code: int | None  # None: no HTTP answer (timeout, connection error, refused target)
    body: str
    error: str | None
    duration_ms: int
    permanent: bool = False  # the call was not made and never will be (e.g. the target was refused)


class TargetCaller(Protocol):
    def call(self, request: TargetRequest) -> TargetResponse:
        """Make the request; never raises for network trouble (it is reported in the response)."""
        ...


@dataclass(frozen=True)
class AwsRole:
    """The IAM role a team's AWS targets are called under, and how it is assumed."""

    role_arn: str
    external_id: str  # duetime's, for the team (``Team.aws_external_id``): the confused-deputy guard
    session_name: str  # ``duetime-<team id>``: CloudTrail in the team's account names the team
    team_id: str  # the session's ``duetime:team`` tag (``aws_targets.team_tag``), for CloudTrail and policies


@dataclass(frozen=True)
class AwsTargetCall:
    target: AwsTarget
    envelope: RunEnvelope
    role: AwsRole | None  # None: the worker's own credentials (allowed on a local stack only)
    timeout_seconds: float


class RoleTrustUnknown(Exception):
    """STS gave no verdict on a role (throttled, unreachable, or duetime's own credentials were refused):
    nothing is known about its trust policy, so a registration waits for another try."""


class RoleTrustProbe(Protocol):
    def admits_a_wrong_external_id(self, role: AwsRole) -> bool:
        """Ask STS whether ``role``'s trust policy lets duetime in with an external id that is not the
        team's: AssumeRole as the worker would call it for ``role.team_id`` (its principal, session name and
        team tag) but with ``role.external_id``, which the caller makes a fresh random id that is no team's.
        True: STS gave credentials (dropped unused), so the trust policy does not require the external id.
        False: STS refused with AccessDenied, as it refuses a role that requires the team's id (or does not
        trust duetime at all). Raises ``RoleTrustUnknown`` for any other outcome; writes nothing."""
        ...


class AwsTargetCaller(Protocol):
    def call(self, call: AwsTargetCall) -> TargetResponse:
        """Make the call once, within ``call.timeout_seconds``, with no retry inside it (duetime's retry
        policy decides what happens next); never raises. The answer is told as HTTP would tell it, so that
        one judge (``duetime.execution.outcomes.judge``) rules every target: 200 done (the body an excerpt of
        the service's answer: a message or event id, an execution ARN, a function's result); 429 throttled;
        the service's own 5xx; 502 a Lambda function error; the service's 4xx for a request it refuses; no
        status for a timeout or a connection error; ``permanent`` for a call that cannot be made (no role
        where one is required). Assuming the role (STS) is part of the call: its refusals are told the same
        way (AccessDenied: 403), under the error ``assume role: <code>: <message>``."""
        ...
