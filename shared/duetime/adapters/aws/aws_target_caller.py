"""Calling AWS targets (Lambda, SQS, SNS, EventBridge, Step Functions) with boto3, under the team's role.

A call assumes the team's IAM role with STS, with the team's external id and the session tag
``duetime:team`` (the credentials are kept until five minutes before they expire), makes one request with
botocore's retries off (a Lambda invoke retried after a read timeout would run the function twice;
duetime's retry policy decides what happens next) and tells the answer as HTTP would
(``duetime.ports.AwsTargetCaller``), so that ``duetime.execution.outcomes.judge`` rules it as any target's.

Clients are made on first use, never at import, and kept per service, region, role and timeout (a role's
client is replaced when its credentials are). Endpoints are boto3's: ``endpoint_urls`` when given, else
the standard variables, named by each service's id: ``AWS_ENDPOINT_URL_LAMBDA``, ``_SQS``, ``_SNS``,
``_EVENTBRIDGE`` (not ``_EVENTS``), ``_SFN`` and ``_STS``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import boto3
import botocore.exceptions
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    CredentialRetrievalError,
    HTTPClientError,
    NoCredentialsError,
    NoRegionError,
    ParamValidationError,
    PartialCredentialsError,
    ReadTimeoutError,
)

from duetime.domain.aws_targets import (
    TEAM_TAG_KEY,
    AwsTarget,
    EventBridgeTarget,
    LambdaTarget,
    RunEnvelope,
    SnsTarget,
    SqsTarget,
    StepFunctionsTarget,
    execution_name,
    fifo_deduplication_id,
    team_tag,
)
from duetime.ports import AwsRole, AwsTargetCall, TargetResponse

if TYPE_CHECKING:
    from mypy_boto3_events.client import EventBridgeClient
    from mypy_boto3_lambda.client import LambdaClient
    from mypy_boto3_sns.client import SNSClient
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_stepfunctions.client import SFNClient

BODY_KEPT = 1024  # characters of the service's answer kept, as for an HTTP target
MESSAGE_KEPT = 300  # characters of an error's message kept
ROLE_SESSION_SECONDS = 3600  # also the most a chained role session may last (the worker runs as a role)
REFRESH_BEFORE = timedelta(minutes=5)  # credentials with less left are renewed before a call
MAX_CONNECT_SECONDS = 5.0
# AssumeRole's own timeout at most: STS answers in well under a second, and the call's time is the target's.
# A call that renews a role's credentials (hourly) may so take up to this much longer than its timeout.
MAX_STS_SECONDS = 5.0
MAX_CLIENTS = 512  # clients kept; the oldest made is dropped past this
MAX_POOL_CONNECTIONS = 32  # per client: the worker calls one target from several threads at once
NO_ROLE = "no IAM role: register one (PUT /v1/team/aws-role) or set target.role_arn"

# Error codes that mean "slow down", whatever HTTP status the service sends them with (several are 400s)
THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "Throttled",  # SNS
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",  # Lambda
        "RequestLimitExceeded",
        "ProvisionedThroughputExceededException",
        "KMSThrottlingException",
        "KMSThrottling",  # SNS
        "KmsThrottled",  # SQS
        "KmsThrottlingException",  # Step Functions
        "ExecutionLimitExceeded",  # Step Functions' running executions at their quota: clears as they end
        "SlowDown",
    }
)
# A failed EventBridge entry's codes that are the service's trouble rather than the request's
_EVENTBRIDGE_SERVER_CODES = frozenset({"InternalException", "InternalFailure", "ServiceUnavailable"})
# Errors that say this worker cannot make AWS calls at all: retrying cannot help
_SETUP_ERRORS = (NoCredentialsError, PartialCredentialsError, CredentialRetrievalError, NoRegionError)

_Answer = tuple[int, str, str | None]  # status, body, error


@dataclass(frozen=True)
class _Credentials:
    access_key_id: str
    secret_access_key: str
    session_token: str
    expiration: datetime


class _AssumeRoleFailed(Exception):
    """STS did not give the role's credentials; ``cause`` says why (told as ``assume role: ...``)."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _utc_now() -> datetime:
    return datetime.now(UTC)


