"""A role registered for a team must require the team's external id (issue 33, item 5): duetime asks STS to
let it in with a wrong one (``TeamAdmin.check_role_trust``, ``Boto3RoleTrustProbe``). STS is botocore's
Stubber here: LocalStack lets any external id in, so no emulator can show a trust policy's answer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

import boto3
import botocore.session
import pytest
from botocore.stub import ANY, Stubber

from duetime.adapters.aws.role_trust_probe import (
    PROBE_SESSION_POLICY,
    PROBE_SESSION_SECONDS,
    Boto3RoleTrustProbe,
)
from duetime.adapters.memory.role_trust import MemoryRoleTrust
from duetime.api.team_admin import TeamAdmin
from duetime.domain.catalog import AuditEvent
from duetime.domain.clock import ManualClock
from duetime.domain.errors import InvalidInput, Unavailable
from duetime.domain.models import Team
from duetime.ports import TeamCatalog

ACCOUNT = "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/duetime-target-billing"
WORKER_ROLE = f"arn:aws:iam::{ACCOUNT}:role/Duetime-WorkersWorkerRole"
TEAM = Team(team_id="billing", name="billing", signing_secret="s" * 64, aws_external_id="dt-" + "a" * 32)


class Records:
    """The team rows ``TeamAdmin`` reads and writes, in memory; every write is kept (``written``)."""

    def __init__(self, team: Team) -> None:
        self.teams = {team.team_id: (team, 1)}
        self.written: list[tuple[Team, AuditEvent]] = []

    def get_team(self, team_id: str) -> Team | None:
        found = self.teams.get(team_id)
        return found[0] if found else None

    def team_revision(self, team_id: str) -> tuple[Team, int] | None:
        return self.teams.get(team_id)

    def replace_team(
        self, before: Team, revision: int, after: Team, audit: AuditEvent, **tokens: Any
    ) -> bool:
        if self.teams[before.team_id] != (before, revision):
            return False
        self.teams[after.team_id] = (after, revision + 1)
        self.written.append((after, audit))
        return True


class StubbedSession:
    """Stands in for a boto3 session: its STS client is one with a botocore Stubber on it, made with what
    ``made`` keeps (a second client of the same session answers from the same queue)."""

    def __init__(self) -> None:
        self.sts = botocore.session.get_session().create_client(
            "sts", region_name="us-east-1", aws_access_key_id="AKIAWORKER", aws_secret_access_key="x"
        )
        self.stubber = Stubber(self.sts)
        self.stubber.activate()
        self.made: list[dict[str, Any]] = []

    def client(self, service: str, **kwargs: Any) -> Any:
        assert service == "sts"
        self.made.append(kwargs)
        return self.sts

    def probe(self, as_role_arn: str | None = None) -> Boto3RoleTrustProbe:
        return Boto3RoleTrustProbe(cast(boto3.session.Session, self), as_role_arn=as_role_arn)


def credentials() -> dict[str, Any]:
    return {
        "Credentials": {
            "AccessKeyId": "ASIAPROBE0000001",
            "SecretAccessKey": "secret",
            "SessionToken": "token",
            "Expiration": datetime.now(UTC) + timedelta(minutes=15),
        }
    }


def wrong_id_request(team_id: str = "billing") -> dict[str, Any]:
    """What the probe sends: the worker's call for the team, with an external id that is not the team's."""
    return {
        "RoleArn": ROLE,
        "ExternalId": ANY,
        "RoleSessionName": f"duetime-{team_id}",
        "DurationSeconds": PROBE_SESSION_SECONDS,
        "Tags": [{"Key": "duetime:team", "Value": team_id}],
        "TransitiveTagKeys": ["duetime:team"],
    }


def admin(records: Records, probe: Any) -> TeamAdmin:
    clock = ManualClock(datetime(2026, 12, 4, tzinfo=UTC))
    return TeamAdmin(cast(TeamCatalog, records), clock, actor="api", role_trust=probe)


def test_a_role_that_lets_in_a_wrong_external_id_is_refused_and_nothing_is_written() -> None:
    records = Records(TEAM)
    sts = StubbedSession()
    sts.stubber.add_response("assume_role", credentials(), wrong_id_request())

    with pytest.raises(InvalidInput) as refused:
        admin(records, sts.probe()).set_aws_role("billing", ROLE)

    assert refused.value.status == 422
    assert refused.value.field == "role_arn"
    assert '"sts:ExternalId"' in refused.value.message
    assert records.written == []
    assert records.teams["billing"] == (TEAM, 1)  # the team's row unchanged
    sts.stubber.assert_no_pending_responses()


def test_the_wrong_external_id_is_a_fresh_one_that_is_not_the_teams() -> None:
    trust = MemoryRoleTrust()
    teams = admin(Records(TEAM), trust)

    teams.set_aws_role("billing", ROLE)
    teams.set_aws_role("billing", ROLE)

    first, second = trust.asked
    assert TEAM.aws_external_id not in (first.external_id, second.external_id)
    assert first.external_id != second.external_id
    assert (first.role_arn, first.session_name, first.team_id) == (ROLE, "duetime-billing", "billing")


def test_access_denied_to_a_wrong_external_id_means_the_role_is_accepted() -> None:
    records = Records(TEAM)
    sts = StubbedSession()
    sts.stubber.add_client_error("assume_role", "AccessDenied", "no", 403, expected_params=wrong_id_request())

    team = admin(records, sts.probe()).set_aws_role("billing", ROLE)

    assert team.aws_role_arn == ROLE
    written = [(after.aws_role_arn, audit.action) for after, audit in records.written]
    assert written == [(ROLE, "set-aws-role")]


@pytest.mark.parametrize(
    ("code", "status"), [("Throttling", 400), ("ServiceUnavailable", 503), ("RegionDisabledException", 403)]
)
def test_when_sts_gives_no_verdict_the_role_is_not_registered_and_the_answer_says_try_again(
    code: str, status: int
) -> None:
    records = Records(TEAM)
    sts = StubbedSession()
    sts.stubber.add_client_error("assume_role", code, "no", http_status_code=status)

    with pytest.raises(Unavailable) as unavailable:
        admin(records, sts.probe()).set_aws_role("billing", ROLE)

    assert (unavailable.value.status, unavailable.value.field) == (503, "role_arn")
    assert "try again" in unavailable.value.message
    assert unavailable.value.headers() == {"Retry-After": "5"}
    assert records.written == []


def test_the_probe_asks_as_the_workers_role_whose_session_may_only_ask_sts() -> None:
    """Customers' trust policies name the worker's role, not the API's: a probe from the API's own role
    would always be refused, and every role accepted. So it takes the worker's role first."""
    sts = StubbedSession()
    worker_session = {
        "RoleArn": WORKER_ROLE,
        "RoleSessionName": "duetime-role-trust-probe",
        "DurationSeconds": PROBE_SESSION_SECONDS,
        "Policy": PROBE_SESSION_POLICY,
    }
    sts.stubber.add_response("assume_role", credentials(), worker_session)
    sts.stubber.add_client_error("assume_role", "AccessDenied", "no", 403, expected_params=wrong_id_request())

    admin(Records(TEAM), sts.probe(as_role_arn=WORKER_ROLE)).set_aws_role("billing", ROLE)

    assert [made.get("aws_session_token") for made in sts.made] == [None, "token"]
    sts.stubber.assert_no_pending_responses()


