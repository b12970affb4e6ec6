"""What a route knows of its request: the service and rate limiter the app was given, the caller the
guard admitted (``duetime.api.app.admit``), and the checks a route makes with them."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from duetime.api.fires import FireLedgerService
from duetime.api.service import JobService
from duetime.domain.errors import Forbidden, RateLimited
from duetime.domain.models import Team
from duetime.domain.rate_limit import ApiRateLimiter
from duetime.domain.tokens import Caller, TokenScope

# The app's service and per-team rate limiter, built lazily once: from the factories given with
# ``use_service`` and ``use_rate_limiter`` (tests, duetime local), else from the defaults its Lambda handler
# gives (``use_defaults``: the wiring's). The app never reaches up to the wiring itself.
_service_factory: Callable[[], JobService] | None = None
_rate_limiter_factory: Callable[[], ApiRateLimiter] | None = None
_default_factories: tuple[Callable[[], JobService], Callable[[], ApiRateLimiter]] | None = None


def use_defaults(
    service_factory: Callable[[], JobService], rate_limiter_factory: Callable[[], ApiRateLimiter]
) -> None:
    """The factories the app builds its service and rate limiter from when none was given
    (``functions/api/handler.py`` passes the wiring's)."""
    global _default_factories
    _default_factories = (service_factory, rate_limiter_factory)
    service.cache_clear()
    rate_limiter.cache_clear()


def _defaults() -> tuple[Callable[[], JobService], Callable[[], ApiRateLimiter]]:
    if _default_factories is None:
        raise RuntimeError("the api has no service: its handler gives the wiring's (use_defaults)")
    return _default_factories


def use_service(factory: Callable[[], JobService]) -> None:
    """Tell the app how to build its service (lazily, once), over the defaults: what the tests do."""
    global _service_factory
    _service_factory = factory
    service.cache_clear()


def fire_ledger() -> FireLedgerService:
    return FireLedgerService(service())


@functools.cache
def service() -> JobService:
    return (_service_factory or _defaults()[0])()


def use_rate_limiter(factory: Callable[[], ApiRateLimiter] | None) -> None:
    """Tell the app how to build the per-team rate limiter (tests); without one it is the default's."""
    global _rate_limiter_factory
    _rate_limiter_factory = factory
    rate_limiter.cache_clear()


@functools.cache
def rate_limiter() -> ApiRateLimiter:
    return (_rate_limiter_factory or _defaults()[1])()


def check_rate(team: Team, cost: str = "") -> None:
    """Count this request (or one more request's worth of its work, which ``cost`` explains) against its
    team's API rate (on the store's clock); over it, ``RateLimited``."""
    decision = rate_limiter().take(team, service().clock.now())
    if not decision.allowed:
        raise RateLimited(
            f"{cost}too many requests: team {team.team_id} may make {team.api_rate_per_second:g} requests a "
            f"second ({team.api_burst} at once); try again in {decision.retry_after_seconds} s",
            decision.retry_after_seconds,
        )


def check_scope(caller: Caller, needed: TokenScope, what: str, field: str = "scope") -> None:
    """403 naming the token, its scope and the scope ``what`` needs (the field ``field``), unless the token
    may."""
    if not caller.may(needed):
        token = caller.token
        raise Forbidden(
            f"the token {token.token_id} ({token.name!r}) has scope {token.scope}; {what} needs {needed}: "
            "use a token with that scope (an admin issues one: POST /v1/tokens)",
            field,
        )


def team() -> Team:
    """The team of the caller the guard admitted."""
    current: Team = _current["team"]
    return current


def caller() -> Caller:
    """The caller (token and team) the guard admitted for this request."""
    current: Caller = _current["caller"]
    return current


def actor() -> str:
    """The id of the token the request came with (``job_history.token_id``), for the job's history."""
    return caller().token.token_id


# The request being answered: ``duetime.api.app`` answers one at a time (``handle``), and forgets it after.
_current: dict[str, Any] = {}


def remember_caller(caller: Caller) -> None:
    """The guard admitted ``caller`` for the request being answered."""
    _current["team"], _current["caller"] = caller.team, caller


def forget_request() -> None:
    _current.clear()