class Boto3AwsTargetCaller:
    """Implements ``duetime.ports.AwsTargetCaller``; safe to share between threads.

    ``session`` makes every client (a boto3 session of the worker's own credentials unless given; the STS
    client uses them). ``default_region``: for resources whose ARN or URL names no region (an event bus by
    name, a LocalStack queue URL) and for STS; None: the session's region. ``require_role=False`` lets a
    call without a role use the worker's own credentials (a local stack); otherwise it is refused.
    ``endpoint_urls``: an endpoint per boto3 service name (``"sqs"``, ``"events"``, ``"stepfunctions"``...),
    over boto3's own variables. ``now`` tells when assumed credentials are due for renewal.
    """

    def __init__(
        self,
        session: boto3.session.Session | None = None,
        default_region: str | None = None,
        require_role: bool = True,
        endpoint_urls: Mapping[str, str] | None = None,
        now: Callable[[], datetime] = _utc_now,
    ) -> None:
        self._session = session
        self.default_region = default_region
        self.require_role = require_role
        self.endpoint_urls = dict(endpoint_urls or {})
        self._now = now
        self._lock = threading.Lock()  # guards the three dicts below and the session (not thread-safe)
        self._clients: dict[tuple[str, str | None, AwsRole | None, float], tuple[str | None, Any]] = {}
        self._credentials: dict[AwsRole, _Credentials] = {}
        self._role_locks: dict[AwsRole, threading.Lock] = {}  # one AssumeRole at a time per role

    def call(self, call: AwsTargetCall) -> TargetResponse:
        started = time.monotonic()
        if call.role is None and self.require_role:
            return TargetResponse(None, "", NO_ROLE, _ms_since(started), permanent=True)
        if type(call.target) not in _SENDERS:
            unknown = f"not an AWS target this worker can call: {type(call.target).__name__}"
            return TargetResponse(None, "", unknown, _ms_since(started), permanent=True)
        try:
            status, body, error = self._call(call)
            return TargetResponse(status, body, error, _ms_since(started))
        except _AssumeRoleFailed as failed:
            return _failed(failed.cause, call.timeout_seconds, started, prefix="assume role: ")
        except Exception as exc:  # never raises: whatever went wrong is told in the response
            return _failed(exc, call.timeout_seconds, started)

    def _call(self, call: AwsTargetCall) -> _Answer:
        target = call.target
        service, send = _SENDERS[type(target)]
        credentials = self._credentials_for(call.role, call.timeout_seconds) if call.role else None
        client = self._client(service, target.region, call.role, credentials, call.timeout_seconds)
        return send(client, target, call.envelope)

    def _credentials_for(self, role: AwsRole, timeout: float) -> _Credentials:
        """The role's credentials: those kept while more than ``REFRESH_BEFORE`` is left, else new ones."""
        with self._lock:
            role_lock = self._role_locks.setdefault(role, threading.Lock())
        with role_lock:
            with self._lock:
                kept = self._credentials.get(role)
            if kept is not None and kept.expiration - self._now() > REFRESH_BEFORE:
                return kept
            sts = self._client("sts", None, None, None, min(timeout, MAX_STS_SECONDS))
            try:
                answer = sts.assume_role(**assume_role_request(role, ROLE_SESSION_SECONDS))["Credentials"]
            except (ClientError, BotoCoreError) as exc:
                raise _AssumeRoleFailed(exc) from exc
            fresh = _Credentials(
                answer["AccessKeyId"], answer["SecretAccessKey"], answer["SessionToken"], answer["Expiration"]
            )
            with self._lock:
                self._credentials[role] = fresh
            return fresh

    def _client(
        self,
        service: str,
        region: str | None,
        role: AwsRole | None,
        credentials: _Credentials | None,
        timeout: float,
    ) -> Any:
        """The kept client for ``service`` in ``region`` (None: the default) under ``role``'s current
        ``credentials`` (None: the worker's own) with ``timeout``; made when missing or of older ones."""
        region = region or self.default_region
        key = (service, region, role, timeout)
        identity = credentials.access_key_id if credentials else None
        with self._lock:
            kept = self._clients.get(key)
            if kept is not None and kept[0] == identity:
                return kept[1]
            if self._session is None:
                self._session = boto3.session.Session()
            secrets: dict[str, str] = {}
            if credentials is not None:
                secrets = {
                    "aws_access_key_id": credentials.access_key_id,
                    "aws_secret_access_key": credentials.secret_access_key,
                    "aws_session_token": credentials.session_token,
                }
            made = self._session.client(  # type: ignore[call-overload]
                service,
                region_name=region,
                endpoint_url=self.endpoint_urls.get(service),
                config=one_attempt_config(timeout),
                **secrets,
            )
            self._clients.pop(key, None)
            while len(self._clients) >= MAX_CLIENTS:
                self._clients.pop(next(iter(self._clients)))
            self._clients[key] = (identity, made)
            return made


