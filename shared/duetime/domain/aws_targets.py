"""Targets that call AWS services directly: Lambda, SQS, SNS, EventBridge and Step Functions.

Each is validated here (ARNs and URLs by pattern, sizes, FIFO rules), and each call carries the run's
envelope (``RunEnvelope``): the run id (the idempotency key), the attempt and the nominal time, where the
service lets it travel (docs/guide/targets.md, "AWS targets"):

- lambda: the event is ``{"duetime": <envelope>, "payload": <payload>}``;
- sqs, sns: the message as given, the envelope in message attributes (``duetime-run-id``, ...: 4 of the
  10 a message may have); FIFO: the deduplication id is the run id, so a repeated attempt within the
  service's 5-minute window is dropped;
- eventbridge: the detail as given plus ``"duetime": <envelope>``;
- stepfunctions: the input is ``{"duetime": <envelope>, "input": <input>}`` and the execution's name is
  ``execution_name(run_id, attempt)``: a repeat of the same attempt cannot start a second execution.

The worker calls them under the team's IAM role (``role_arn`` here, else the team's registered role), which
must be named ``duetime-target-...`` and trust duetime's worker with the team's external id.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, ConfigDict, Field, JsonValue, ValidationInfo, field_validator

from duetime.domain.stored_format import ReadsStoredTolerantly
from duetime.domain.timeutil import iso_z

MAX_PAYLOAD_BYTES = 64 * 1024  # as an HTTP target's body: runs carry their target (DynamoDB, SQS limits)

PARTITION = r"aws(-cn|-us-gov|-iso|-iso-b)?"
REGION = r"[a-z]{2}(-[a-z]+)+-[0-9]{1,2}"
ACCOUNT = r"[0-9]{12}"
ROLE_NAME_PREFIX = "duetime-target-"  # the worker's role may assume only roles named so (infra/cdk)
ROLE_ARN_PATTERN = rf"^arn:{PARTITION}:iam::{ACCOUNT}:role/{ROLE_NAME_PREFIX}[A-Za-z0-9+=,.@_-]{{1,49}}$"
# the session tag naming the team a role is assumed for (docs/guide/targets.md, "AWS targets")
TEAM_TAG_KEY = "duetime:team"
FUNCTION_ARN_PATTERN = (
    rf"^arn:{PARTITION}:lambda:{REGION}:{ACCOUNT}:function:[A-Za-z0-9_-]{{1,64}}(:[A-Za-z0-9$_-]{{1,128}})?$"
)
TOPIC_ARN_PATTERN = rf"^arn:{PARTITION}:sns:{REGION}:{ACCOUNT}:[A-Za-z0-9_-]{{1,256}}(\.fifo)?$"
_SM = r"[A-Za-z0-9_-]{1,80}"  # a state machine, version or alias name
STATE_MACHINE_ARN_PATTERN = rf"^arn:{PARTITION}:states:{REGION}:{ACCOUNT}:stateMachine:{_SM}(:{_SM})?$"
_QUEUE_NAME = r"[A-Za-z0-9_-]{1,80}(\.fifo)?"
AWS_QUEUE_URL_PATTERN = rf"^https://sqs\.{REGION}\.amazonaws\.com(\.cn)?/{ACCOUNT}/{_QUEUE_NAME}$"
# LocalStack's queue URLs: accepted only where the service allows local targets (``duetime local``)
LOCAL_QUEUE_URL_PATTERN = (
    rf"^http://(sqs\.{REGION}\.)?(localhost\.localstack\.cloud|localhost|127\.0\.0\.1):[0-9]{{1,5}}"
    rf"/{ACCOUNT}/{_QUEUE_NAME}$"
)
QUEUE_URL_PATTERN = f"({AWS_QUEUE_URL_PATTERN})|({LOCAL_QUEUE_URL_PATTERN})"
_BUS_NAME = r"[A-Za-z0-9._/-]{1,256}"
EVENT_BUS_PATTERN = rf"^({_BUS_NAME}|arn:{PARTITION}:events:{REGION}:{ACCOUNT}:event-bus/{_BUS_NAME})$"
EVENT_SOURCE_PATTERN = r"^[A-Za-z0-9._-]{1,256}$"
DETAIL_TYPE_PATTERN = r"^[^\x00-\x1f\x7f]{1,128}$"
# SQS and SNS take these characters only (XML 1.0); a FIFO group or deduplication id: printable ASCII
MESSAGE_PATTERN = r"^[^\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]+$"
GROUP_ID_PATTERN = r"^[!-~]{1,128}$"

_FIFO_DEDUP_ID = re.compile(GROUP_ID_PATTERN)
_SQS_HOST_REGION = re.compile(rf"https?://sqs\.({REGION})\.")


def _shaped(pattern: str, shape: str) -> Any:
    """A validator that refuses text not matching ``pattern`` with a plain message showing ``shape`` (the
    field's pattern still applies; this only words the usual mistake)."""
    regex = re.compile(pattern)

    def check(value: Any) -> Any:
        if isinstance(value, str) and not regex.fullmatch(value):
            raise ValueError(f"must look like {shape}")
        return value

    return check


RoleArnField = Field(
    default=None,
    pattern=ROLE_ARN_PATTERN,
    description=f"the IAM role the worker assumes to make this call (its name must start with "
    f"`{ROLE_NAME_PREFIX}`; its trust policy names duetime's worker role and the team's external id, from "
    "`GET /v1/team`). Left out: the team's registered role (`PUT /v1/team/aws-role`). Refused with 422 "
    "when neither is set, except on a local stack, where the worker's own credentials are used",
)


class AwsTarget(ReadsStoredTolerantly):
    """What every AWS target has: its type, the role it is called under; nothing in it is secret."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role_arn: str | None = RoleArnField

    _role_arn_shape = field_validator("role_arn", mode="before")(
        _shaped(ROLE_ARN_PATTERN, f"arn:aws:iam::<account>:role/{ROLE_NAME_PREFIX}<name> (no path)")
    )

    def redacted(self) -> AwsTarget:
        return self  # no secrets: answers show it all

    def restore_redacted(self, sent: Any) -> Any:
        return sent

    @property
    def region(self) -> str | None:
        """The region the resource lives in, read from its ARN or its SQS URL's host (None: the worker's
        own: an event bus named by its name, a LocalStack queue URL)."""
        if self.resource.startswith("arn:"):
            return self.resource.split(":")[3] or None
        found = _SQS_HOST_REGION.match(self.resource)
        return found.group(1) if found else None

    @property
    def resource(self) -> str:
        """The ARN or URL of what is called."""
        raise NotImplementedError

    def with_trigger_body(self, body: str) -> AwsTarget:
        """This target with a trigger's ``body`` (text) as its message, payload, detail or input, validated
        as the target is (``ValidationError`` otherwise)."""
        raise NotImplementedError

    def _with(self, field: str, value: Any) -> Self:
        return type(self).model_validate({**self.model_dump(), field: value})


def _json_size(value: Any, name: str) -> Any:
    if len(json.dumps(value, separators=(",", ":")).encode()) > MAX_PAYLOAD_BYTES:
        raise ValueError(f"{name} is longer than {MAX_PAYLOAD_BYTES // 1024} KiB once encoded as JSON")
    return value


def _json_or_text(body: str) -> JsonValue:
    """A trigger's body for a JSON target: the JSON value it holds, else the text itself."""
    try:
        value: JsonValue = json.loads(body)
        return value
    except ValueError:
        return body


