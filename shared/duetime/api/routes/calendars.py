"""Routes of a team's calendars."""

from __future__ import annotations

import json
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from duetime.api.access import needs
from duetime.api.calendar_schemas import CalendarChangeOut, CalendarHistory, CalendarList, CalendarOut
from duetime.api.params import CalendarName, Cursor
from duetime.api.request_context import actor, service, team
from duetime.api.responses import JSON, responses
from duetime.api.routes import new_router
from duetime.domain.calendars import CalendarSpec, CalendarUpdate
from duetime.domain.tokens import TokenScope

router = new_router()


@router.post(
    "/v1/calendars",
    operation_id="createCalendar",
    tags=["calendars"],
    responses=responses(201, CalendarOut, 409),
    security=needs(TokenScope.ADMIN),
    description="Create a calendar: named days your team's jobs can later skip or roll over. Its `source` is "
    'exactly one of `holidays` (a country\'s public holidays, and a subdivision\'s: `{"country": "FR"}`), '
    "`dates` (YYYY-MM-DD) or `ical` (an iCalendar file's text, RFC 5545; recurring events are expanded). A "
    "name your team has a calendar by answers 409.",
)
def create_calendar(spec: Annotated[CalendarSpec, Body()]) -> Response[CalendarOut]:
    body = json.loads(router.current_event.body or "{}")
    calendar = service().calendars.create(team().team_id, body, actor())
    return Response(status_code=201, content_type=JSON, body=CalendarOut.of(calendar))


@router.get(
    "/v1/calendars",
    operation_id="listCalendars",
    tags=["calendars"],
    responses=responses(200, CalendarList),
    security=needs(TokenScope.READ),
)
def list_calendars(
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Cursor = None,
) -> CalendarList:
    page = service().calendars.list(team().team_id, limit, cursor)
    return CalendarList(calendars=[CalendarOut.of(c) for c in page.items], next_cursor=page.cursor)


@router.get(
    "/v1/calendars/<name>",
    operation_id="getCalendar",
    tags=["calendars"],
    responses=responses(200, CalendarOut, 404),
    security=needs(TokenScope.READ),
    description="One calendar; with `year`, also the days of that year it holds (`days`), each with its "
    "holiday's or event's name where the source gives one.",
)
def get_calendar(
    name: CalendarName,
    year: Annotated[int | None, Query(ge=1900, le=2200, description="list this year's days")] = None,
) -> CalendarOut:
    calendars = service().calendars
    calendar = calendars.get(team().team_id, name)
    days = calendars.days(team().team_id, name, year) if year is not None else None
    return CalendarOut.of(calendar, year, days, calendars.users(team().team_id, name))


@router.put(
    "/v1/calendars/<name>",
    operation_id="updateCalendar",
    tags=["calendars"],
    responses=responses(200, CalendarOut, 404, 409),
    security=needs(TokenScope.ADMIN),
    description="Replace the calendar's source and description; its version goes up by one. With `version` "
    "(the one you read), a calendar changed since answers 409 naming `version` and nothing is written.",
)
def put_calendar(name: CalendarName, update: Annotated[CalendarUpdate, Body()]) -> CalendarOut:
    body = json.loads(router.current_event.body or "{}")
    return CalendarOut.of(service().calendars.update(team().team_id, name, body, actor()))


@router.delete(
    "/v1/calendars/<name>",
    operation_id="deleteCalendar",
    tags=["calendars"],
    responses=responses(204, None, 404, 409),
    security=needs(TokenScope.ADMIN),
    description="Delete the calendar (with `version`: only that version, else 409); a calendar jobs use is "
    "not deleted: 409 naming them. Its history stays readable for 90 days, and its versions stay taken: a "
    "calendar created again under the name continues from the next one.",
)
def delete_calendar(
    name: CalendarName, version: Annotated[int | None, Query(ge=1, description="the version you read")] = None
) -> Response[Any]:
    service().calendars.delete(team().team_id, name, actor(), version)
    return Response(status_code=204, body="")


@router.get(
    "/v1/calendars/<name>/history",
    operation_id="getCalendarHistory",
    tags=["calendars"],
    responses=responses(200, CalendarHistory, 404),
    security=needs(TokenScope.READ),
    description="What changed in the calendar, when, and by which token, newest first, for 90 days; a "
    "deleted calendar's history stays readable until then.",
)
def calendar_history(
    name: CalendarName,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Cursor = None,
) -> CalendarHistory:
    page = service().calendars.history(team().team_id, name, limit, cursor)
    return CalendarHistory(changes=[CalendarChangeOut.of(c) for c in page.items], next_cursor=page.cursor)
