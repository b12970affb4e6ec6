"""The API Gateway team authorizer's logic: token -> team -> an IAM policy for the whole API."""

from __future__ import annotations

from typing import Any

from duetime.errors import Unauthorized


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
    return {
        "principalId": team.team_id,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [
                {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": api_wide_arn(method_arn)}
            ],
        },
        "context": {"team_id": team.team_id},
    }
