"""The API's shapes of the caller's team: the team, its signing keys and AWS role, its tokens."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.json_schema import SkipJsonSchema

from duetime.api.schema_base import Out
from duetime.domain.aws_targets import ROLE_ARN_PATTERN, ROLE_NAME_PREFIX
from duetime.domain.models import Team
from duetime.domain.signing import JobSigningKey
from duetime.domain.tokens import ApiToken, TokenScope


class TeamOut(Out):
    team_id: str
    name: str
    max_concurrency: int = Field(description="the cap on your runs at once")
    exact_quota: int = Field(description="how many exact-time jobs you may have")
    exact_jobs: int = Field(description="exact-time jobs you have")
    max_jobs: int = Field(description="how many jobs you may have")
    jobs: int = Field(description="jobs you have")
    runs_per_minute: int = Field(
        description="how many runs your triggers and backfills may create together in a minute"
    )
    aws_role_arn: str | None = Field(
        description="the IAM role your AWS targets are called under (`PUT /v1/team/aws-role`); null: none"
    )
    aws_external_id: str | None = Field(
        description="the external id duetime sends when it assumes your roles: their trust policy must "
        "require it (`sts:ExternalId`). Assigned by duetime; null until your first role is registered, for "
        "a team created before AWS targets"
    )

    @classmethod
    def of(cls, team: Team, jobs: int, exact_jobs: int) -> TeamOut:
        return cls(
            team_id=team.team_id,
            name=team.name,
            max_concurrency=team.max_concurrency,
            exact_quota=team.exact_quota,
            exact_jobs=exact_jobs,
            max_jobs=team.max_jobs,
            jobs=jobs,
            runs_per_minute=team.runs_per_minute,
            aws_role_arn=team.aws_role_arn,
            aws_external_id=team.aws_external_id,
        )


class SigningKeyOut(Out):
    key_id: str = Field(description="the id of the team's signing secret it is derived from (s1, s2, ...)")
    secret: str = Field(
        description="`whsec_<base64 key>`, as Standard Webhooks libraries take it: `Webhook(secret).verify("
        "body, headers)`"
    )
    until: datetime | None = Field(
        description="when it stops signing: the end of a rotated-out secret's overlap; null for the current "
        "key"
    )

    @classmethod
    def of(cls, key: JobSigningKey) -> SigningKeyOut:
        return cls(key_id=key.key_id, secret=key.secret, until=key.until)


class SigningKeysOut(Out):
    job_id: str
    keys: list[SigningKeyOut] = Field(
        description="the keys the job's calls are signed with now, the current one first; during a "
        "rotation's overlap also the rotated-out one (`webhook-signature` holds one `v1,...` per key). Empty "
        "when the team has no signing secret"
    )


class AwsRoleIn(BaseModel):
    """``PUT /v1/team/aws-role``: the role the team's AWS targets are called under."""

    model_config = ConfigDict(extra="forbid")

    role_arn: str = Field(
        pattern=ROLE_ARN_PATTERN,
        description=f"an IAM role named `{ROLE_NAME_PREFIX}...` (no path), in any account, whose trust "
        "policy lets duetime's worker role assume it with your team's external id "
        "(docs/guide/targets.md, AWS targets)",
    )
    external_id: SkipJsonSchema[None] = Field(default=None, exclude=True)

    @field_validator("role_arn", mode="before")
    @classmethod
    def _role_shape(cls, value: Any) -> Any:
        if isinstance(value, str) and not re.fullmatch(ROLE_ARN_PATTERN, value):
            raise ValueError(f"must look like arn:aws:iam::<account>:role/{ROLE_NAME_PREFIX}<name> (no path)")
        return value

    @field_validator("external_id", mode="before")
    @classmethod
    def _not_yours(cls, value: Any) -> Any:
        raise ValueError("the external id is assigned by duetime (GET /v1/team shows it); send role_arn only")


class TokenOut(Out):
    """What duetime keeps of one of your tokens: never the token itself."""

    token_id: str = Field(description="its id (tok_...): what job histories and the audit trail name it by")
    name: str
    scope: TokenScope
    created_at: datetime | None = Field(description="null for a token issued before tokens had names")
    created_by: str = Field(description="the id of the token that issued it, or the operator (cli:...)")
    in_use: bool = Field(description="true for the token this request came with")

    @classmethod
    def of(cls, token: ApiToken, current: ApiToken) -> TokenOut:
        return cls(
            token_id=token.token_id,
            name=token.name,
            scope=token.scope,
            created_at=token.created_at,
            created_by=token.created_by,
            in_use=token.token_hash == current.token_hash,
        )


class TokenList(Out):
    tokens: list[TokenOut]


class TokenIssued(TokenOut):
    token: str = Field(description="the token, shown this once: duetime keeps only its SHA-256")
