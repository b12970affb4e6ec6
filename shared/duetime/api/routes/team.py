"""Routes of the caller's team: the team, the IAM role its AWS targets are called under, its tokens."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body

from duetime.api.access import needs
from duetime.api.params import TokenId
from duetime.api.request_context import actor, caller, service, team
from duetime.api.responses import JSON, responses
from duetime.api.routes import new_router
from duetime.api.schemas import (
    AwsRoleIn,
    TeamOut,
    TokenIssued,
    TokenList,
    TokenOut,
)
from duetime.domain.tokens import MAX_TOKENS_PER_TEAM, TokenIn, TokenScope

router = new_router()


@router.get(
    "/v1/team",
    operation_id="getTeam",
    tags=["team"],
    responses=responses(200, TeamOut),
    security=needs(TokenScope.READ),
    description="Your team's limits and what is in use: jobs and exact-time jobs against their quotas, and "
    "the cap on runs at once.",
)
def get_team() -> TeamOut:
    return TeamOut.of(team(), *service().job_counts(team()))


@router.put(
    "/v1/team/aws-role",
    operation_id="setAwsRole",
    tags=["team"],
    responses=responses(200, TeamOut),
    security=needs(TokenScope.ADMIN),
    description="Register the IAM role your AWS targets are called under (a target's own `role_arn` "
    "overrides it). Its trust policy must let duetime's worker role assume it with your team's external id "
    "(in the answer). The role is not assumed here: a run's result tells if it cannot be (403).",
)
def put_aws_role(role: Annotated[AwsRoleIn, Body()]) -> TeamOut:
    changed = service().set_aws_role(team(), role.role_arn, actor())
    return TeamOut.of(changed, *service().job_counts(changed))


@router.delete(
    "/v1/team/aws-role",
    operation_id="removeAwsRole",
    tags=["team"],
    responses=responses(204, None),
    security=needs(TokenScope.ADMIN),
    description="Remove your team's role: AWS targets without a `role_arn` of their own fail (403-like, "
    "not retried) until a role is registered again.",
)
def delete_aws_role() -> Response[Any]:
    service().set_aws_role(team(), None, actor())
    return Response(status_code=204, body="")


@router.get(
    "/v1/tokens",
    operation_id="listTokens",
    tags=["tokens"],
    responses=responses(200, TokenList),
    security=needs(TokenScope.ADMIN),
    description="Your team's tokens (needs an `admin` token): id, name, scope, when and by which token each "
    "was issued, and which one this request came with. Never a token itself.",
)
def list_tokens() -> TokenList:
    current = caller().token
    return TokenList(tokens=[TokenOut.of(t, current) for t in service().tokens(caller())])


@router.post(
    "/v1/tokens",
    operation_id="issueToken",
    tags=["tokens"],
    responses=responses(201, TokenIssued, 409),
    security=needs(TokenScope.ADMIN),
    description="Issue a token named `name` (unique in your team) with a scope (needs an `admin` token): "
    "`read` (every GET but signing keys), `operate` (also trigger with the job's own body, backfill, pause, "
    "resume, retry, cancel) "
    f"or `admin` (everything). The answer holds the token, shown this once. At most {MAX_TOKENS_PER_TEAM} "
    "tokens a team (409 past it, or for a name in use).",
)
def issue_token(wanted: Annotated[TokenIn, Body()]) -> Response[TokenIssued]:
    issued, token = service().issue_token_for(caller(), wanted)
    out = TokenIssued(**TokenOut.of(issued, caller().token).model_dump(), token=token)
    return Response(status_code=201, content_type=JSON, body=out)


@router.get(
    "/v1/token",
    operation_id="getCurrentToken",
    tags=["tokens"],
    responses=responses(200, TokenOut),
    security=needs(TokenScope.READ),
    description="The token this request came with (any scope): its id, name and scope.",
)
def current_token() -> TokenOut:
    return TokenOut.of(caller().token, caller().token)


@router.delete(
    "/v1/tokens/<token_id>",
    operation_id="revokeToken",
    tags=["tokens"],
    responses=responses(204, None, 404, 409),
    security=needs(TokenScope.ADMIN),
    description="Revoke one token (needs an `admin` token): it is refused from the next request on, behind "
    "API Gateway too (the api function checks every request's token; the authorizer's cache only spares it "
    "requests without a valid token). The team's last `admin` token cannot be revoked (409): issue another "
    "first.",
)
def revoke_token(token_id: TokenId) -> Response[Any]:
    service().revoke_token(caller(), token_id)
    return Response(status_code=204, body="")
