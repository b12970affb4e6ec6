"""Signatures across a signing-secret rotation, and a disabled team's claims (pure, no store)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from duetime.api.team_admin import next_secret_id
from duetime.domain.claim_plan import plan_claim
from duetime.domain.models import Job, JobState, Team
from duetime.domain.signing import signature_header, signing_keys, verify_signature

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
BODY = b'{"report": "nightly"}'
ROTATED = Team(
    team_id="t",
    signing_secret="new-secret",
    signing_secret_id="s2",
    previous_signing_secret="old-secret",
    previous_signing_secret_id="s1",
    previous_signing_secret_until=NOW + timedelta(hours=1),
)


def test_during_the_overlap_a_call_is_signed_with_the_new_secret_first_and_the_old_one_second() -> None:
    keys = signing_keys(ROTATED, NOW)
    assert [(k.key_id, k.secret) for k in keys] == [("s2", "new-secret"), ("s1", "old-secret")]
    header = signature_header(keys, 1_800_000_000, BODY)
    assert header.startswith("t=1800000000,v1=") and ",key=s2,v1=" in header and header.endswith(",key=s1")
    for secret, key in (("new-secret", "s2"), ("old-secret", "s1")):
        assert verify_signature(secret, header, BODY, 1_800_000_000)
        assert verify_signature(secret, header, BODY, 1_800_000_000, key_id=key)
    assert not verify_signature("old-secret", header, BODY, 1_800_000_000, key_id="s2")  # names must match
    assert not verify_signature("another", header, BODY, 1_800_000_000)


def test_the_old_secret_stops_signing_the_moment_its_overlap_ends() -> None:
    assert [
        k.key_id for k in signing_keys(ROTATED, NOW + timedelta(hours=1) - timedelta(microseconds=1))
    ] == [
        "s2",
        "s1",
    ]
    assert [k.key_id for k in signing_keys(ROTATED, NOW + timedelta(hours=1))] == ["s2"]
    assert signing_keys(Team(team_id="no-secret"), NOW) == []


def test_a_header_in_the_format_before_rotation_still_verifies() -> None:
    header = signature_header("secret", 1_800_000_000, BODY)
    assert "key=" not in header
    assert verify_signature("secret", header, BODY, 1_800_000_100)
    assert not verify_signature("secret", header, BODY, 1_800_000_301)  # older than the 5-minute tolerance
    assert not verify_signature("secret", "t=1800000000", BODY, 1_800_000_000)
    assert not verify_signature("secret", "garbage", BODY, 1_800_000_000)


def test_secret_ids_only_grow() -> None:
    assert [next_secret_id(i) for i in ("s1", "s9", "s41", "custom")] == ["s2", "s10", "s42", "s2"]


def test_a_disabled_teams_due_times_pass_without_runs_and_its_schedule_moves_on() -> None:
    job = Job.model_validate(
        {
            "id": "01JOB",
            "team": "t",
            "name": "every minute",
            "schedule": {"rate": "1 minute"},
            "target": {"url": "https://example.com/hook"},
            "exact": True,
            "created_at": NOW - timedelta(minutes=3),
            "updated_at": NOW - timedelta(minutes=3),
            "state": JobState(
                next_nominal_at=NOW - timedelta(minutes=2), next_fire_at=NOW - timedelta(minutes=2), version=4
            ),
        }
    )
    active = plan_claim(job, NOW, team_active=True)
    disabled = plan_claim(job, NOW, team_active=False)
    assert len(active.runs) >= 1 and disabled.runs == ()
    assert disabled.dropped == active.dropped + len(active.runs)
    assert disabled.next_state == active.next_state  # the schedule moves exactly as it would have
