"""boto3 clients, created lazily (never at import time) and shared per process.

Endpoints come from the standard variables (``AWS_ENDPOINT_URL_DYNAMODB``, ``AWS_ENDPOINT_URL_SQS``...),
so the same code talks to AWS, DynamoDB Local or LocalStack. With ``DUETIME_STRICT_AWS_LIMITS=1`` (set by
``make run`` and ``make test``) every client refuses requests AWS would refuse (``aws_limits``).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Literal, overload

import boto3
from botocore.config import Config

from duetime.adapters.aws.aws_limits import enforce_aws_limits, strict_limits_wanted
from duetime.adapters.aws.lean_transport import lean_wanted, with_lean_transport

if TYPE_CHECKING:
    from mypy_boto3_cloudformation.client import CloudFormationClient
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_events.client import EventBridgeClient
    from mypy_boto3_lambda.client import LambdaClient
    from mypy_boto3_logs.client import CloudWatchLogsClient
    from mypy_boto3_sns.client import SNSClient
    from mypy_boto3_sqs.client import SQSClient

# parameter_validation off: botocore's client-side check of every request against the service model took
# about a tenth of the client CPU of a run (the poller 0.77 -> 0.67 ms, the worker 2.46 -> 2.17 ms a run,
# measured on the emulators); the service validates every request anyway, and the tests' strict-limits
# hooks (aws_limits) still check what AWS would refuse.
# total_max_attempts counts the first attempt (botocore's max_attempts counts retries: 5 meant 6 attempts,
# which is what these clients always made; now said as it is).
_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 6},
    max_pool_connections=64,
    connect_timeout=3,
    read_timeout=10,
    parameter_validation=False,
)


@overload
def client(service: Literal["dynamodb"]) -> DynamoDBClient: ...
@overload
def client(service: Literal["sqs"]) -> SQSClient: ...
@overload
def client(service: Literal["sns"]) -> SNSClient: ...
@overload
def client(service: Literal["lambda"]) -> LambdaClient: ...
def client(service: str) -> Any:
    """The process's shared client of ``service`` (made on first use: ``new_client``)."""
    return _shared_client(service)


@functools.cache
def _shared_client(service: str) -> Any:
    return _made_client(service, None, None)


@overload
def new_client(
    service: Literal["dynamodb"], endpoint_url: str | None = None, strict_limits: bool | None = None
) -> DynamoDBClient: ...
@overload
def new_client(
    service: Literal["sqs"], endpoint_url: str | None = None, strict_limits: bool | None = None
) -> SQSClient: ...
@overload
def new_client(
    service: Literal["sns"], endpoint_url: str | None = None, strict_limits: bool | None = None
) -> SNSClient: ...
@overload
def new_client(
    service: Literal["lambda"], endpoint_url: str | None = None, strict_limits: bool | None = None
) -> LambdaClient: ...
@overload
def new_client(
    service: Literal["events"], endpoint_url: str | None = None, strict_limits: bool | None = None
) -> EventBridgeClient: ...
@overload
def new_client(
    service: Literal["logs"], endpoint_url: str | None = None, strict_limits: bool | None = None
) -> CloudWatchLogsClient: ...
@overload
def new_client(
    service: Literal["cloudformation"], endpoint_url: str | None = None, strict_limits: bool | None = None
) -> CloudFormationClient: ...
def new_client(service: str, endpoint_url: str | None = None, strict_limits: bool | None = None) -> Any:
    """A client of its own (not shared), e.g. one whose requests a benchmark counts through event hooks, or
    one for another endpoint than the environment names (the stack deployed into LocalStack). DynamoDB's
    and SQS's hot operations go by the lean transport (``lean_transport``) unless it is turned off.
    ``strict_limits``: refuse what AWS would refuse (``aws_limits``); None: as the environment says (a
    benchmark of a Lambda's CPU says False: on AWS no client checks, the service does)."""
    return _made_client(service, endpoint_url, strict_limits)


def _made_client(service: str, endpoint_url: str | None, strict_limits: bool | None) -> Any:
    session = boto3.session.Session()
    made = session.client(service, config=_CONFIG, endpoint_url=endpoint_url)  # type: ignore[call-overload]
    if strict_limits_wanted() if strict_limits is None else strict_limits:
        made = enforce_aws_limits(made)
    return with_lean_transport(made, session.get_credentials()) if lean_wanted() else made
