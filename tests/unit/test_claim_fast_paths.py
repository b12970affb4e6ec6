"""The claim path's faster ways to the same result: each is checked against the general path it stands for."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pydantic
import pytest

from duetime.models import CronSchedule
from duetime.timeutil import MINUTE_BUCKET, minute_bucket, to_utc

CRONS = ["0 0 * * *", "  */5\t* * *  1-5 ", "@daily", "@hourly", "0 12 1,15 * MON", "30\t\t2 * * *"]


@pytest.mark.parametrize("cron", CRONS)
def test_a_stored_cron_reads_as_the_client_path_reads_it(cron: str) -> None:
    sent = CronSchedule.model_validate({"cron": cron, "timezone": "Europe/Berlin"})
    for _ in range(2):  # the second read is the cached one
        stored = CronSchedule.model_validate(
            {"cron": cron, "timezone": "Europe/Berlin"}, context={"stored": True}
        )
        assert stored == sent
        assert stored.cron == sent.cron


@pytest.mark.parametrize("cron", ["@often", "0 0 * *", "0 0 * * * *", "0 0 ? * *"])
def test_a_stored_cron_that_is_no_cron_is_still_refused(cron: str) -> None:
    for _ in range(2):
        with pytest.raises(pydantic.ValidationError) as stored:
            CronSchedule.model_validate({"cron": cron}, context={"stored": True})
        with pytest.raises(pydantic.ValidationError) as sent:
            CronSchedule.model_validate({"cron": cron})
        assert stored.value.errors()[0]["msg"] == sent.value.errors()[0]["msg"]


def test_a_minute_bucket_is_the_text_strftime_makes() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    instants = [
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(999, 12, 31, 23, 59, 59, tzinfo=UTC),
        datetime(1000, 1, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
        datetime(2026, 10, 25, 2, 30, fold=1, tzinfo=berlin),  # the second 02:30 of a fall-back
        datetime(2026, 12, 3, 12, 0, 59, 999_999, tzinfo=timezone(timedelta(hours=-5))),
    ]
    start = datetime(2026, 12, 3, tzinfo=UTC)
    instants += [start + timedelta(seconds=7 * k + 0.25) for k in range(2000)]
    for instant in instants:
        assert minute_bucket(instant) == to_utc(instant).strftime(MINUTE_BUCKET)
