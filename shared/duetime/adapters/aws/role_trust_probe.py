"""Asking STS whether a role requires duetime's external id (``duetime.ports.RoleTrustProbe``), with boto3.

AWS does not let duetime read a customer's trust policy, but it answers the question that matters: the
probe calls AssumeRole on the role exactly as the worker would for the team (its principal, session name
and ``duetime:team`` tag), with an external id that is no team's. A role that requires the team's id
refuses it (AccessDenied); one that does not gives credentials, which are dropped unused.

The answer means something only when the probe asks as the principal the role trusts: the worker's role.
The API function runs as another role, so with ``as_role_arn`` (the worker's role) the probe first assumes
that role, under a session policy that allows nothing but ``sts:AssumeRole`` and ``sts:TagSession`` (the
worker's own policy narrows that to ``duetime-target-*``), and asks from that session: a trust policy that
names the worker's role trusts its sessions too. Without it, the probe asks with its own credentials (a
process that runs as the worker's role).

Clients are made on first use, never at import, as the AWS target caller makes them (one attempt within
``MAX_STS_SECONDS``; the endpoint is boto3's, ``AWS_ENDPOINT_URL_STS``, unless ``endpoint_url`` is given).
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from duetime.adapters.aws.aws_target_caller import MAX_STS_SECONDS, assume_role_request, one_attempt_config
from duetime.ports import AwsRole, RoleTrustUnknown

if TYPE_CHECKING:
    from mypy_boto3_sts.client import STSClient

PROBE_SESSION_SECONDS = 900  # STS's shortest session: credentials a successful probe gets are dropped anyway
REFUSED = "AccessDenied"  # STS's answer to a caller the trust policy does not let in
# What the probe's session of the worker's role may do, whatever that role may: ask STS, nothing else
PROBE_SESSION_POLICY = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": ["sts:AssumeRole", "sts:TagSession"], "Resource": "*"}],
    }
)


class Boto3RoleTrustProbe:
    """Implements ``duetime.ports.RoleTrustProbe``; safe to share between threads.

    ``session`` makes the STS clients (a boto3 session of the process's credentials unless given);
    ``region``: STS's regional endpoint (None: the session's); ``as_role_arn``: the worker's role, assumed
    first so that the probe asks as the principal customers' trust policies name."""

    def __init__(
        self,
        session: boto3.session.Session | None = None,
        region: str | None = None,
        endpoint_url: str | None = None,
        as_role_arn: str | None = None,
    ) -> None:
        self._session = session
        self.region = region
        self.endpoint_url = endpoint_url
        self.as_role_arn = as_role_arn
        self._lock = threading.Lock()  # guards the session (not thread-safe) and the kept client
        self._own_sts: STSClient | None = None

    def admits_a_wrong_external_id(self, role: AwsRole) -> bool:
        sts = self._sts_as_the_worker()
        try:
            sts.assume_role(**assume_role_request(role, PROBE_SESSION_SECONDS))
        except ClientError as exc:
            if _code(exc) == REFUSED:
                return False
            raise RoleTrustUnknown(f"STS answered {_code(exc) or 'an error'}") from exc
        except BotoCoreError as exc:
            raise RoleTrustUnknown(f"STS could not be asked: {type(exc).__name__}") from exc
        return True

    def _sts_as_the_worker(self) -> STSClient:
        """An STS client of the worker's role's session (``as_role_arn``), else of the process's own."""
        own = self._sts()
        if self.as_role_arn is None:
            return own
        try:
            credentials = own.assume_role(
                RoleArn=self.as_role_arn,
                RoleSessionName="duetime-role-trust-probe",
                DurationSeconds=PROBE_SESSION_SECONDS,
                Policy=PROBE_SESSION_POLICY,
            )["Credentials"]
        except (ClientError, BotoCoreError) as exc:  # AccessDenied here is duetime's setup, not the role's
            raise RoleTrustUnknown(f"duetime could not take its worker's role: {exc}") from exc
        return self._sts(
            {
                "aws_access_key_id": credentials["AccessKeyId"],
                "aws_secret_access_key": credentials["SecretAccessKey"],
                "aws_session_token": credentials["SessionToken"],
            }
        )

    def _sts(self, secrets: dict[str, str] | None = None) -> STSClient:
        """An STS client: the process's own (made once and kept), or one of ``secrets`` (made each time)."""
        with self._lock:
            if secrets is None and self._own_sts is not None:
                return self._own_sts
            if self._session is None:
                self._session = boto3.session.Session()
            keys = secrets or {}  # none: the session's own credentials
            made = self._session.client(
                "sts",
                region_name=self.region,
                endpoint_url=self.endpoint_url,
                config=one_attempt_config(MAX_STS_SECONDS),
                aws_access_key_id=keys.get("aws_access_key_id"),
                aws_secret_access_key=keys.get("aws_secret_access_key"),
                aws_session_token=keys.get("aws_session_token"),
            )
            if secrets is None:
                self._own_sts = made
            return made


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))