def _utf8_size(value: str, name: str) -> str:
    if len(value.encode()) > MAX_PAYLOAD_BYTES:
        raise ValueError(f"{name} is longer than {MAX_PAYLOAD_BYTES // 1024} KiB once encoded as UTF-8")
    return value


Message = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_PAYLOAD_BYTES,
        pattern=MESSAGE_PATTERN,
        description="the message, sent as it is; the run envelope travels in message attributes "
        "(`duetime-run-id`, `duetime-job-id`, `duetime-attempt`, `duetime-scheduled-at`). At most 64 KiB",
    ),
    AfterValidator(lambda value: _utf8_size(value, "message")),
]


class LambdaTarget(AwsTarget):
    type: Literal["lambda"]
    function_arn: str = Field(
        max_length=512,
        pattern=FUNCTION_ARN_PATTERN,
        description="the function's ARN, with a version or alias if wanted; invoked synchronously "
        "(RequestResponse) within the job's timeout",
    )
    payload: JsonValue = Field(
        default=None,
        description='any JSON value, sent as the event\'s `payload`: the event is {"duetime": <run '
        'envelope>, "payload": <this>}. At most 64 KiB encoded',
    )

    _arn_shape = field_validator("function_arn", mode="before")(
        _shaped(
            FUNCTION_ARN_PATTERN, "arn:aws:lambda:<region>:<account>:function:<name>[:<version or alias>]"
        )
    )

    @field_validator("payload")
    @classmethod
    def _small(cls, value: Any) -> Any:
        return _json_size(value, "payload")

    @property
    def resource(self) -> str:
        return self.function_arn

    def with_trigger_body(self, body: str) -> LambdaTarget:
        return self._with("payload", _json_or_text(body))


