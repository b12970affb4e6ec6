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

from duetime.adapters.dynamodb.team_records import AuditEvent, TeamRecords
from duetime.aws_targets import session_name
from duetime.clock import Clock
from duetime.errors import Conflict, InvalidInput, NotFound, Unavailable, from_validation_error
from duetime.models import Team
from duetime.ports import AwsRole, RoleTrustProbe, RoleTrustUnknown

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

TeamChange = Callable[[Team], tuple[Team, dict[str, Any]]]  # the new settings and what the audit says


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
        records: TeamRecords,
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
        """A new team, its API token (returned once, stored only as a hash) and its signing secret."""
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
        event = self._event(team_id, "create", {name: getattr(team, name) for name in LIMIT_FIELDS})
        if not self.records.create_team(team, hash_token(token), event):
            raise Conflict(f"team {team_id!r} exists", "name")
        return team, token

    def issue_token(self, team_id: str) -> str:
        """Another token of the team's current generation (returned once); the others keep working."""
        team = self.get(team_id)
        token = new_token()
        self.records.add_token(team_id, hash_token(token), team.token_generation)
        return token

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
        """A new token; every token the team held before stops authenticating at once (behind API Gateway,
        once the authorizer's cache of it expires: ``authorizer_cache_seconds``)."""
        token = new_token()

        def change(team: Team) -> tuple[Team, dict[str, Any]]:
            after = team.model_copy(update={"token_generation": team.token_generation + 1})
            return after, {"token_generation": [team.token_generation, after.token_generation]}

        team = self._change(team_id, "rotate-token", change, token_hash=hash_token(token))
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

    def _change(self, team_id: str, action: str, change: TeamChange, token_hash: str | None = None) -> Team:
        """Read, change, write over what was read with the audit event; again on a lost race."""
        for _ in range(ATTEMPTS):
            read = self.records.team_revision(team_id)
            if read is None:
                raise NotFound(f"no team {team_id}")
            before, revision = read
            after, detail = change(before)
            event = self._event(team_id, action, detail)
            if self.records.replace_team(before, revision, after, event, token_hash):
                return after
        raise Conflict(f"team {team_id} kept changing; try again")
