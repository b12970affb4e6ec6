"""The claim path's faster ways to the same result: each is checked against the general path it stands for."""

from __future__ import annotations

import pydantic
import pytest

from duetime.models import CronSchedule

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