def test_access_denied_to_the_workers_role_is_no_verdict_not_an_accepted_role() -> None:
    records = Records(TEAM)
    sts = StubbedSession()
    sts.stubber.add_client_error("assume_role", "AccessDenied", "the api may not", http_status_code=403)

    with pytest.raises(Unavailable):
        admin(records, sts.probe(as_role_arn=WORKER_ROLE)).set_aws_role("billing", ROLE)

    assert records.written == []


def test_a_role_of_the_wrong_shape_is_refused_before_sts_is_asked() -> None:
    trust = MemoryRoleTrust()

    with pytest.raises(InvalidInput):
        admin(Records(TEAM), trust).set_aws_role("billing", f"arn:aws:iam::{ACCOUNT}:role/not-duetimes")

    assert trust.asked == []


def test_removing_the_role_asks_nothing() -> None:
    trust = MemoryRoleTrust(unanswered={ROLE})
    records = Records(TEAM.model_copy(update={"aws_role_arn": ROLE}))

    assert admin(records, trust).set_aws_role("billing", None).aws_role_arn is None
    assert trust.asked == []


def test_without_a_probe_as_on_localstack_a_role_is_registered_unchecked() -> None:
    assert admin(Records(TEAM), None).set_aws_role("billing", ROLE).aws_role_arn == ROLE
