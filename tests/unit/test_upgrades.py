"""Upgrades and rollbacks in two phases (docs/guide/upgrading.md): what a release writes before and after the
installation is finalized, when a finalize is allowed, and which deploys are refused."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from duetime.adapters.dynamodb.codec import job_to_item, run_to_item
from duetime.adapters.memory import MemoryStore
from duetime.adapters.memory.installation import MemoryInstallation
from duetime.cli.installation import assembly_stack
from duetime.domain import stored_format
from duetime.domain.claim_plan import PlannedRun, new_run
from duetime.domain.installation import DRAIN, Installation, ReleaseSeen, deploy_refusal, finalize_refusal
from duetime.domain.stored_format import FORMAT, format_of, release_format
from duetime.ports import RunMessage
from duetime.ports.queue import decode, encode
from duetime.upgrades.operations import describe, finalize
from duetime.upgrades.written_format import WrittenFormat

from ..twin_support import a_job

T0 = datetime(2026, 12, 7, 5, 0, 0, tzinfo=UTC)


def finalized_at(stored_format: int, release: str | None = None, *seen: ReleaseSeen) -> Installation:
    return Installation(finalized_format=stored_format, finalized_release=release, releases=seen)


@pytest.mark.parametrize(
    ("release", "stored_format"),
    [
        ("0.1.0", 1),
        ("0.1.7", 1),
        ("0.2.0", 2),
        ("0.2.3", 2),
        ("0.2.0rc1", 2),
        ("0.2.0-rc.1", 2),
        ("0.9.0", None),
    ],
)
def test_a_release_line_writes_one_format(release: str, stored_format: int | None) -> None:
    assert release_format(release) == stored_format


def test_this_release_writes_the_newest_format_it_knows() -> None:
    from duetime import __version__

    assert release_format(__version__) == FORMAT


# --- deploys -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("have", [1, 2])
def test_a_release_deploys_over_an_installation_finalized_at_its_format_or_the_one_before(have: int) -> None:
    assert deploy_refusal(finalized_at(have), "0.2.0") is None


def test_a_rollback_before_the_finalize_is_allowed() -> None:
    assert deploy_refusal(finalized_at(1), "0.1.0") is None


def test_a_rollback_past_a_finalize_is_refused_naming_both_releases() -> None:
    refusal = deploy_refusal(finalized_at(2, "0.2.0"), "0.1.0")
    assert refusal is not None
    assert refusal.startswith("rollback refused")
    assert "0.2.0" in refusal and "0.1.0" in refusal and "format 2" in refusal


def test_an_upgrade_that_skips_a_finalize_is_refused_naming_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(stored_format.RELEASE_FORMATS, "0.3", 3)  # a release to come
    refusal = deploy_refusal(finalized_at(1), "0.3.0")
    assert refusal is not None
    assert refusal.startswith("upgrade refused")
    assert "duetime system finalize" in refusal
    assert deploy_refusal(finalized_at(2, "0.2.0"), "0.3.0") is None


def test_a_release_of_an_unknown_line_is_refused() -> None:
    assert deploy_refusal(finalized_at(2), "7.0.0") is not None


# --- finalize ------------------------------------------------------------------------------------------


def seen(release: str, first: timedelta, last: timedelta) -> ReleaseSeen:
    return ReleaseSeen(release, T0 + first, T0 + last)


def test_finalize_waits_until_the_release_before_can_no_longer_run() -> None:
    installation = finalized_at(1, None, seen("0.2.0", timedelta(0), timedelta(minutes=5)))
    refusal = finalize_refusal(installation, "0.2.0", T0 + DRAIN - timedelta(seconds=1))
    assert refusal is not None and "finalize after that" in refusal
    assert finalize_refusal(installation, "0.2.0", T0 + DRAIN) is None


def test_finalize_is_refused_while_another_release_was_seen_within_the_drain() -> None:
    installation = finalized_at(
        1,
        None,
        seen("0.2.0", timedelta(0), timedelta(hours=1)),
        seen("0.1.9", timedelta(minutes=-90), timedelta(minutes=50)),  # a rollback and forward again
    )
    refusal = finalize_refusal(installation, "0.2.0", T0 + timedelta(hours=1))
    assert refusal is not None and "0.1.9" in refusal
    assert finalize_refusal(installation, "0.2.0", T0 + timedelta(minutes=50) + DRAIN) is None


def test_finalize_is_refused_before_the_release_has_run() -> None:
    refusal = finalize_refusal(finalized_at(1), "0.2.0", T0)
    assert refusal is not None and "no function of release 0.2.0" in refusal


def test_finalize_writes_the_format_once_and_again_is_a_no_op() -> None:
    record = MemoryInstallation()
    record.record_release("0.2.0", T0)
    early = finalize(record, "0.2.0", T0 + timedelta(minutes=1))
    assert (early.done, early.stored_format) == (False, 1)
    assert early.refusal is not None
    forced = finalize(record, "0.2.0", T0 + timedelta(minutes=1), force=True)
    assert (forced.done, forced.stored_format, forced.refusal) == (True, 2, None)
    again = finalize(record, "0.2.0", T0 + timedelta(minutes=2))
    assert (again.done, again.stored_format) == (True, 2)
    assert record.read_installation().finalized_release == "0.2.0"


def test_force_never_moves_the_format_back() -> None:
    record = MemoryInstallation()
    record.finalize_installation(2, "0.2.0", T0, was=1)
    record.record_release("0.1.0", T0)
    done = finalize(record, "0.1.0", T0 + timedelta(hours=1), force=True)
    assert (done.done, done.stored_format) == (False, 2)


def test_describe_says_whether_finalize_is_ready() -> None:
    installation = finalized_at(1, None, seen("0.2.0", timedelta(0), timedelta(0)))
    assert describe(installation, "0.2.0", T0)["finalize"].startswith("not yet")
    assert describe(installation, "0.2.0", T0 + DRAIN)["finalize"] == "ready"
    assert describe(finalized_at(2, "0.2.0"), "0.2.0", T0)["finalize"] == "done"
    assert describe(installation, "0.2.0", T0)["this_release"]["writes_format"] == 1


# --- what a process writes ------------------------------------------------------------------------------


class Ticks:
    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self) -> float:
        return self.seconds


def test_an_upgraded_installation_is_written_in_the_old_format_until_finalized() -> None:
    store = MemoryStore()
    store.put_job(a_job(T0), T0)  # an older release's job: not a new installation
    record = MemoryInstallation(store)
    ticks = Ticks()
    written = WrittenFormat(record, "0.2.0", lambda: T0, refresh=timedelta(minutes=5), monotonic=ticks)
    assert written() == 1
    record.finalize_installation(2, "0.2.0", T0, was=1)
    ticks.seconds = 299
    assert written() == 1  # asked again only after the refresh
    ticks.seconds = 300
    assert written() == 2


def test_a_new_installation_is_finalized_at_this_releases_format_by_its_first_write() -> None:
    record = MemoryInstallation(MemoryStore())
    written = WrittenFormat(record, "0.2.0", lambda: T0)
    assert written() == FORMAT
    installation = record.read_installation()
    assert (installation.finalized_format, installation.finalized_release) == (FORMAT, "0.2.0")


def test_each_ask_records_that_the_release_runs() -> None:
    record = MemoryInstallation(MemoryStore())
    ticks = Ticks()
    clock = [T0]
    written = WrittenFormat(record, "0.2.0", lambda: clock[0], monotonic=ticks)
    written()
    clock[0], ticks.seconds = T0 + timedelta(minutes=6), 360
    written()
    assert record.read_installation().seen("0.2.0") == ReleaseSeen("0.2.0", T0, T0 + timedelta(minutes=6))


def test_a_release_never_writes_a_format_newer_than_its_own() -> None:
    record = MemoryInstallation()
    record.finalize_installation(3, "0.3.0", T0, was=1)
    assert WrittenFormat(record, "0.2.0", lambda: T0, release_format=2)() == 2


# --- the stamp -----------------------------------------------------------------------------------------


def test_items_and_messages_of_format_one_carry_no_format_and_read_as_format_one() -> None:
    job = a_job(T0)
    run = new_run(job, PlannedRun(T0, T0), T0, T0 + timedelta(minutes=10))
    assert "fmt" not in job_to_item(job, T0)
    assert "fmt" not in run_to_item(run)
    assert "fmt" not in json.loads(encode(RunMessage.carrying(run)))
    assert format_of(job_to_item(job, T0)) == 1


def test_items_and_messages_of_format_two_carry_it() -> None:
    job = a_job(T0)
    run = new_run(job, PlannedRun(T0, T0), T0, T0 + timedelta(minutes=10))
    assert job_to_item(job, T0, 2)["fmt"] == {"N": "2"}
    assert run_to_item(run, stored_format=2)["fmt"] == {"N": "2"}
    body = encode(RunMessage.carrying(run), 2)
    assert format_of(json.loads(body)) == 2
    assert decode(body) == decode(encode(RunMessage.carrying(run)))  # read alike


def test_the_deploy_check_finds_the_stack_an_assembly_deploys(tmp_path: Path) -> None:
    manifest = {
        "artifacts": {
            "Tree": {"type": "cdk:tree"},
            "Duetime": {"type": "aws:cloudformation:stack", "properties": {"stackName": "Duetime-prod"}},
        }
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assert assembly_stack(tmp_path) == "Duetime-prod"


def test_a_client_reads_an_answer_to_which_a_later_server_added_fields() -> None:
    from pydantic import ValidationError

    from duetime.api.schemas import PreviewOut

    answer = {"job_id": "01JDZ3K6R2V9Q8T7S6P5N4M3K2", "runs": [], "skipped": [], "shiny": True}
    with pytest.raises(ValidationError, match="shiny"):
        PreviewOut.model_validate(answer)  # the server's own answers hold exactly their fields
    assert PreviewOut.model_validate(answer, context=stored_format.STORED) == PreviewOut.model_validate(
        {k: v for k, v in answer.items() if k != "shiny"}
    )


def test_a_release_is_found_by_its_version_without_its_tag() -> None:
    from duetime.upgrades.releases import release_commits, resolve_ref

    root = Path(__file__).resolve().parents[2]
    assert resolve_ref("v0.1.0", root) == resolve_ref("0.1.0", root) == release_commits(root)["0.1.0"]
    assert resolve_ref("0.1.0", root).startswith("484f692")
    assert resolve_ref("main~3", root) == "main~3"  # anything else is git's to resolve


def test_a_record_that_cannot_be_read_never_fails_a_write() -> None:
    class Unreachable(MemoryInstallation):
        def record_release(self, release: str, now: datetime) -> Installation:
            raise ConnectionError("throttled")

    ticks = Ticks()
    record = Unreachable()
    written = WrittenFormat(record, "0.2.0", lambda: T0, monotonic=ticks)
    assert written() == 1  # before any read: the format every release reads
    ticks.seconds = 1
    assert written() == 1  # not asked again before the refresh
    healthy = MemoryInstallation()
    healthy.finalize_installation(2, "0.2.0", T0, was=1)
    written.record = healthy
    ticks.seconds = 301
    assert written() == 2
    written.record = record
    ticks.seconds = 700
    assert written() == 2  # the format last read stands


@pytest.mark.parametrize(
    ("installation", "release", "written"), [(1, 2, 1), (2, 2, 2), (3, 2, 2), (1, 3, 2), (2, 3, 2), (3, 3, 3)]
)
def test_a_release_writes_the_finalized_format_within_the_two_it_can_write(
    installation: int, release: int, written: int
) -> None:
    from duetime.domain.installation import write_format

    assert write_format(installation, release) == written