class SqsTarget(AwsTarget):
    type: Literal["sqs"]
    queue_url: str = Field(
        max_length=512,
        pattern=QUEUE_URL_PATTERN,
        description="the queue's URL, https://sqs.<region>.amazonaws.com/<account>/<name> (a LocalStack "
        "queue URL only on a local stack)",
    )
    message: Message
    message_group_id: str | None = Field(
        default=None,
        validate_default=True,
        pattern=GROUP_ID_PATTERN,
        description="required for a FIFO queue (a name ending .fifo); the deduplication id is then the run "
        "id, so a repeated attempt within SQS's 5-minute window is not enqueued twice",
    )

    _url_shape = field_validator("queue_url", mode="before")(
        _shaped(QUEUE_URL_PATTERN, "https://sqs.<region>.amazonaws.com/<account>/<queue name>")
    )

    @field_validator("message_group_id")
    @classmethod
    def _fifo_needs_a_group(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None and str(info.data.get("queue_url", "")).endswith(".fifo"):
            raise ValueError("message_group_id is required for a FIFO queue (its name ends .fifo)")
        return value

    @property
    def fifo(self) -> bool:
        return self.queue_url.endswith(".fifo")

    @property
    def local(self) -> bool:
        return re.fullmatch(LOCAL_QUEUE_URL_PATTERN, self.queue_url) is not None

    @property
    def resource(self) -> str:
        return self.queue_url

    def with_trigger_body(self, body: str) -> SqsTarget:
        return self._with("message", body)


class SnsTarget(AwsTarget):
    type: Literal["sns"]
    topic_arn: str = Field(max_length=512, pattern=TOPIC_ARN_PATTERN, description="the topic's ARN")
    message: Message
    message_group_id: str | None = Field(
        default=None,
        validate_default=True,
        pattern=GROUP_ID_PATTERN,
        description="required for a FIFO topic (a name ending .fifo), where the deduplication id is the "
        "run id; refused for a standard topic",
    )

    _arn_shape = field_validator("topic_arn", mode="before")(
        _shaped(TOPIC_ARN_PATTERN, "arn:aws:sns:<region>:<account>:<topic name>")
    )

    @field_validator("message_group_id")
    @classmethod
    def _group_only_for_fifo(cls, value: str | None, info: ValidationInfo) -> str | None:
        fifo = str(info.data.get("topic_arn", "")).endswith(".fifo")
        if fifo and value is None:
            raise ValueError("message_group_id is required for a FIFO topic (its name ends .fifo)")
        if not fifo and value is not None and "topic_arn" in info.data:
            raise ValueError("message_group_id is for FIFO topics only (a name ending .fifo)")
        return value

    @property
    def fifo(self) -> bool:
        return self.topic_arn.endswith(".fifo")

    @property
    def resource(self) -> str:
        return self.topic_arn

    def with_trigger_body(self, body: str) -> SnsTarget:
        return self._with("message", body)


class EventBridgeTarget(AwsTarget):
    type: Literal["eventbridge"]
    event_bus_name: str = Field(
        default="default",
        max_length=1600,
        pattern=EVENT_BUS_PATTERN,
        description="the event bus's name or ARN (another account's bus by its ARN)",
    )
    source: str = Field(
        default="duetime",
        pattern=EVENT_SOURCE_PATTERN,
        description="the event's source; not starting with `aws.` (AWS reserves it)",
    )
    detail_type: str = Field(pattern=DETAIL_TYPE_PATTERN, description="the event's detail-type")
    detail: dict[str, JsonValue] = Field(
        default_factory=dict,
        description='the event\'s detail, a JSON object; duetime adds "duetime": <run envelope>, so that key '
        "is its own. At most 64 KiB encoded",
    )

    _bus_shape = field_validator("event_bus_name", mode="before")(
        _shaped(
            EVENT_BUS_PATTERN,
            "a bus name (letters, digits, . _ / -) or arn:aws:events:<region>:<account>:event-bus/<name>",
        )
    )

    @field_validator("source")
    @classmethod
    def _not_aws(cls, value: str) -> str:
        if value.lower().startswith("aws."):
            raise ValueError("source must not start with 'aws.': AWS reserves it")
        return value

    @field_validator("detail")
    @classmethod
    def _detail(cls, value: dict[str, Any]) -> dict[str, Any]:
        if "duetime" in value:
            raise ValueError("detail.duetime is set by duetime (the run envelope); use another key")
        return _json_size(value, "detail")  # type: ignore[no-any-return]

    @property
    def resource(self) -> str:
        return self.event_bus_name

    def with_trigger_body(self, body: str) -> EventBridgeTarget:
        return self._with("detail", _json_or_text(body))  # not an object: refused as the detail would be


class StepFunctionsTarget(AwsTarget):
    type: Literal["stepfunctions"]
    state_machine_arn: str = Field(
        max_length=512,
        pattern=STATE_MACHINE_ARN_PATTERN,
        description="the state machine's ARN (a version or alias ARN too); STANDARD workflows get one "
        "execution per attempt, by name (docs/guide/targets.md)",
    )
    input: JsonValue = Field(
        default=None,
        description='any JSON value: the execution\'s input is {"duetime": <run envelope>, "input": <this>}.'
        " At most 64 KiB encoded",
    )

    _arn_shape = field_validator("state_machine_arn", mode="before")(
        _shaped(STATE_MACHINE_ARN_PATTERN, "arn:aws:states:<region>:<account>:stateMachine:<name>")
    )

    @field_validator("input")
    @classmethod
    def _small(cls, value: Any) -> Any:
        return _json_size(value, "input")

    @property
    def resource(self) -> str:
        return self.state_machine_arn

    def with_trigger_body(self, body: str) -> StepFunctionsTarget:
        return self._with("input", _json_or_text(body))


AWS_TARGET_TYPES = ("lambda", "sqs", "sns", "eventbridge", "stepfunctions")


@dataclass(frozen=True)
class RunEnvelope:
    """What every call of a run says about it, whatever the target's type."""

    run_id: str
    job_id: str
    attempt: int
    scheduled_at: datetime  # the nominal time
    fire_at: datetime

    def as_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "job_id": self.job_id,
            "attempt": self.attempt,
            "scheduled_at": iso_z(self.scheduled_at),
            "fire_at": iso_z(self.fire_at),
        }

    def message_attributes(self) -> dict[str, str]:
        """For SQS and SNS: names of letters, digits and ``-``, as the HTTP headers (X-Duetime-Run-Id)."""
        return {
            "duetime-run-id": self.run_id,
            "duetime-job-id": self.job_id,
            "duetime-attempt": str(self.attempt),
            "duetime-scheduled-at": iso_z(self.scheduled_at),
        }


