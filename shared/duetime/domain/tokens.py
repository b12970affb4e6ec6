"""A team's named API tokens and what each may do (its scope).

A team holds up to ``MAX_TOKENS_PER_TEAM`` tokens, each with a name unique in the team and one scope:

- ``read``: every ``GET`` but the job's signing keys (a secret that lets its holder sign calls as duetime);
- ``operate``: ``read``, and what runs a team's existing jobs by hand, as they are: trigger, backfill, pause,
  resume, retry and cancel a run;
- ``admin``: everything: jobs (create, change, delete), the team's settings (its AWS role), the signing keys
  and the tokens themselves, and a trigger that sends a body of its own (``TRIGGER_BODY_SCOPE``): that run
  sends what its caller chose to the job's target, with the job's headers and signature, which is changing
  what the job does.

Each route of the API declares the scope it needs, once (``duetime.api.access``); it is enforced on the route
the router matched, before the route's validation runs, so a refused request learns nothing of its body and
changes nothing. A route that declares nothing needs ``admin``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from duetime.domain.models import Team

MAX_TOKENS_PER_TEAM = 50
TOKEN_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 ._:@/-]{0,63}$"
LEGACY_TOKEN_NAME = "token"  # a token issued before tokens had names


class TokenScope(StrEnum):
    READ = "read"
    OPERATE = "operate"
    ADMIN = "admin"

    def allows(self, needed: TokenScope) -> bool:
        """Scopes nest: ``admin`` may do all ``operate`` may, ``operate`` all ``read`` may."""
        order = list(TokenScope)
        return order.index(self) >= order.index(needed)


TRIGGER_BODY_SCOPE = TokenScope.ADMIN  # what a trigger with a ``body`` needs (its route needs ``operate``)


class TokenIn(BaseModel):
    """A token to issue: its name in the team and its scope."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        pattern=TOKEN_NAME_PATTERN,
        description="unique in your team: 1-64 characters, letters, digits, space and . _ : @ / -, "
        "starting with a letter or digit (e.g. `ci-deploy`)",
    )
    scope: TokenScope = Field(
        description="`read`: every GET but signing keys; `operate`: also trigger (with the job's own body), "
        "backfill, pause, resume, retry and cancel; `admin`: everything (jobs, team settings, signing keys, "
        "tokens, a trigger with a body of its own)"
    )


@dataclass(frozen=True)
class ApiToken:
    """What duetime keeps of a token: never the token, only its SHA-256 (``token_hash``), from which its
    public id comes (``job_history.token_id``)."""

    token_hash: str
    team_id: str
    generation: int  # it authenticates while this is the team's ``token_generation``
    name: str = LEGACY_TOKEN_NAME
    scope: TokenScope = TokenScope.ADMIN  # a token from before scopes could do everything
    created_at: datetime | None = None
    created_by: str = ""

    @property
    def token_id(self) -> str:
        from duetime.domain.job_history import token_id

        return token_id(self.token_hash)


@dataclass(frozen=True)
class Caller:
    """Who an authenticated API request is: a team and the token it came with."""

    team: Team
    token: ApiToken

    def may(self, needed: TokenScope) -> bool:
        return self.token.scope.allows(needed)
