"""A team: its caps, quotas, signing secrets and AWS role.

A part of ``duetime.domain.models`` (which exports every name of these modules).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import ConfigDict, Field

from duetime.domain.aws_targets import ROLE_ARN_PATTERN
from duetime.domain.stored_format import ReadsStoredTolerantly


class Team(ReadsStoredTolerantly):
    model_config = ConfigDict(extra="forbid")

    team_id: str
    name: str = ""
    max_concurrency: int = Field(default=50, ge=1, le=10_000)
    exact_quota: int = Field(default=100, ge=0, le=1_000_000)  # exact-time jobs the team may have
    max_jobs: int = Field(default=10_000, ge=0, le=1_000_000)  # jobs of any kind the team may have
    api_rate_per_second: float = Field(default=20.0, gt=0, le=10_000)  # the team's API requests, sustained
    api_burst: int = Field(default=40, ge=1, le=100_000)  # ... and at once
    # runs the team's triggers and backfills may create together in a minute (``duetime.domain.run_budget``)
    runs_per_minute: int = Field(default=1_000, ge=1, le=1_000_000)
    disabled: bool = False  # an operator stopped the team: no claims of its jobs, no API access
    token_generation: int = Field(default=0, ge=0)  # tokens of older generations no longer authenticate
    signing_secret: str | None = None
    signing_secret_id: str = "s1"  # named in every signature it makes (``key=``)
    previous_signing_secret: str | None = None  # still signs too, until ``previous_signing_secret_until``
    previous_signing_secret_id: str | None = None
    previous_signing_secret_until: datetime | None = None
    # AWS targets: the IAM role they are called under unless a target names its own (registered by the team:
    # PUT /v1/team/aws-role), and duetime's external id for the team, which every such role's trust policy
    # must require: assigned by duetime, never chosen by the team, so that no team can have duetime act
    # under another team's role (AWS's confused-deputy guidance)
    aws_role_arn: str | None = Field(default=None, pattern=ROLE_ARN_PATTERN)
    aws_external_id: str | None = None