def one_attempt_config(timeout: float) -> Config:
    """A client's settings: one attempt (no retry inside a call), connecting within ``MAX_CONNECT_SECONDS``
    at most and answering within ``timeout``."""
    return Config(
        # total_max_attempts counts the first attempt; max_attempts would count retries (1: one)
        retries={"total_max_attempts": 1, "mode": "standard"},
        connect_timeout=min(MAX_CONNECT_SECONDS, timeout),
        read_timeout=timeout,
        max_pool_connections=MAX_POOL_CONNECTIONS,
    )


def assume_role_request(role: AwsRole, seconds: int) -> dict[str, Any]:
    """AssumeRole's parameters for ``role``: its external id and session name, and the team's session tag
    ``duetime:team`` (transitive, so a role the customer chains into from this session keeps it). Session
    tags need ``sts:TagSession`` in the role's trust policy beside ``sts:AssumeRole``
    (docs/guide/targets.md)."""
    return {
        "RoleArn": role.role_arn,
        "ExternalId": role.external_id,
        "RoleSessionName": role.session_name,
        "DurationSeconds": seconds,
        "Tags": [team_tag(role.team_id)],
        "TransitiveTagKeys": [TEAM_TAG_KEY],
    }


def _invoke_lambda(client: LambdaClient, target: LambdaTarget, envelope: RunEnvelope) -> _Answer:
    """Invoke the function synchronously with ``{"duetime": <envelope>, "payload": <payload>}``: 200 and
    the start of what it returned, or 502 for a function error (the start of its error payload)."""
    answer = client.invoke(
        FunctionName=target.function_arn,
        InvocationType="RequestResponse",
        Payload=json.dumps({"duetime": envelope.as_json(), "payload": target.payload}),
    )
    body = _excerpt(answer["Payload"])
    if "FunctionError" in answer:
        return 502, body, f"function error: {answer['FunctionError']}"
    return 200, body, None


def _send_sqs(client: SQSClient, target: SqsTarget, envelope: RunEnvelope) -> _Answer:
    """Send the message with the envelope in its attributes; a FIFO queue deduplicates by the run id."""
    request: dict[str, Any] = {
        "QueueUrl": target.queue_url,
        "MessageBody": target.message,
        "MessageAttributes": _message_attributes(envelope),
    }
    if target.message_group_id is not None:  # a FIFO queue's group, or a standard (fair) queue's tenant
        request["MessageGroupId"] = target.message_group_id
    if target.fifo:
        request["MessageDeduplicationId"] = fifo_deduplication_id(envelope.run_id)
    answer = client.send_message(**request)
    return 200, json.dumps({"MessageId": answer["MessageId"]}), None


def _publish_sns(client: SNSClient, target: SnsTarget, envelope: RunEnvelope) -> _Answer:
    """Publish the message with the envelope in its attributes; a FIFO topic deduplicates by the run id."""
    request: dict[str, Any] = {
        "TopicArn": target.topic_arn,
        "Message": target.message,
        "MessageAttributes": _message_attributes(envelope),
    }
    if target.fifo:
        request["MessageGroupId"] = target.message_group_id
        request["MessageDeduplicationId"] = fifo_deduplication_id(envelope.run_id)
    answer = client.publish(**request)
    return 200, json.dumps({"MessageId": answer["MessageId"]}), None


