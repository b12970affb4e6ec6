"""Routes of one run: read, retry, cancel."""

from __future__ import annotations

from duetime.api.access import needs
from duetime.api.params import RunId
from duetime.api.request_context import service, team
from duetime.api.responses import responses
from duetime.api.routes import new_router
from duetime.api.schemas import RunOut
from duetime.domain.tokens import TokenScope

router = new_router()


@router.get(
    "/v1/runs/<run_id>",
    operation_id="getRun",
    tags=["runs"],
    responses=responses(200, RunOut, 404),
    security=needs(TokenScope.READ),
)
def get_run(run_id: RunId) -> RunOut:
    return RunOut.of(service().get_run(team(), run_id))


@router.post(
    "/v1/runs/<run_id>/retry",
    operation_id="retryRun",
    tags=["runs"],
    responses=responses(200, RunOut, 404, 409),
    security=needs(TokenScope.OPERATE),
)
def retry_run(run_id: RunId) -> RunOut:
    return RunOut.of(service().retry_run(team(), run_id))


@router.post(
    "/v1/runs/<run_id>/cancel",
    operation_id="cancelRun",
    tags=["runs"],
    responses=responses(200, RunOut, 404, 409),
    security=needs(TokenScope.OPERATE),
    description="A queued or retry-waiting run becomes `cancelled` at once and is never called. A running "
    "one becomes `cancelled` too: its worker gives the call up at its next heartbeat (within 20 s), frees "
    "its concurrency slot and records no result. A finished run answers 409.",
)
def cancel_run(run_id: RunId) -> RunOut:
    return RunOut.of(service().cancel_run(team(), run_id))
