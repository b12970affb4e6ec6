"""Routes anyone may call: health, the OpenAPI document, the console's files.

They are registered on the app itself (``include``), not through a ``Router``: powertools' ``Router`` keeps a
route's ``security`` only when it is not empty (``security or None``), and an empty list is how a route says
it is public (``duetime.api.access.PUBLIC``); through a router it would arrive as "declares nothing", which
the guard reads as admin only."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response

from duetime import build_info
from duetime.api.access import PUBLIC, RouteGuardedResolver
from duetime.api.console_files import SECURITY_HEADERS, console_file
from duetime.api.openapi_doc import openapi_document
from duetime.api.responses import JSON, NoRoute, error_response, public_responses
from duetime.api.schemas import Health


def include(app: RouteGuardedResolver) -> None:
    """Register the public routes on ``app``."""

    @app.get(
        "/healthz",
        operation_id="getHealth",
        tags=["meta"],
        responses=public_responses({200: {"description": "OK", "content": {JSON: {"model": Health}}}}),
        security=PUBLIC,
    )
    def healthz() -> Health:
        return Health(status="ok", version=build_info.version, commit=build_info.commit())

    @app.get(
        "/v1/openapi.json",
        operation_id="getOpenApiDocument",
        tags=["meta"],
        responses=public_responses({200: {"description": "This document"}}),
        security=PUBLIC,
    )
    def openapi() -> Response[Any]:
        return Response(status_code=200, content_type=JSON, body=openapi_document(app))

    @app.get("/console", include_in_schema=False, security=PUBLIC)  # powertools routes /console/ here too
    def console_root() -> Response[Any]:
        """``/console/`` is the index page; ``/console`` moves there (relative: a stage prefix is kept)."""
        if app.current_event.path.endswith("/"):
            return console("")
        return Response(status_code=301, headers={"Location": "console/", **SECURITY_HEADERS}, body="")

    @app.get("/console/<name>", include_in_schema=False, security=PUBLIC)
    def console(name: str) -> Response[Any]:
        """The console's static files (``duetime.api.console_files``): public, the page asks for the token."""
        found = console_file(name)
        if found is None:
            return error_response(NoRoute("no such console file"), SECURITY_HEADERS)
        return Response(200, content_type=found.content_type, body=found.body, headers=SECURITY_HEADERS)