def _put_event(client: EventBridgeClient, target: EventBridgeTarget, envelope: RunEnvelope) -> _Answer:
    """Put one event, its detail the target's plus ``"duetime": <envelope>``. PutEvents answers 200 even
    when the entry fails: a failed entry is told by its code (throttled 429, the service's fault 500, else
    400)."""
    answer = client.put_events(
        Entries=[
            {
                "EventBusName": target.event_bus_name,
                "Source": target.source,
                "DetailType": target.detail_type,
                "Detail": json.dumps({**target.detail, "duetime": envelope.as_json()}),
            }
        ]
    )
    entry = answer["Entries"][0]
    if answer.get("FailedEntryCount", 0) or "EventId" not in entry:
        code = entry.get("ErrorCode", "")
        status = 429 if code in THROTTLING_CODES else 500 if code in _EVENTBRIDGE_SERVER_CODES else 400
        return status, "", f"{code}: {entry.get('ErrorMessage', '')[:MESSAGE_KEPT]}"
    return 200, json.dumps({"EventId": entry["EventId"]}), None


def _start_execution(client: SFNClient, target: StepFunctionsTarget, envelope: RunEnvelope) -> _Answer:
    """Start an execution named for the run's attempt with ``{"duetime": <envelope>, "input": <input>}``.
    One of that name already there is the same attempt's (a repeat), so it counts as started."""
    name = execution_name(envelope.run_id, envelope.attempt)
    try:
        answer = client.start_execution(
            stateMachineArn=target.state_machine_arn,
            name=name,
            input=json.dumps({"duetime": envelope.as_json(), "input": target.input}),
        )
    except ClientError as exc:
        if _code(exc) != "ExecutionAlreadyExists":
            raise
        started = {"executionArn": execution_arn(target.state_machine_arn, name), "already_started": True}
        return 200, json.dumps(started), None
    started = {"executionArn": answer["executionArn"], "startDate": answer["startDate"]}
    return 200, json.dumps(started, default=_iso), None


_Sender = Callable[[Any, Any, RunEnvelope], _Answer]
_SENDERS: dict[type[AwsTarget], tuple[str, _Sender]] = {
    LambdaTarget: ("lambda", _invoke_lambda),
    SqsTarget: ("sqs", _send_sqs),
    SnsTarget: ("sns", _publish_sns),
    EventBridgeTarget: ("events", _put_event),
    StepFunctionsTarget: ("stepfunctions", _start_execution),
}


def execution_arn(state_machine_arn: str, name: str) -> str:
    """The ARN of execution ``name`` of a state machine (given by its ARN, or a version's or alias's)."""
    parts = state_machine_arn.split(":")  # arn:<partition>:states:<region>:<account>:stateMachine:<name>
    return ":".join([*parts[:5], "execution", parts[6], name])


def _message_attributes(envelope: RunEnvelope) -> dict[str, dict[str, str]]:
    return {
        name: {"DataType": "String", "StringValue": value}
        for name, value in envelope.message_attributes().items()
    }


def _excerpt(stream: Any) -> str:
    """The first ``BODY_KEPT`` characters of a streamed answer (at most 4 bytes a character are read)."""
    try:
        data: bytes = stream.read(BODY_KEPT * 4)
    finally:
        stream.close()
    return data.decode("utf-8", errors="replace")[:BODY_KEPT]


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _failure(exc: Exception, timeout: float) -> tuple[int | None, str, bool]:
    """(status, error, permanent) for a call that raised ``exc``."""
    if isinstance(exc, ClientError):
        code = _code(exc)
        message = str(exc.response.get("Error", {}).get("Message", ""))[:MESSAGE_KEPT]
        status: int | None = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or None
        return (429 if code in THROTTLING_CODES else status), f"{code}: {message}", False
    if isinstance(exc, ReadTimeoutError | ConnectTimeoutError):
        return None, f"timeout after {timeout:g}s", False
    if isinstance(exc, botocore.exceptions.ConnectionError | HTTPClientError):
        return None, f"connection error: {type(exc).__name__}", False
    if isinstance(exc, _SETUP_ERRORS):
        return None, f"cannot call AWS: {type(exc).__name__}: {exc}", True
    if isinstance(exc, ParamValidationError):
        return None, f"invalid request: {exc}"[: MESSAGE_KEPT * 2], True
    return None, f"{type(exc).__name__}: {exc}"[: MESSAGE_KEPT * 2], False


def _failed(exc: Exception, timeout: float, started: float, prefix: str = "") -> TargetResponse:
    status, error, permanent = _failure(exc, timeout)
    return TargetResponse(status, "", prefix + error, _ms_since(started), permanent=permanent)


def _iso(value: Any) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
