"""The operator's side of teams (``duetime teams ...``): create, list, change limits, rotate the API token or
the signing secret, disable and enable, and the audit trail each of those writes.

Every change reads the team, computes the new settings and writes them only over what it read
(TEAM_UNCHANGED_SINCE_READ), together with its audit event: a change is never half-written, two changes at
once cannot undo each other (the loser re-reads and tries again), and no secret reaches the audit trail.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from pydantic import ValidationError

from duetime.domain.aws_targets import session_name
from duetime.domain.catalog import AuditEvent
from duetime.domain.clock import Clock
from duetime.domain.errors import Conflict, InvalidInput, NotFound, Unavailable, from_validation_error
from duetime.domain.models import Team
from duetime.domain.tokens import MAX_TOKENS_PER_TEAM, ApiToken, TokenIn, TokenScope
from duetime.ports import AwsRole, RoleTrustProbe, RoleTrustUnknown, TeamCatalog

TOKEN_PREFIX = "dt_"
LIMIT_FIELDS = (
    "max_concurrency",
    "exact_quota",
    "max_jobs",
    "api_rate_per_second",
    "api_burst",
    "runs_per_minute",
)
DEFAULT_SIGNING_OVERLAP = timedelta(hours=24)
MAX_SIGNING_OVERLAP = timedelta(days=30)
ATTEMPTS = 5

FIRST_TOKEN_NAME = "admin"
TeamChange = Callable[[Team], tuple[Team, dict[str, Any]]]  # the new settings and what the audit says
# from the team and its current tokens: the token to issue, the one to revoke and what the audit says
TokenChange = Callable[[Team, list[ApiToken]], tuple[ApiToken | None, ApiToken | None, dict[str, Any]]]


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def new_signing_secret() -> str:
    return secrets.token_hex(32)


def new_external_id() -> str:
    """duetime's external id for a team's AWS roles: random, so that no team can predict or pick another's."""
    return "dt-" + secrets.token_hex(16)


def next_secret_id(current: str) -> str:
    """``s1`` -> ``s2``: ids only grow, so a target can tell a newer secret from an older one."""
    digits = current.lstrip("s")
    return f"s{int(digits) + 1}" if digits.isdigit() else "s2"


