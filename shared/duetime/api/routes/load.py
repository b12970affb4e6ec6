"""The route that shows a team's load ahead."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query

from duetime.api.access import needs
from duetime.api.request_context import check_rate, service, team
from duetime.api.responses import responses
from duetime.api.routes import new_router
from duetime.api.schemas import LoadMinute, LoadOut
from duetime.api.service import (
    LOAD_FIRE_TIMES_PER_REQUEST,
    LOAD_JOBS_PER_REQUEST,
    MAX_LOAD_FIRE_TIMES,
)
from duetime.domain.errors import InvalidInput
from duetime.domain.models import Team
from duetime.domain.tokens import TokenScope

router = new_router()


def _pay_for_load(team: Team, jobs: int, fire_times: int) -> None:
    """One more request's worth of a load walk (``JobService.load``), counted against the team's API rate."""
    check_rate(
        team,
        f"GET /v1/load costs one request per {LOAD_JOBS_PER_REQUEST} jobs it reads and per "
        f"{LOAD_FIRE_TIMES_PER_REQUEST:,} runs it counts (it had read {jobs:,} and counted {fire_times:,}): ",
    )


@router.get(
    "/v1/load",
    operation_id="getLoad",
    tags=["jobs"],
    responses=responses(200, LoadOut),
    security=needs(TokenScope.READ),
    description="Due runs per minute (by fire time) over your active jobs in [from, to). `to` must be "
    "after `from` and the window at most 24 hours; both need a UTC offset. A window breaking these rules "
    "is refused with 422 naming `to` (or `from`), and so is one holding more than "
    f"{MAX_LOAD_FIRE_TIMES:,} runs. It costs one request of your API rate per {LOAD_JOBS_PER_REQUEST} jobs, "
    f"and one more per {LOAD_FIRE_TIMES_PER_REQUEST:,} runs counted past the first "
    f"{LOAD_FIRE_TIMES_PER_REQUEST:,}, charged as it counts: when your rate cannot pay, 429 `rate_limited` "
    "with `Retry-After`.",
)
def load(
    start: Annotated[datetime, Query(alias="from", description="window start, with a UTC offset")],
    end: Annotated[
        datetime, Query(alias="to", description="window end (exclusive): after `from`, at most 24 h later")
    ],
) -> LoadOut:
    if start.tzinfo is None or end.tzinfo is None:
        raise InvalidInput("from and to need a UTC offset, e.g. 2026-12-01T00:00:00Z", "from")
    minutes = service().load(team(), start, end, functools.partial(_pay_for_load, team()))
    return LoadOut(
        window_start=start,
        window_end=end,
        total=sum(minutes.values()),
        minutes=[LoadMinute(minute=m, runs=n) for m, n in minutes.items()],
    )
