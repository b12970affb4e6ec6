"""Which team a request acts for. Behind API Gateway on AWS the ``TeamAuthorizer`` (a TOKEN authorizer)
checks the bearer token and names the team; wherever it did not (LocalStack community never runs Lambda
authorizers, ``duetime local`` has none) the api function checks the token itself, with the same lookup:
the token's hash in the catalog."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from duetime.errors import Forbidden, Unauthorized

if TYPE_CHECKING:
    from duetime.models import Team
    from duetime.service import JobService


def api_wide_arn(method_arn: str) -> str:
    """``arn:aws:execute-api:region:account:api/stage/VERB/path`` -> the same API and stage, any method,
    so the cached decision serves every route."""
    prefix, _, rest = method_arn.partition(":execute-api:")
    parts = rest.split("/")
    return f"{prefix}:execute-api:{parts[0]}/{parts[1]}/*/*"


def authorize(token: str | None, method_arn: str) -> dict[str, Any]:
    """Raise ``Exception("Unauthorized")`` (API Gateway's 401) for a bad token; else allow the team."""
    from duetime.wiring import job_service

    try:
        team = job_service().authenticate(token)
    except Unauthorized as exc:
        raise Exception("Unauthorized") from exc  # the exact message API Gateway turns into a 401
    except Forbidden:  # a disabled team: API Gateway answers 403 (and caches the Deny like an Allow)
        return _policy("disabled-team", "Deny", method_arn, {})
    context = {"team_id": team.team_id, "token_id": bearer_token_id(token) or ""}
    return _policy(team.team_id, "Allow", method_arn, context)


def _policy(principal: str, effect: str, method_arn: str, context: dict[str, str]) -> dict[str, Any]:
    return {
        "principalId": principal,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [
                {"Action": "execute-api:Invoke", "Effect": effect, "Resource": api_wide_arn(method_arn)}
            ],
        },
        "context": context,
    }


def vouched_team_id(event: Mapping[str, Any]) -> str | None:
    """The team the ``TeamAuthorizer`` named for this request (``authorize``'s context), if it ran. Only API
    Gateway writes ``requestContext.authorizer``; a client cannot."""
    context = (event.get("requestContext") or {}).get("authorizer")
    team_id = context.get("team_id") if isinstance(context, Mapping) else None
    return team_id if isinstance(team_id, str) and team_id else None


def bearer_token_id(authorization: str | None) -> str | None:
    """The id (``job_history.token_id``) of the token ``authorization`` carries (``Bearer <token>``; API
    Gateway hands a TOKEN authorizer the header as it came), or None without one."""
    from duetime.job_history import token_id
    from duetime.team_admin import hash_token

    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token_id(hash_token(token.strip()))


def request_token_id(event: Mapping[str, Any], authorization: str | None) -> str:
    """Which token an authenticated request came with, by id: the one the authorizer named, else the one in
    its ``Authorization`` header (checked by ``request_team``)."""
    context = (event.get("requestContext") or {}).get("authorizer")
    vouched = context.get("token_id") if isinstance(context, Mapping) else None
    if isinstance(vouched, str) and vouched:
        return vouched
    return bearer_token_id(authorization) or "unknown"


def request_team(service: JobService, event: Mapping[str, Any], authorization: str | None) -> Team:
    """The team an API request acts for: the one the authorizer vouched for, else the one whose bearer token
    ``authorization`` carries. Raises ``Unauthorized`` (401) when neither names a team."""
    vouched = vouched_team_id(event)
    return service.team(vouched) if vouched else service.authenticate(authorization)