class TeamAdmin:
    def __init__(
        self,
        records: TeamCatalog,
        clock: Clock,
        actor: str = "unknown",
        role_trust: RoleTrustProbe | None = None,
    ) -> None:
        """``actor`` is who the audit trail names for the changes made here (e.g. ``cli:alice@host``).
        ``role_trust`` asks STS whether a role being registered requires the team's external id
        (``check_role_trust``); the stack's wiring gives it everywhere but on LocalStack, which does not
        evaluate trust policies. None: roles are registered unchecked."""
        self.records = records
        self.clock = clock
        self.actor = actor
        self.role_trust = role_trust

    def create_team(self, team_id: str, token: str | None = None, **limits: Any) -> tuple[Team, str]:
        """A new team, its first API token (an ``admin`` one named ``admin``, returned once, stored only as a
        hash) and its signing secret."""
        try:
            team = Team(
                team_id=team_id,
                name=team_id,
                signing_secret=new_signing_secret(),
                aws_external_id=new_external_id(),
                **limits,
            )
        except ValidationError as exc:
            raise from_validation_error(exc) from exc
        token = token or new_token()
        first = self._new_token(team, token, FIRST_TOKEN_NAME, TokenScope.ADMIN)
        event = self._event(team_id, "create", {name: getattr(team, name) for name in LIMIT_FIELDS})
        if not self.records.create_team(team, first, event):
            raise Conflict(f"team {team_id!r} exists", "name")
        return team, token

    def issue_token(self, team_id: str, name: str, scope: TokenScope | str) -> tuple[ApiToken, str]:
        """A new token of the team named ``name`` (unique among its tokens) with ``scope``: what is kept of it
        and the token itself, returned once. The team's other tokens keep working. At most
        ``MAX_TOKENS_PER_TEAM`` (409 past it)."""
        try:
            wanted = TokenIn.model_validate({"name": name, "scope": scope})
        except ValidationError as exc:
            raise from_validation_error(exc) from exc
        token = new_token()

        def issue(team: Team, tokens: list[ApiToken]) -> tuple[ApiToken, None, dict[str, Any]]:
            if any(held.name == wanted.name for held in tokens):
                raise Conflict(f"name: the team has a token named {wanted.name!r}; pick another name", "name")
            if len(tokens) >= MAX_TOKENS_PER_TEAM:
                raise Conflict(
                    f"the team holds {len(tokens)} tokens, the most it may: revoke one first", "name"
                )
            issued = self._new_token(team, token, wanted.name, wanted.scope)
            return issued, None, {"token_id": issued.token_id, "name": issued.name, "scope": issued.scope}

        issued, _ = self._token_change(team_id, "issue-token", issue)
        assert issued is not None
        return issued, token

    def replace_token(self, team_id: str, name: str) -> tuple[ApiToken, str]:
        """A new ``admin`` token named ``name`` in place of the team's token of that name, if it has one
        (which stops authenticating in the same write): how ``duetime local`` and the deployed-local stack
        hand out a token on each start without piling tokens up."""
        token = new_token()

        def replace(team: Team, tokens: list[ApiToken]) -> tuple[ApiToken, ApiToken | None, dict[str, Any]]:
            old = next((held for held in tokens if held.name == name), None)
            if old is None and len(tokens) >= MAX_TOKENS_PER_TEAM:
                raise Conflict(f"the team holds {len(tokens)} tokens, the most it may: revoke one first")
            issued = self._new_token(team, token, name, TokenScope.ADMIN)
            detail = {"token_id": issued.token_id, "name": name, "scope": issued.scope}
            return issued, old, {**detail, "replaces": old.token_id if old else None}

        issued, _ = self._token_change(team_id, "issue-token", replace)
        assert issued is not None
        return issued, token

    def list_tokens(self, team_id: str) -> list[ApiToken]:
        """The team's tokens that authenticate, oldest first (never the tokens, only what is kept of them)."""
        team = self.get(team_id)
        return self._current_tokens(team)

    def revoke_token(self, team_id: str, token_id: str) -> ApiToken:
        """Revoke one token by its id: it stops authenticating at once (behind API Gateway the api function
        checks every request's token too, so the authorizer's cache does not keep it alive); the others keep
        working. The team's last ``admin`` token is kept (409): issue another first, or have an operator
        rotate the team's tokens."""

        def revoke(team: Team, tokens: list[ApiToken]) -> tuple[None, ApiToken, dict[str, Any]]:
            found = [held for held in tokens if held.token_id == token_id]
            if not found:
                raise NotFound(f"token_id: the team has no token {token_id}", "token_id")
            gone = found[0]
            admins = [held for held in tokens if held.scope is TokenScope.ADMIN]
            if gone.scope is TokenScope.ADMIN and len(admins) == 1:
                raise Conflict(
                    f"token_id: {token_id} ({gone.name!r}) is the team's last admin token; issue another "
                    "admin token first (or have an operator rotate the team's tokens: duetime teams "
                    "rotate-token)",
                    "token_id",
                )
            return None, gone, {"token_id": gone.token_id, "name": gone.name, "scope": gone.scope}

        _, revoked = self._token_change(team_id, "revoke-token", revoke)
        assert revoked is not None
        return revoked

    def get(self, team_id: str) -> Team:
        team = self.records.get_team(team_id)
        if team is None:
            raise NotFound(f"no team {team_id}")
        return team

    def list_teams(self) -> list[Team]:
        return self.records.list_teams()

    def update_limits(self, team_id: str, **changes: Any) -> Team:
        """Change some of the team's caps and quotas (``LIMIT_FIELDS``), validated as at creation."""
        unknown = sorted(set(changes) - set(LIMIT_FIELDS))
        if unknown:
            raise InvalidInput(f"not a team limit: {', '.join(unknown)}", unknown[0])
        if not changes:
            raise InvalidInput("nothing to change: give at least one limit", "limits")

        def change(team: Team) -> tuple[Team, dict[str, Any]]:
            try:
                after = Team.model_validate({**team.model_dump(), **changes})
            except ValidationError as exc:
                raise from_validation_error(exc) from exc
            detail = {name: [getattr(team, name), getattr(after, name)] for name in changes}
            return after, detail

        return self._change(team_id, "update", change)

    def rotate_token(self, team_id: str) -> tuple[Team, str]:
        """A new ``admin`` token (named ``admin``); every token the team held before, of any name or scope,
        stops authenticating at once: the emergency stop for tokens, and how tokens issued before tokens had
        names are retired."""
        token = new_token()
        issued: list[ApiToken] = []

        def change(team: Team) -> tuple[Team, dict[str, Any]]:
            after = team.model_copy(update={"token_generation": team.token_generation + 1})
            issued[:] = [self._new_token(after, token, FIRST_TOKEN_NAME, TokenScope.ADMIN)]
            return after, {"token_generation": [team.token_generation, after.token_generation]}

        team = self._change(team_id, "rotate-token", change, issued)
        return team, token

    def rotate_signing_secret(self, team_id: str, overlap: timedelta = DEFAULT_SIGNING_OVERLAP) -> Team:
        """A new signing secret. Calls are signed with both the new and the old secret until ``overlap`` has
        passed (the header names each by its id), so targets can switch over in that time."""
        if not timedelta(0) <= overlap <= MAX_SIGNING_OVERLAP:
            raise InvalidInput(
                f"the overlap must be between 0 and {MAX_SIGNING_OVERLAP.days} days", "overlap"
            )
        now = self.clock.now()

        def change(team: Team) -> tuple[Team, dict[str, Any]]:
            new_id = next_secret_id(team.signing_secret_id)
            after = team.model_copy(
                update={
                    "signing_secret": new_signing_secret(),
                    "signing_secret_id": new_id,
                    "previous_signing_secret": team.signing_secret if overlap else None,
                    "previous_signing_secret_id": team.signing_secret_id if overlap else None,
                    "previous_signing_secret_until": now + overlap if overlap else None,
                }
            )
            detail = {
                "signing_secret_id": [team.signing_secret_id, new_id],
                "overlap_seconds": overlap.total_seconds(),
            }
            return after, detail

        return self._change(team_id, "rotate-signing-secret", change)

    def set_disabled(self, team_id: str, disabled: bool) -> Team:
        """Disable (or enable) a team: while disabled its jobs are not claimed (their times pass without runs)
        and its tokens are refused; nothing is deleted."""

        def change(team: Team) -> tuple[Team, dict[str, Any]]:
            return team.model_copy(update={"disabled": disabled}), {"disabled": [team.disabled, disabled]}

        return self._change(team_id, "disable" if disabled else "enable", change)

    def set_aws_role(self, team_id: str, role_arn: str | None) -> Team:
        """Register (or with None, remove) the IAM role the team's AWS targets are called under; a team
        without an external id gets one now. A role is first checked (``check_role_trust``): one whose
        trust policy lets duetime in without the team's external id is refused, and nothing is written.
        Whether the policy lets duetime in with the team's id is not tried here: the first run tells (a 403
        naming AssumeRole in its result)."""

        def change(team: Team) -> tuple[Team, dict[str, Any]]:
            try:
                after = Team.model_validate(
                    {
                        **team.model_dump(),
                        "aws_role_arn": role_arn,
                        "aws_external_id": team.aws_external_id or new_external_id(),
                    }
                )
            except ValidationError as exc:
                raise from_validation_error(exc) from exc
            return after, {"aws_role_arn": [team.aws_role_arn, role_arn]}

        if role_arn is not None:
            change(self.get(team_id))  # a role ARN of the wrong shape is refused before STS is asked
            self.check_role_trust(team_id, role_arn)
        return self._change(team_id, "set-aws-role" if role_arn else "remove-aws-role", change)

    def check_role_trust(self, team_id: str, role_arn: str, field: str = "role_arn") -> None:
        """Refuse ``role_arn`` unless its trust policy requires the team's external id: STS is asked to let
        duetime in, as the worker would for ``team_id``, with a fresh random id that is no team's
        (``RoleTrustProbe``). Let in: 422 naming ``field`` and the condition to add. Refused (AccessDenied):
        accepted, as a role that requires the id answers. No verdict (STS throttled or unreachable): 503,
        try again. A role is never accepted unchecked, since accepting is what lets any team that names it
        act through it; a retry costs the caller a second, an unchecked role could cost another team its
        resources. Without a probe (LocalStack) nothing is checked."""
        if self.role_trust is None:
            return
        wrong_id = new_external_id()
        probe = AwsRole(role_arn, wrong_id, session_name(team_id), team_id)
        try:
            admitted = self.role_trust.admits_a_wrong_external_id(probe)
        except RoleTrustUnknown as exc:
            raise Unavailable(
                f"{field}: duetime could not check that the role requires your team's external id ({exc}); "
                "nothing was registered: try again",
                field,
            ) from exc
        if admitted:
            raise InvalidInput(
                f"{field}: the role's trust policy lets duetime in without your team's external id, so any "
                "team naming the role could act through it; add to the statement that trusts duetime "
                '"Condition": {"StringEquals": {"sts:ExternalId": "<your aws_external_id, GET /v1/team>"}} '
                "and register the role again",
                field,
            )

    def assign_external_id(self, team_id: str) -> Team:
        """Give a team created before AWS targets its external id (no change for one that has it)."""

        def change(team: Team) -> tuple[Team, dict[str, Any]]:
            after = team.model_copy(update={"aws_external_id": team.aws_external_id or new_external_id()})
            return after, {"aws_external_id": "assigned"}

        team = self.get(team_id)
        return team if team.aws_external_id else self._change(team_id, "assign-external-id", change)

    def audit(self, team_id: str, limit: int = 100) -> list[AuditEvent]:
        self.get(team_id)
        return self.records.audit_events(team_id, limit)

    # --- one change -------------------------------------------------------------------------------------

    def _event(self, team_id: str, action: str, detail: dict[str, Any]) -> AuditEvent:
        return AuditEvent(
            team_id=team_id, action=action, at=self.clock.now(), actor=self.actor, detail=detail
        )

    def _new_token(self, team: Team, token: str, name: str, scope: TokenScope) -> ApiToken:
        return ApiToken(
            token_hash=hash_token(token),
            team_id=team.team_id,
            generation=team.token_generation,
            name=name,
            scope=scope,
            created_at=self.clock.now(),
            created_by=self.actor,
        )

    def _current_tokens(self, team: Team) -> list[ApiToken]:
        tokens = self.records.team_tokens(team.team_id)
        current = [token for token in tokens if token.generation == team.token_generation]
        return sorted(current, key=lambda token: (token.created_at is not None, token.created_at, token.name))

    def _change(
        self, team_id: str, action: str, change: TeamChange, issued: list[ApiToken] | None = None
    ) -> Team:
        """Read, change, write over what was read with the audit event (and the token ``change`` put in
        ``issued``, for a rotation); again on a lost race."""
        for _ in range(ATTEMPTS):
            read = self.records.team_revision(team_id)
            if read is None:
                raise NotFound(f"no team {team_id}")
            before, revision = read
            after, detail = change(before)
            event = self._event(team_id, action, detail)
            issue = issued[0] if issued else None
            if self.records.replace_team(before, revision, after, event, issue=issue):
                return after
        raise Conflict(f"team {team_id} kept changing; try again")

    def _token_change(
        self, team_id: str, action: str, change: TokenChange
    ) -> tuple[ApiToken | None, ApiToken | None]:
        """Read the team and its current tokens, decide, write the token's rows with the team's next revision
        and the audit event (nothing else of the team changes); again on a lost race. Any two changes of a
        team's tokens are serialised by the revision's audit row, so two issues cannot both take the last
        place or one name, and two revocations cannot both remove 'the other' admin token."""
        for _ in range(ATTEMPTS):
            read = self.records.team_revision(team_id)
            if read is None:
                raise NotFound(f"no team {team_id}")
            team, revision = read
            issue, revoke, detail = change(team, self._current_tokens(team))
            event = self._event(team_id, action, detail)
            if self.records.replace_team(team, revision, team, event, issue=issue, revoke=revoke):
                return issue, revoke
        raise Conflict(f"team {team_id} kept changing; try again")
