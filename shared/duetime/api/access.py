"""Who may reach a route, decided from the route the resolver matched.

Each route declares what a request to it needs, once, in its decorator: ``security=needs(scope)`` (a bearer
token whose scope allows ``scope``) or ``security=PUBLIC`` (no token). That declaration is the only table:
the OpenAPI document is generated from it, and ``RouteGuardedResolver`` enforces it on the route that
powertools' own matching chose for the request, after routing and before anything of the route runs (its
request validation, its handler). So no spelling of a path (repeated or trailing slashes, a decoded
``%2F``, a method in lower case) can be judged as one operation and answered as another: whatever the
router makes of a path is what is judged. A route that declares nothing needs ``admin`` (default-deny).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.api_gateway import ResponseBuilder, Route

from duetime.domain.tokens import TokenScope

PUBLIC: list[dict[str, list[str]]] = []  # a route anyone may call, without a token
BEARER = "bearerAuth"  # the OpenAPI security scheme of duetime's tokens


def needs(scope: TokenScope) -> list[dict[str, list[str]]]:
    """A route's requirement: a bearer token whose scope allows ``scope`` (OpenAPI 3.1 lets an HTTP scheme's
    requirement list roles, here the scope)."""
    return [{BEARER: [str(scope)]}]


def scope_needed(route: Route) -> TokenScope | None:
    """What ``route`` declares it needs: None for a ``PUBLIC`` route, else the scope of its bearer
    requirement; ``admin`` when it declares nothing or something else."""
    if route.security == PUBLIC:
        return None
    roles = [role for requirement in route.security or () for role in requirement.get(BEARER, ())]
    known = [TokenScope(role) for role in roles if role in list(TokenScope)]
    return known[0] if len(known) == 1 == len(roles) else TokenScope.ADMIN


Admit = Callable[[Route, "TokenScope | None"], "Response[Any] | None"]


class RouteGuardedResolver(APIGatewayRestResolver):
    """powertools' REST resolver, with a guard that sees the route it matched before the route runs.

    The guard (``before_route``) is called with that route and the scope a request to it needs (None: no
    token). When no route matched (the resolver is about to answer 404 or 405), that is no token if the path
    is a public route's (``POST /healthz`` is a 405 for anyone), else any token (``read``, the least scope):
    a 404 or 405 tells a valid token only what the OpenAPI document does. The guard returns None to let the
    request on, or the response to answer instead; nothing of the route has run then, not even its
    validation, so a refused request learns nothing of its body."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._admit: Admit | None = None

    def before_route(self, admit: Admit) -> Admit:
        """Register ``admit`` as the guard (a decorator, as ``not_found`` is)."""
        self._admit = admit
        return admit

    def routes(self) -> list[Route]:
        """Every route of the app, in the order the resolver tries them."""
        return self._static_routes + self._dynamic_routes  # powertools keeps its routes only here

    def scope_needed_by(self, route: Route) -> TokenScope | None:
        """What a request the resolver matched to ``route`` needs (see the class)."""
        if any(route is own for own in self.routes()):
            return scope_needed(route)
        path = self._remove_prefix(self.current_event.path)
        public = any(own.rule.match(path) and scope_needed(own) is None for own in self.routes())
        return None if public else TokenScope.READ

    def _call_route(self, route: Route, route_arguments: dict[str, str]) -> ResponseBuilder[Any]:
        # powertools calls this with the route it matched (or, for no match, the route that answers 404/405)
        if self._admit is not None:
            refused = self._admit(route, self.scope_needed_by(route))
            if refused is not None:
                return ResponseBuilder(response=refused, serializer=self._serializer, route=route)
        return super()._call_route(route, route_arguments)
