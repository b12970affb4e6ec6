"""Which team and token a request acts for. Behind API Gateway on AWS the ``TeamAuthorizer`` (a TOKEN
authorizer) checks the bearer token first, so requests without a valid token never reach the api function;
its Allow is cached (``authorizer_cache_seconds``). The api function checks the token itself on every
request, with the same lookup (the token's hash in the catalog): a revoked token is refused at once, and
where no authorizer runs (LocalStack community never runs Lambda authorizers, ``duetime local`` has none)
that check is the only one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from duetime.domain.errors import Forbidden, Unauthorized

if TYPE_CHECKING:
    from duetime.api.service import JobService
    from duetime.domain.tokens import Caller


def api_wide_arn(method_arn: str) -> str:
    """``arn:aws:execute-api:region:account:api/stage/VERB/path`` -> the same API and stage, any method,
    so the cached decision serves every route."""
    prefix, _, rest = method_arn.partition(":execute-api:")
    parts = rest.split("/")
    return f"{prefix}:execute-api:{parts[0]}/{parts[1]}/*/*"


def authorize(token: str | None, method_arn: str, service: JobService) -> dict[str, Any]:
    """Raise ``Exception("Unauthorized")`` (API Gateway's 401) for a bad token; else allow the team, naming
    the token and its scope in the context (the api function still checks the token and its scope on every
    request: ``request_caller``)."""
    try:
        caller = service.authenticate(token)
    except Unauthorized as exc:
        raise Exception("Unauthorized") from exc  # the exact message API Gateway turns into a 401
    except Forbidden:  # a disabled team: API Gateway answers 403 (and caches the Deny like an Allow)
        return _policy("disabled-team", "Deny", method_arn, {})
    context = {
        "team_id": caller.team.team_id,
        "token_id": caller.token.token_id,
        "token_name": caller.token.name,
        "scope": str(caller.token.scope),
    }
    return _policy(caller.team.team_id, "Allow", method_arn, context)


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


def request_caller(service: JobService, event: Mapping[str, Any], authorization: str | None) -> Caller:
    """Who an API request is: the team and token its ``Authorization`` header carries, checked on every
    request (one read of the token's row), so a revoked token is refused at once even while API Gateway's
    authorizer cache still holds its Allow. Where an authorizer ran, the team it vouched for must be the
    token's. Raises ``Unauthorized`` (401) without a valid token."""
    caller = service.authenticate(authorization)
    vouched = vouched_team_id(event)
    if vouched is not None and vouched != caller.team.team_id:
        raise Unauthorized("the token is not the one the authorizer checked")
    return caller