def execution_name(run_id: str, attempt: int) -> str:
    """A Step Functions execution's name for ``attempt`` of ``run_id``: ``dt-`` + 40 hex of the run id's
    SHA-256 + ``-a<attempt>`` (48 characters at most; names allow 80 of ``[A-Za-z0-9_-]``). STANDARD
    workflows refuse a second execution of one name (for 90 days), so a repeat of the attempt (a redelivered
    message, a worker that died after starting it) finds it started; the next attempt is a new execution."""
    return f"dt-{hashlib.sha256(run_id.encode()).hexdigest()[:40]}-a{attempt}"


def fifo_deduplication_id(run_id: str) -> str:
    """A FIFO message's deduplication id: the run id itself (printable ASCII, at most 128), else its hash."""
    if _FIFO_DEDUP_ID.fullmatch(run_id):
        return run_id
    return hashlib.sha256(run_id.encode()).hexdigest()


def session_name(team_id: str) -> str:
    """The role session's name, ``duetime-<team>``: CloudTrail in the team's account shows it. STS takes 2 to
    64 of letters, digits and ``+=,.@_-``; any other character becomes ``-``."""
    return re.sub(r"[^A-Za-z0-9+=,.@_-]", "-", f"duetime-{team_id}")[:64]


def team_tag(team_id: str) -> dict[str, str]:
    """The session tag ``duetime:team`` = the team, for AssumeRole's ``Tags``: CloudTrail and the customer's
    policies (``aws:PrincipalTag/duetime:team``) see which team a call is for. STS takes at most 256 of
    letters, digits, spaces and ``_.:/=+-@``; any other character becomes ``-``."""
    return {"Key": TEAM_TAG_KEY, "Value": re.sub(r"[^A-Za-z0-9 _.:/=+@-]", "-", team_id)[:256]}
