"""``duetime team`` and ``duetime tokens``: a team's own settings and API tokens, through the API."""

from __future__ import annotations

import argparse
import sys
from typing import Any
from urllib.parse import quote

from duetime.cli.common import TOKEN_COLUMNS, api_flags, client_from, show
from duetime.domain.tokens import TokenScope


def add_commands(commands: Any) -> None:
    group = commands.add_parser("team", help="your team: limits, usage, AWS role")
    group.set_defaults(run=run_team)
    team = group.add_subparsers(dest="action", required=True)
    api_flags(team.add_parser("show", help="your team's limits and usage, AWS role and external id"))
    api_flags(
        team.add_parser(
            "set-aws-role", help="the IAM role (duetime-target-...) your AWS targets are called under"
        )
    ).add_argument("role_arn")
    api_flags(
        team.add_parser("remove-aws-role", help="remove it: AWS targets without a role of their own fail")
    )
    group = commands.add_parser("tokens", help="your team's API tokens and their scopes")
    group.set_defaults(run=run_tokens)
    tokens = group.add_subparsers(dest="action", required=True)
    api_flags(tokens.add_parser("list", help="your team's tokens: id, name, scope (admin)"))
    api_flags(tokens.add_parser("current", help="the token you are using: id, name, scope"))
    issue = api_flags(tokens.add_parser("create", help="issue a named token with a scope; prints it once"))
    issue.add_argument("name", help="unique in your team, e.g. ci-deploy")
    issue.add_argument(
        "--scope",
        required=True,
        choices=[str(scope) for scope in TokenScope],
        help="read: GETs; operate: also trigger (the job's own body), backfill, pause, resume, retry, "
        "cancel; admin: everything (a trigger with --body too)",
    )
    revoke = api_flags(tokens.add_parser("revoke", help="revoke one token by id (tok_...): refused at once"))
    revoke.add_argument("token_id")


def run_team(args: argparse.Namespace) -> None:
    client = client_from(args)
    if args.action == "set-aws-role":
        show(client.request("PUT", "/v1/team/aws-role", {"role_arn": args.role_arn}), args.json)
    elif args.action == "remove-aws-role":
        client.request("DELETE", "/v1/team/aws-role")
        show({"aws_role_arn": None}, args.json)
    else:
        show(client.request("GET", "/v1/team"), args.json)


def run_tokens(args: argparse.Namespace) -> None:
    client = client_from(args)
    if args.action == "list":
        show(client.request("GET", "/v1/tokens"), args.json, TOKEN_COLUMNS, "tokens")
    elif args.action == "create":
        issued = client.request("POST", "/v1/tokens", {"name": args.name, "scope": args.scope})
        show(issued, args.json)
        if not args.json:
            print("Keep the token now: duetime stores only its hash.", file=sys.stderr)
    elif args.action == "revoke":
        client.request("DELETE", f"/v1/tokens/{quote(args.token_id, safe='')}")
        show({"revoked": args.token_id}, args.json)
    else:
        show(client.request("GET", "/v1/token"), args.json)
