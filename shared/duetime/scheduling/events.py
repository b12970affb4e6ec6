"""The events the Lambda handlers accept, validated with pydantic."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from duetime.domain.partitions import parse_partitions
from duetime.ports.functions import HelperAssignment


class PollerTick(BaseModel):
    """EventBridge's scheduled event for one partition group; the rule's input sets ``partitions`` and how
    long each invocation may serve the group (more than the minute between invocations, so that the next
    one always comes before it ends: ``duetime.scheduling.poller_lease``)."""

    model_config = ConfigDict(extra="ignore")

    partitions: list[int] | None = Field(default=None, description='e.g. "0-15"; default: the settings')
    run_seconds: float = Field(default=135, ge=0, le=840)
    # started by a job write (duetime.scheduling.wake): return at once if the group has a holder
    wake: bool = False

    @field_validator("partitions", mode="before")
    @classmethod
    def _parse(cls, value: object) -> object:
        return parse_partitions(value) if isinstance(value, str) else value


class HelperEvent(BaseModel):
    """The helper function's event (``duetime.adapters.aws.lambda_helpers``): ``{"helper": <assignment>}``."""

    model_config = ConfigDict(extra="forbid")

    helper: HelperAssignment
