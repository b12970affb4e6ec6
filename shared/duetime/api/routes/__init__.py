"""The API's routes, a module a resource, each a powertools ``Router`` that ``duetime.api.app`` includes."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router


def new_router() -> Router:
    """A resource's router (powertools' ``Router.__init__`` carries no annotations, so mypy's strict mode
    would refuse each call of it: this one is typed)."""
    return Router()  # type: ignore[no-untyped-call]
