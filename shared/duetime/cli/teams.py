"""``duetime teams ...``: the operator's commands, run against the tables directly (the deployed ones named by
``DUETIME_*_TABLE`` and the credentials in the environment, or ``duetime local``'s with ``--local``).

Each change is written with an audit event naming who made it (``cli:<user>@<host>``); tokens and secrets
are printed once, when they are made, and never stored or logged in the clear.
"""

from __future__ import annotations

import argparse
import getpass
import json
import socket
import sys
from datetime import timedelta
from typing import Any

from duetime.api.team_admin import hash_token
from duetime.cli.common import json_flag
from duetime.domain.errors import ApiError
from duetime.domain.job_history import token_id
from duetime.domain.models import Team
from duetime.domain.tokens import ApiToken, TokenScope

LIMIT_FLAGS = {  # flag -> Team field
    "max_concurrency": "max_concurrency",
    "exact_quota": "exact_quota",
    "max_jobs": "max_jobs",
    "api_rate": "api_rate_per_second",
    "api_burst": "api_burst",
    "runs_per_minute": "runs_per_minute",
}


def add_commands(commands: Any) -> None:
    group = commands.add_parser("teams", help="teams (admin)")
    group.set_defaults(run=run_teams)
    teams = group.add_subparsers(dest="action", required=True)

    def command(name: str, help: str, named: bool = True) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = teams.add_parser(name, help=help)
        if named:
            sub.add_argument("name")
        sub.add_argument("--local", action="store_true", help="the team store of `duetime local`")
        return json_flag(sub)

    create = command("create", "create a team; prints its token and signing secret once")
    limit_flags(create, defaults=True)
    command("list", "every team and its limits", named=False)
    command("show", "one team's limits and state (no secrets)")
    limit_flags(command("update", "change a team's caps and quotas"), defaults=False)
    command("rotate-token", "a new admin token; every older token of the team, of any scope, stops working")
    command("tokens", "the team's tokens: id, name, scope (never a token)")
    issue = command("issue-token", "issue a named token with a scope; prints it once")
    issue.add_argument("--token-name", required=True, help="unique in the team, e.g. ci-deploy")
    issue.add_argument("--scope", required=True, choices=[str(scope) for scope in TokenScope])
    command("revoke-token", "revoke one token by id (tok_...); the others keep working").add_argument(
        "token_id"
    )
    rotate = command("rotate-signing-secret", "a new signing secret; calls are signed with both for a while")
    rotate.add_argument("--overlap-hours", type=float, default=24.0, help="how long the old one still signs")
    command("disable", "stop the team: its jobs are not claimed, its tokens refused; nothing is deleted")
    command("enable", "undo disable")
    audit = command("audit", "the team's administrative changes of the last 90 days, newest first")
    audit.add_argument("--limit", type=int, default=50)


def limit_flags(sub: argparse.ArgumentParser, defaults: bool) -> None:
    fields = Team.model_fields
    for flag, name in LIMIT_FLAGS.items():
        kind = float if name == "api_rate_per_second" else int
        default = fields[name].default if defaults else None
        sub.add_argument(f"--{flag.replace('_', '-')}", dest=flag, type=kind, default=default)


def team_view(team: Team) -> dict[str, Any]:
    """What an operator may see of a team: its limits and state, secret ids but never secrets."""
    return {
        "team": team.team_id,
        "disabled": team.disabled,
        **{name: getattr(team, name) for name in LIMIT_FLAGS.values()},
        "token_generation": team.token_generation,
        "signing_secret_id": team.signing_secret_id,
        "previous_signing_secret_id": team.previous_signing_secret_id,
        "previous_signing_secret_until": team.previous_signing_secret_until.isoformat()
        if team.previous_signing_secret_until
        else None,
    }


def token_view(token: ApiToken) -> dict[str, Any]:
    """What an operator may see of a token: never the token."""
    return {
        "team": token.team_id,
        "token_id": token.token_id,
        "name": token.name,
        "scope": str(token.scope),
        "created_at": token.created_at.isoformat() if token.created_at else None,
        "created_by": token.created_by,
    }


def run_teams(args: argparse.Namespace) -> None:
    from duetime import wiring
    from duetime.local.system import local_environment

    if args.local:
        local_environment()
    admin = wiring.make_team_admin(wiring.settings(), actor=f"cli:{getpass.getuser()}@{socket.gethostname()}")
    try:
        data, note = _act(admin, args)
    except ApiError as exc:
        where = f" ({exc.field})" if exc.field else ""
        raise SystemExit(f"duetime teams {args.action}: {exc.message}{where}") from exc
    if args.json:
        print(json.dumps(data))
        return
    rows = data if isinstance(data, list) else [data]
    for row in rows:
        width = max(len(k) for k in row)
        for key, value in row.items():
            print(f"{key.ljust(width)}  {json.dumps(value) if isinstance(value, dict | list) else value}")
        if len(rows) > 1:
            print()
    if note:
        print(note, file=sys.stderr)


def _act(admin: Any, args: argparse.Namespace) -> tuple[Any, str | None]:
    """(what to print, a note for people) for one ``teams`` command."""
    limits = {LIMIT_FLAGS[f]: getattr(args, f) for f in LIMIT_FLAGS if getattr(args, f, None) is not None}
    if args.action == "create":
        team, token = admin.create_team(args.name, **limits)
        data = {
            **team_view(team),
            "token": token,
            "token_id": token_id(hash_token(token)),  # what job histories name it by
            "signing_secret": team.signing_secret,
        }
        return data, "Keep the token and the signing secret now: duetime stores only the token's hash."
    if args.action == "list":
        return [team_view(team) for team in admin.list_teams()], None
    if args.action == "show":
        return team_view(admin.get(args.name)), None
    if args.action == "update":
        return team_view(admin.update_limits(args.name, **limits)), None
    if args.action == "rotate-token":
        team, token = admin.rotate_token(args.name)
        note = "Every older token of the team is refused from now on."
        rotated = {"team": team.team_id, "token": token, "token_id": token_id(hash_token(token))}
        return {**rotated, "token_generation": team.token_generation}, note
    if args.action == "tokens":
        return [token_view(token) for token in admin.list_tokens(args.name)], None
    if args.action == "issue-token":
        issued, token = admin.issue_token(args.name, args.token_name, args.scope)
        return {**token_view(issued), "token": token}, "Keep the token now: duetime stores only its hash."
    if args.action == "revoke-token":
        return token_view(admin.revoke_token(args.name, args.token_id)), "It is refused from now on."
    if args.action == "rotate-signing-secret":
        team = admin.rotate_signing_secret(args.name, timedelta(hours=args.overlap_hours))
        return {**team_view(team), "signing_secret": team.signing_secret}, "Give targets the new secret now."
    if args.action in {"disable", "enable"}:
        return team_view(admin.set_disabled(args.name, args.action == "disable")), None
    events = admin.audit(args.name, args.limit)
    return [
        {"at": e.at.isoformat(), "action": e.action, "actor": e.actor, "detail": e.detail} for e in events
    ], None
