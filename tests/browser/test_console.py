"""The web console in Chromium against ``duetime local``: what a team sees and can do, and that the token
stays where it belongs (sessionStorage, the Authorization header) and nowhere else."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Browser, Request, expect

from ..integration.local_system import LocalSystem, isolated
from .conftest import ALL_REQUESTS, TIME_ZONE, Console, new_console
from .support import PHONE, Api, sign_in_by_link

# One xdist worker runs them: one duetime local and one Chromium serve them all (session fixtures).
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("browser")]

RUN_TIMEOUT = 90_000  # ms: a run due now is claimed, called and recorded well within this


def tag() -> str:
    return uuid.uuid4().hex[:8]


def job_spec(system: LocalSystem, name: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "schedule": {"rate": "1 hour"},
        "target": {"url": f"{system.url}/demo/target"},
        **extra,
    }


def test_signing_in_with_the_form_shows_the_jobs_and_keeps_the_token_out_of_the_page(
    ui: Console, api: Api
) -> None:
    name = f"Signed-in listing {tag()}"
    api.ok("POST", "/v1/jobs", job_spec(ui.system, name))
    response = ui.page.goto(ui.url)
    assert response is not None and response.ok
    assert "script-src 'self'" in response.headers["content-security-policy"]  # so a violation would show
    token_input = ui.page.get_by_label("Team API token")
    assert token_input.get_attribute("type") == "password"
    expect(ui.page.locator("#nav")).to_be_hidden()
    token_input.fill(ui.system.token)
    ui.page.get_by_role("button", name="Sign in").click()
    expect(ui.page.get_by_role("link", name=name)).to_be_visible()
    assert token_input.input_value() == ""  # the field is cleared, the token is kept in sessionStorage only
    assert ui.page.evaluate("sessionStorage.getItem('duetime.token')") == ui.system.token
    assert ui.page.evaluate("localStorage.length") == 0
    ui.assert_clean()

    ui.page.get_by_role("button", name="Sign out").click()
    expect(ui.page.get_by_label("Team API token")).to_be_visible()
    assert ui.page.evaluate("sessionStorage.getItem('duetime.token')") is None
    expect(ui.page.locator("table.jobs-table")).to_have_count(0)


def team_label(team: dict[str, Any]) -> str:
    """How the console names a team: its name and id, or its id alone."""
    name = team.get("name")
    return f"{name} ({team['team_id']})" if name and name != team["team_id"] else team["team_id"]


def test_a_token_link_in_a_tab_not_signed_in_names_the_team_and_signs_in_only_when_sign_in_is_chosen(
    ui: Console, api: Api
) -> None:
    team, token = team_label(api.ok("GET", "/v1/team")), api.ok("GET", "/v1/token")
    sent = carrying(ui, ui.system.token)
    ui.page.goto(f"{ui.url}#token={ui.system.token}")
    dialog = ui.page.get_by_role("dialog", name="Sign in with this link?")
    expect(dialog).to_contain_text(
        f"This link signs you in to team {team} with its token {token['name']} (scope {token['scope']}). "
        "Sign in?"
    )
    assert ui.page.url == f"{ui.url}#/jobs"  # the fragment left the address bar before the question
    assert ui.system.token not in ui.page.evaluate("location.href + history.state")
    assert stored_token(ui) is None  # nothing stored until Sign in is chosen
    expect(ui.page.locator("#nav")).to_be_hidden()
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()  # the safe choice first
    found = ui.page.evaluate(LOW_CONTRAST_TEXT)
    assert found["low"] == [], found

    dialog.get_by_role("button", name="Sign in").click()
    expect(dialog).to_have_count(0)
    expect(ui.page.locator("#status")).to_have_text(f"Signed in to team {team}.")
    expect(ui.page.get_by_role("heading", name="Jobs", exact=True)).to_be_focused()
    assert stored_token(ui) == ui.system.token
    ui.page.reload()  # the tab keeps the session, and nothing of the link is left to ask about
    expect(ui.page.get_by_role("heading", name="Jobs", exact=True)).to_be_visible()
    expect(dialog).to_have_count(0)
    assert_only_in_the_authorization_header(ui, sent, ui.system.token)
    ui.assert_clean()


def test_a_token_link_in_a_tab_not_signed_in_leaves_it_signed_out_when_cancel_or_escape_is_chosen(
    ui: Console,
) -> None:
    link = f"{ui.url}#token={ui.system.token}"
    dialog = ui.page.get_by_role("dialog", name="Sign in with this link?")
    for choose in (
        lambda: ui.page.keyboard.press("Escape"),
        lambda: dialog.get_by_role("button", name="Cancel").click(),
    ):
        ui.page.goto("about:blank")
        ui.page.goto(link)  # a new page load in a tab not signed in
        expect(dialog).to_contain_text("This link signs you in to team")
        choose()
        expect(dialog).to_have_count(0)
        expect(ui.page.locator("#status")).to_have_text("You are not signed in: the link was not used.")
        expect(ui.page.get_by_label("Team API token")).to_be_focused()
        expect(ui.page.locator("#nav")).to_be_hidden()
        assert ui.page.evaluate("sessionStorage.length") == 0
    ui.page.reload()
    expect(ui.page.get_by_label("Team API token")).to_be_visible()
    ui.page.wait_for_load_state("networkidle")
    expect(dialog).to_have_count(0)
    assert ui.page.evaluate("sessionStorage.length") == 0
    ui.assert_clean()


def test_tab_reaches_the_token_input_then_the_sign_in_button_and_enter_signs_in(ui: Console) -> None:
    ui.page.goto(ui.url)
    ui.page.wait_for_selector("#sign-in:not([hidden])")
    focused = []
    for _ in range(6):
        ui.page.keyboard.press("Tab")
        focused.append(ui.page.evaluate("document.activeElement.id || document.activeElement.textContent"))
        if focused[-1] == "token-input":
            break
    assert focused[-1] == "token-input", focused
    ui.page.keyboard.press("Tab")
    assert ui.page.evaluate("document.activeElement.textContent") == "Sign in"
    ui.page.keyboard.press("Shift+Tab")
    ui.page.keyboard.type(ui.system.token)
    ui.page.keyboard.press("Enter")
    expect(ui.page.get_by_role("heading", name="Jobs", exact=True)).to_be_focused()  # focus follows the page
    ui.assert_clean()


def test_a_token_link_with_a_refused_token_in_a_tab_not_signed_in_says_so_and_stores_nothing(
    ui: Console,
) -> None:
    ui.allowed_statuses = (401,)
    ui.page.goto(f"{ui.url}#token=dt_not-a-real-token")
    refused = "The API refused the token in the link. You are not signed in."
    expect(ui.page.locator("#sign-in-message")).to_have_text(refused)
    expect(ui.page.locator("#status")).to_have_text(refused)
    expect(ui.page.get_by_label("Team API token")).to_be_visible()
    expect(ui.page.get_by_role("dialog")).to_have_count(0)
    assert ui.page.evaluate("sessionStorage.length") == 0
    ui.assert_clean()


def test_a_token_link_in_a_tab_whose_token_was_revoked_asks_as_in_a_tab_not_signed_in(
    ui: Console, api: Api
) -> None:
    ui.allowed_statuses = (401,)
    reader, issued = scoped(api, "read")
    open_as(ui, reader.token)
    api.ok("DELETE", f"/v1/tokens/{issued['token_id']}")
    ui.page.goto(f"{ui.url}#token={ui.system.token}")
    dialog = ui.page.get_by_role("dialog", name="Sign in with this link?")
    expect(dialog).to_contain_text("This link signs you in to team")
    assert stored_token(ui) is None  # the revoked token dropped, the link's not taken yet
    dialog.get_by_role("button", name="Sign in").click()
    expect(ui.page.get_by_role("heading", name="Jobs", exact=True)).to_be_visible()
    assert stored_token(ui) == ui.system.token
    ui.assert_clean()


@pytest.fixture(scope="module")
def other_team(system: LocalSystem, prefix: str) -> tuple[str, Api]:
    """A second team of the same ``duetime local``, created as an operator does: its id and its API."""
    name = f"other-{tag()}"
    created = subprocess.run(
        [sys.executable, "-m", "duetime.cli", "teams", "create", name, "--local", "--json"],
        env={**os.environ, **isolated(prefix)},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return name, Api(system.url, json.loads(created.stdout)["token"])


def carrying(ui: Console, token: str) -> list[tuple[str, list[str]]]:
    """Filled as the page runs: each request that carries ``token``, its URL and where the token was."""
    found: list[tuple[str, list[str]]] = []

    def look(request: Request) -> None:
        where = [name for name, value in request.headers.items() if token in value]
        where += ["url"] * (token in request.url) + ["body"] * (token in (request.post_data or ""))
        if where:
            found.append((request.url, where))

    ui.page.on("request", look)
    return found


def assert_only_in_the_authorization_header(
    ui: Console, found: list[tuple[str, list[str]]], token: str
) -> None:
    """``token`` went (``found``, from ``carrying``) only as the Authorization header to this origin's /v1,
    and is nowhere in the page or its address."""
    assert found, "the page never sent the token"
    api = f"{ui.system.url}/v1/"
    assert [(u, w) for u, w in found if not u.startswith(api) or w != ["authorization"]] == []
    assert token not in ui.page.content()
    assert token not in ui.page.evaluate("location.href + history.state")


def stored_token(ui: Console) -> Any:
    return ui.page.evaluate("sessionStorage.getItem('duetime.token')")


def test_a_token_link_while_signed_in_names_both_teams_and_switches_only_when_switch_is_chosen(
    ui: Console, api: Api, other_team: tuple[str, Api]
) -> None:
    other, theirs = other_team
    ours = api.ok("GET", "/v1/team")["team_id"]
    their_job = f"Other team's job {tag()}"
    theirs.ok("POST", "/v1/jobs", job_spec(ui.system, their_job))
    ui.open()
    ui.page.wait_for_selector("table.jobs-table tbody tr")
    sent = carrying(ui, theirs.token)

    ui.page.goto(f"{ui.url}#token={theirs.token}")  # in the same tab: the fragment changes
    dialog = ui.page.get_by_role("dialog", name="Switch teams?")
    expect(dialog).to_contain_text(
        f"You are signed in to team {ours}. This link signs you in to team {other} instead. Switch?"
    )
    assert ui.page.url == f"{ui.url}#/jobs"  # the fragment left the address bar before the question
    assert stored_token(ui) == ui.system.token  # still team A until Switch is chosen
    expect(ui.page.locator("table.jobs-table tbody")).not_to_contain_text(their_job)
    expect(dialog.get_by_role("button", name=f"Stay in {ours}")).to_be_focused()  # the safe choice first
    found = ui.page.evaluate(LOW_CONTRAST_TEXT)
    assert found["low"] == [], found

    dialog.get_by_role("button", name=f"Switch to {other}").click()
    expect(dialog).to_have_count(0)
    expect(ui.page.locator("#status")).to_have_text(f"Signed in to team {other}.")
    expect(ui.page.get_by_role("link", name=their_job)).to_be_visible()
    assert stored_token(ui) == theirs.token
    assert_only_in_the_authorization_header(ui, sent, theirs.token)
    ui.assert_clean()


def test_a_token_link_while_signed_in_keeps_the_team_when_stay_or_escape_is_chosen(
    ui: Console, api: Api, other_team: tuple[str, Api]
) -> None:
    other, theirs = other_team
    ours = api.ok("GET", "/v1/team")["team_id"]
    ui.open()
    sent = carrying(ui, theirs.token)
    ui.page.goto("about:blank")
    ui.page.goto(f"{ui.url}#token={theirs.token}")  # a new page load in the signed-in tab
    dialog = ui.page.get_by_role("dialog", name="Switch teams?")
    expect(dialog).to_contain_text(f"team {other} instead")
    ui.page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    stayed = f"You are still signed in to team {ours}. The link was not used."
    expect(ui.page.locator("#status")).to_have_text(stayed)
    assert stored_token(ui) == ui.system.token

    ui.page.goto(f"{ui.url}#token={theirs.token}")
    dialog.get_by_role("button", name=f"Stay in {ours}").click()
    expect(dialog).to_have_count(0)
    assert stored_token(ui) == ui.system.token
    ui.page.reload()  # nothing of the link is left over to sign in with
    expect(ui.page.get_by_role("heading", name="Jobs", exact=True)).to_be_visible()
    expect(dialog).to_have_count(0)
    assert stored_token(ui) == ui.system.token
    assert_only_in_the_authorization_header(ui, sent, theirs.token)
    ui.assert_clean()


def test_a_token_link_with_the_token_signed_in_already_asks_nothing(ui: Console) -> None:
    ui.open()
    ui.page.wait_for_load_state("networkidle")
    before = len(ui.watch.requests)
    ui.page.goto(f"{ui.url}#token={ui.system.token}")
    expect(ui.page.get_by_role("heading", name="Jobs", exact=True)).to_be_visible()
    assert ui.page.url == f"{ui.url}#/jobs"
    ui.page.wait_for_load_state("networkidle")
    ui.page.wait_for_timeout(500)
    expect(ui.page.get_by_role("dialog")).to_have_count(0)
    assert [u for u in ui.watch.requests[before:] if u.endswith("/v1/team")] == []  # not even looked up
    assert stored_token(ui) == ui.system.token
    ui.assert_clean()


def test_a_token_link_with_a_refused_token_says_so_and_keeps_the_session(ui: Console, api: Api) -> None:
    ui.allowed_statuses = (401,)
    refused = "dt_not-a-real-token"
    ui.open()
    sent = carrying(ui, refused)
    ui.page.goto(f"{ui.url}#token={refused}")
    expect(ui.page.locator("#status")).to_have_text(
        "The API refused the token in the link. You are still signed in as before."
    )
    expect(ui.page.get_by_role("dialog")).to_have_count(0)
    assert stored_token(ui) == ui.system.token
    ui.page.get_by_role("link", name="Team", exact=True).click()  # the session still works
    expect(ui.page.locator("#quota-text")).to_contain_text("exact-time jobs")
    assert_only_in_the_authorization_header(ui, sent, refused)
    ui.assert_clean()


def test_a_job_created_with_the_form_runs_and_its_run_succeeds_on_the_job_page(ui: Console, api: Api) -> None:
    name = f"Form-made one-off {tag()}"
    ui.open("#/new")
    ui.page.get_by_label("Name").fill(name)
    ui.page.get_by_label("Once, at a time").check()
    when = (datetime.now(ZoneInfo(TIME_ZONE)) + timedelta(seconds=12)).replace(microsecond=0)
    ui.page.get_by_label("Run at (your local time)").fill(when.strftime("%Y-%m-%dT%H:%M:%S"))
    ui.page.get_by_label("URL").fill(f"{ui.system.url}/demo/target")
    ui.page.get_by_label("Labels (optional)").fill("suite:browser\ncase:create")
    ui.page.get_by_label("Exact time").check()
    ui.page.get_by_role("button", name="Create job").click()

    expect(ui.page).to_have_url(re.compile(r"#/jobs/[0-9A-Z]+$"))
    expect(ui.page.get_by_role("heading", level=1)).to_have_text(name)
    job_id = ui.page.url.rsplit("/", 1)[1]
    job = api.ok("GET", f"/v1/jobs/{job_id}")
    assert job["schedule"] == {"at": when.astimezone(ZoneInfo("UTC")).strftime("%Y-%m-%dT%H:%M:%SZ")}
    assert job["labels"] == {"suite": "browser", "case": "create"} and job["exact"] is True
    expect(ui.page.locator("#preview-table tbody tr")).to_have_count(1)  # a one-time job has one time

    # The runs table refreshes itself: no click needed to see the run appear and finish.
    row = ui.page.locator("#runs-table tbody tr[data-run-id]")
    expect(row).to_have_count(1, timeout=RUN_TIMEOUT)
    expect(row).to_have_attribute("data-status", "succeeded", timeout=RUN_TIMEOUT)
    expect(row.locator("td.attempt")).to_have_text("1 / 4")
    expect(row.locator("td.excerpt")).to_contain_text("HTTP 200")
    assert re.fullmatch(r"\u2212?\d+ s", row.locator("td[data-label=Lateness]").inner_text())
    assert re.fullmatch(r"\d+ ms|\d+\.\d+ s", row.locator("td[data-label=Duration]").inner_text())
    # The fire timeline matches the job's one time to that run.
    ui.page.locator("#refresh").click()
    fire = ui.page.locator("#fires-table tbody tr[data-label]")
    expect(fire).to_have_count(1)
    assert fire.get_attribute("data-label") in ("on_time", "late")
    expect(ui.page.locator("#fires-strip li")).to_have_count(1)
    expect(ui.page.locator("#fires-counts")).to_contain_text("missed 0")
    ui.assert_clean()


def test_more_options_set_jitter_timeout_overlap_and_misfire_and_a_refused_one_is_shown_unfolded(
    ui: Console, api: Api
) -> None:
    ui.allowed_statuses = (422,)
    name = f"Form-made options {tag()}"
    ui.open("#/new")
    ui.page.get_by_label("Name").fill(name)
    ui.page.get_by_label("Fixed rate").check()
    ui.page.get_by_label("Every").fill("10")
    ui.page.get_by_label("URL").fill(f"{ui.system.url}/demo/target")
    more = ui.page.locator("#job-more-options")
    expect(ui.page.get_by_label("Call timeout in seconds (optional)")).to_be_hidden()  # folded at first
    more.locator("summary").click()
    ui.page.get_by_label("Jitter in seconds (optional)").fill("45")
    timeout = ui.page.get_by_label("Call timeout in seconds (optional)")
    timeout.fill("900")  # over the API's 600
    ui.page.get_by_label("When the previous run has not finished").select_option("skip")
    ui.page.get_by_label("When runs were missed").select_option("skip")
    more.locator("summary").click()  # folded again before the submit: the refusal must unfold it
    ui.page.get_by_role("button", name="Create job").click()

    expect(ui.page.locator("#job-timeout-error")).to_be_visible()
    expect(ui.page.locator("#job-timeout-error")).to_contain_text("600")
    expect(timeout).to_be_focused()
    assert ui.page.url.endswith("#/new")  # nothing was created

    timeout.fill("45")
    ui.page.get_by_role("button", name="Create job").click()
    expect(ui.page).to_have_url(re.compile(r"#/jobs/[0-9A-Z]+$"))
    job = api.ok("GET", f"/v1/jobs/{ui.page.url.rsplit('/', 1)[1]}")
    assert (job["name"], job["schedule"]) == (name, {"rate": "10 minutes"})
    assert (job["jitter_seconds"], job["timeout_seconds"]) == (45, 45)
    assert (job["overlap"], job["misfire"]) == ("skip", "skip")
    ui.assert_clean()


def test_pausing_on_the_job_page_pauses_the_job_in_the_api_and_resuming_undoes_it(
    ui: Console, api: Api
) -> None:
    job = api.ok("POST", "/v1/jobs", job_spec(ui.system, f"Pausable {tag()}"))
    ui.open(f"#/jobs/{job['id']}")
    summary = ui.page.locator("dl.summary")
    expect(summary.locator("[data-state]")).to_have_text("active")
    ui.page.get_by_role("button", name="Pause").click()
    expect(summary.locator("[data-state]")).to_have_text("paused")
    expect(ui.page.get_by_role("button", name="Resume")).to_be_visible()
    assert api.ok("GET", f"/v1/jobs/{job['id']}")["paused"] is True
    ui.page.get_by_role("button", name="Resume").click()
    expect(summary.locator("[data-state]")).to_have_text("active")
    assert api.ok("GET", f"/v1/jobs/{job['id']}")["paused"] is False
    ui.assert_clean()


def test_an_aws_targets_job_page_names_its_service_and_resource(ui: Console, api: Api) -> None:
    queue = "http://localhost:4566/000000000000/console-orders"  # duetime local: no role, LocalStack URLs
    spec = {
        **job_spec(ui.system, f"To a queue {tag()}"),
        "target": {"type": "sqs", "queue_url": queue, "message": "m"},
    }
    job = api.ok("POST", "/v1/jobs", spec)
    ui.open(f"#/jobs/{job['id']}")
    expect(ui.page.locator("dl.summary")).to_contain_text(f"sqs {queue}")
    ui.assert_clean()


def test_a_job_page_shows_its_key_and_what_manages_it(ui: Console, api: Api) -> None:
    name = f"Applied {tag()}"
    key = f"console/{tag()}"
    api.ok("PUT", f"/v1/jobs/by-key/{key}", {**job_spec(ui.system, name), "managed_by": "billing-repo"})
    job = api.ok("GET", f"/v1/jobs/by-key/{key}")
    ui.open(f"#/jobs/{job['id']}")
    summary = ui.page.locator("dl.summary")
    expect(summary).to_contain_text(key)
    expect(summary).to_contain_text("billing-repo (duetime apply)")

    by_hand = api.ok("POST", "/v1/jobs", job_spec(ui.system, f"By hand {tag()}"))
    ui.open(f"#/jobs/{by_hand['id']}")
    expect(ui.page.locator("dl.summary")).to_contain_text("nothing: made by hand")
    ui.assert_clean()


def test_the_history_lists_the_creation_and_the_pause_with_the_token_id_never_the_token(
    ui: Console, api: Api
) -> None:
    job = api.ok("POST", "/v1/jobs", job_spec(ui.system, f"Audited {tag()}"))
    api.ok("POST", f"/v1/jobs/{job['id']}/pause")
    ui.open(f"#/jobs/{job['id']}")
    rows = ui.page.locator("#history-table tbody tr")
    expect(rows).to_have_count(2)
    assert [rows.nth(i).get_attribute("data-action") for i in range(2)] == ["pause", "create"]  # newest first
    for i in range(2):
        assert re.fullmatch(r"tok_[0-9a-z]+", rows.nth(i).locator("code").first.inner_text())
    expect(rows.nth(0)).to_contain_text("paused")  # the changed field, from false to true
    ui.assert_clean()


def test_the_next_runs_show_local_times_and_say_in_words_which_one_daylight_saving_moved(
    ui: Console, api: Api
) -> None:
    # 02:30 on 28 March in Berlin: in 2027 that is the spring-forward day, and 02:30 does not exist.
    schedule = {"cron": "30 2 28 3 *", "timezone": "Europe/Berlin"}
    job = api.ok("POST", "/v1/jobs", job_spec(ui.system, f"Spring forward {tag()}", schedule=schedule))
    preview = api.ok("GET", f"/v1/jobs/{job['id']}/preview?count=10")["runs"]
    ui.open(f"#/jobs/{job['id']}")
    rows = ui.page.locator("#preview-table tbody tr")
    expect(rows).to_have_count(10)
    for i, run in enumerate(preview):
        row = rows.nth(i)
        assert row.get_attribute("data-dst-shifted") == str(run["dst_shifted"]).lower()
        assert ("DST moved" in row.inner_text()) is run["dst_shifted"]  # said in words, not by colour alone
        nominal = row.locator("time").first
        assert nominal.get_attribute("datetime") == run["nominal_at"]  # the UTC instant, shown in local time
        local = datetime.fromisoformat(run["nominal_at"]).astimezone(ZoneInfo(TIME_ZONE))
        assert nominal.inner_text().startswith(local.strftime("%b %-d, %Y, %I:%M"))
    assert [r["dst_shifted"] for r in preview].count(True) >= 1
    ui.assert_clean()


def test_a_dead_run_is_retried_with_the_retry_button_and_its_new_attempt_shows(ui: Console, api: Api) -> None:
    spec = job_spec(ui.system, f"Always failing {tag()}", retry={"max_attempts": 1})
    spec["target"]["url"] += "?status=500"
    job = api.ok("POST", "/v1/jobs", spec)
    ui.open(f"#/jobs/{job['id']}")
    ui.page.get_by_role("button", name="Run now").click()
    row = ui.page.locator("#runs-table tbody tr[data-run-id]")
    expect(row).to_have_attribute("data-status", "dead", timeout=RUN_TIMEOUT)
    expect(row.locator("td.attempt")).to_have_text("1 / 1")
    expect(row.locator("td.excerpt")).to_contain_text("HTTP 500")
    expect(row.get_by_role("button", name="Cancel")).to_have_count(0)  # a finished run cannot be cancelled
    run_id = row.get_attribute("data-run-id")
    row.get_by_role("button", name="Retry").click()
    expect(row.locator("td.attempt")).to_have_text("2 / 2")
    expect(row).to_have_attribute("data-status", "dead", timeout=RUN_TIMEOUT)  # the target still fails
    assert api.ok("GET", f"/v1/runs/{run_id}")["attempt"] == 2
    ui.assert_clean()


def test_a_running_run_is_cancelled_with_its_cancel_button(ui: Console, api: Api) -> None:
    spec = job_spec(ui.system, f"Slow target {tag()}")
    spec["target"]["url"] += "?sleep=8"
    job = api.ok("POST", "/v1/jobs", spec)
    ui.open(f"#/jobs/{job['id']}")
    ui.page.get_by_role("button", name="Run now").click()
    row = ui.page.locator("#runs-table tbody tr[data-run-id]")
    expect(row).to_have_attribute("data-status", "running", timeout=RUN_TIMEOUT)
    expect(row.get_by_role("button", name="Retry")).to_have_count(0)  # only a failed or dead run is retried
    row.get_by_role("button", name="Cancel").click()
    expect(row).to_have_attribute("data-status", "cancelled")
    expect(row.get_by_role("button", name="Cancel")).to_have_count(0)
    assert api.ok("GET", f"/v1/runs/{row.get_attribute('data-run-id')}")["status"] == "cancelled"
    ui.assert_clean()


def test_a_field_the_api_refuses_shows_the_api_message_next_to_that_field(ui: Console, api: Api) -> None:
    ui.allowed_statuses = (422,)
    bad = {"name": "Refused", "schedule": {"cron": "0 2 * * *", "timezone": TIME_ZONE}}
    status, answer = api.call("POST", "/v1/jobs", {**bad, "target": {"url": "ftp://example.com/x"}})
    assert status == 422 and answer["error"]["field"] == "target.url"
    ui.open("#/new")
    ui.page.get_by_label("Name").fill("Refused")
    ui.page.get_by_label("Cron expression").fill("0 2 * * *")
    ui.page.get_by_label("Time zone", exact=True).fill(TIME_ZONE)
    url = ui.page.get_by_label("URL")
    url.fill("ftp://example.com/x")
    ui.page.get_by_role("button", name="Create job").click()
    error = ui.page.locator("#job-url-error")
    expect(error).to_be_visible()
    assert answer["error"]["message"].endswith(error.inner_text())  # the API's words, without "target.url: "
    expect(url).to_have_attribute("aria-invalid", "true")
    assert "job-url-error" in (url.get_attribute("aria-describedby") or "").split()
    expect(url).to_be_focused()
    assert ui.page.url.endswith("#/new")  # nothing was created

    # Fixed, and another field wrong: the old message goes, the new one is next to its own field.
    url.fill(f"{ui.system.url}/demo/target")
    ui.page.get_by_label("Time zone", exact=True).fill("Mars/Olympus_Mons")
    ui.page.get_by_role("button", name="Create job").click()
    expect(ui.page.locator("#job-timezone-error")).to_contain_text("unknown time zone")
    expect(error).to_be_hidden()
    assert url.get_attribute("aria-invalid") is None
    ui.assert_clean()


def test_the_label_filter_and_the_search_narrow_the_list(ui: Console, api: Api) -> None:
    run = tag()
    names = [f"Alpha reports {run}", f"Beta reports {run}", f"Gamma sync {run}"]
    jobs = [api.ok("POST", "/v1/jobs", job_spec(ui.system, n, labels={"suite": run})) for n in names]
    api.ok("POST", f"/v1/jobs/{jobs[2]['id']}/pause")
    ui.open()
    listed = ui.page.locator("table.jobs-table tbody tr[data-job-id] th a")

    ui.page.get_by_label("Label", exact=True).fill(f"suite:{run}")
    ui.page.get_by_role("button", name="Apply").click()
    expect(listed).to_have_text(sorted(names), use_inner_text=True)  # only this test's jobs
    assert any(f"label=suite%3A{run}" in u for u in ui.watch.requests)  # filtered by the API

    ui.page.get_by_label("Search names").fill("beta")
    ui.page.get_by_role("button", name="Apply").click()
    expect(listed).to_have_text([names[1]])
    assert any("q=beta" in u for u in ui.watch.requests)

    ui.page.get_by_label("Search names").fill("rep")  # the start of a word
    ui.page.get_by_role("button", name="Apply").click()
    expect(listed).to_have_text(names[:2])

    ui.page.get_by_label("Search names").fill("")
    ui.page.get_by_label("State").select_option("paused")  # applied to the loaded rows
    expect(listed).to_have_text([names[2]])
    assert f"label=suite%3A{run}" in ui.page.url and "state=paused" in ui.page.url  # a link keeps the view
    ui.assert_clean()


def test_the_team_page_shows_the_load_chart_and_the_exact_time_quota(ui: Console, api: Api) -> None:
    api.ok(
        "POST", "/v1/jobs", job_spec(ui.system, f"Quarter-hourly {tag()}", schedule={"rate": "15 minutes"})
    )
    api.ok("POST", "/v1/jobs", job_spec(ui.system, f"Exact {tag()}", exact=True))
    team = api.ok("GET", "/v1/team")
    assert team["exact_jobs"] >= 1
    ui.open("#/team")
    expect(ui.page.locator("#quota-text")).to_have_text(
        f"{team['exact_jobs']} of {team['exact_quota']} exact-time jobs"
    )
    chart = ui.page.locator("svg.chart")
    expect(chart).to_have_attribute("role", "img")
    assert ui.page.locator("svg.chart rect.bar").count() >= 4  # at least the 15-minute job, all day
    expect(chart.locator("line.cap-line")).to_have_count(1)
    expect(chart.locator("text.cap-label")).to_contain_text(f"concurrency cap {team['max_concurrency']}")
    summary = ui.page.locator("#load-summary")  # the chart's text alternative
    expect(summary).to_contain_text("due in the next 24 hours")
    assert int(ui.page.locator("#peak-text").inner_text().split()[0]) >= 1
    assert ui.page.locator("#load-table tbody tr").count() >= 4
    limits = ui.page.locator("dl.summary")
    expect(limits).to_contain_text(team["aws_external_id"])  # what the team's role trust policy requires
    ui.assert_clean()


def scoped(api: Api, scope: str) -> tuple[Api, dict[str, Any]]:
    """A new token of ``api``'s team with ``scope``, issued with ``api``'s admin token: its API and record."""
    issued = api.ok("POST", "/v1/tokens", {"name": f"console-{scope}-{tag()}", "scope": scope})
    assert issued["scope"] == scope and issued["in_use"] is False
    return Api(api.url, issued["token"]), issued


def open_as(ui: Console, token: str, route: str = "#/jobs") -> None:
    """Signed in with ``token`` by a #token= link in the test's fresh tab (Sign in chosen), then at
    ``route``."""
    sign_in_by_link(ui.page, ui.url, token)
    if route != "#/jobs":
        ui.page.goto(ui.url + route)


def token_line(token: dict[str, Any]) -> str:
    return f"token {token['name']} ({token['token_id']}) · scope {token['scope']}"


def test_the_header_and_the_team_page_name_the_token_in_use_with_its_id_and_scope(
    ui: Console, api: Api
) -> None:
    operator, issued = scoped(api, "operate")
    job = api.ok("POST", "/v1/jobs", job_spec(ui.system, f"Operated {tag()}"))
    admin = api.ok("GET", "/v1/token")
    assert admin["scope"] == "admin" and admin["in_use"] is True
    ui.open()
    header = ui.page.locator("#token-in-use")
    expect(header).to_have_text(token_line(admin))
    create = ui.page.locator("a[href='#/new']")  # the nav's link and the jobs page's button
    expect(create).to_have_count(2)
    for i in range(2):
        expect(create.nth(i)).to_be_visible()  # an admin token may create jobs

    ui.page.get_by_role("button", name="Sign out").click()
    expect(header).to_be_hidden()
    ui.page.get_by_label("Team API token").fill(operator.token)
    ui.page.get_by_role("button", name="Sign in").click()
    expect(header).to_have_text(token_line(issued))
    assert ui.page.evaluate("document.body.dataset.scope") == "operate"
    ui.page.reload()  # on load, signed in already: asked again
    expect(header).to_have_text(token_line(issued))
    expect(ui.page.get_by_role("link", name=job["name"])).to_be_visible()
    expect(create).to_have_count(2)
    for i in range(2):
        expect(create.nth(i)).to_be_hidden()  # creating needs admin

    ui.page.goto(f"{ui.url}#/new")
    expect(ui.page.locator(".needs-note")).to_be_visible()
    expect(ui.page.locator(".needs-note")).to_contain_text("Creating a job needs a token with scope admin")
    expect(ui.page.locator("#new-job-form")).to_be_hidden()

    ui.page.goto(f"{ui.url}#/jobs/{job['id']}")
    expect(ui.page.get_by_role("heading", level=1)).to_have_text(job["name"])
    expect(ui.page.get_by_role("button", name="Run now")).to_be_visible()  # operate may run and pause
    expect(ui.page.get_by_role("button", name="Pause")).to_be_visible()
    expect(ui.page.locator(".needs-note")).to_be_hidden()

    ui.page.get_by_role("link", name="Team", exact=True).click()
    limits = ui.page.locator("dl.summary")
    expect(limits).to_contain_text(f"Token in use{token_line(issued)}")
    expect(ui.page.locator("#quota-text")).to_contain_text("exact-time jobs")
    expect(ui.page.locator("#tokens")).to_be_hidden()  # listing the tokens needs admin: not even asked
    assert [u for u in ui.watch.requests if u.endswith("/v1/tokens")] == []
    ui.assert_clean()


def test_a_read_token_is_offered_no_create_run_pause_or_cancel_and_a_forced_run_shows_the_403_message(
    ui: Console, api: Api
) -> None:
    ui.allowed_statuses = (403,)
    reader, issued = scoped(api, "read")
    spec = job_spec(ui.system, f"Read-only view {tag()}")
    spec["target"]["url"] += "?sleep=20"
    job = api.ok("POST", "/v1/jobs", spec)
    run = api.ok("POST", f"/v1/jobs/{job['id']}/trigger")
    try:
        open_as(ui, reader.token)
        expect(ui.page.locator("#token-in-use")).to_have_text(token_line(issued))
        expect(ui.page.get_by_role("link", name=job["name"])).to_be_visible()
        create = ui.page.locator("a[href='#/new']")
        expect(create).to_have_count(2)
        for i in range(2):
            expect(create.nth(i)).to_be_hidden()

        ui.page.get_by_role("link", name=job["name"]).click()
        expect(ui.page.get_by_role("heading", level=1)).to_have_text(job["name"])
        row = ui.page.locator(f"#runs-table tbody tr[data-run-id='{run['run_id']}']")
        cancel = row.locator("button[data-action=cancel]")
        expect(cancel).to_have_count(1)  # the run is under way: an operate token would be offered Cancel
        expect(cancel).to_be_hidden()
        for control in ("#run-now", "#pause-resume"):
            expect(ui.page.locator(control)).to_have_count(1)
            expect(ui.page.locator(control)).to_be_hidden()
        expect(ui.page.get_by_role("button", name="Refresh")).to_be_visible()  # reading is allowed
        expect(ui.page.locator(".needs-note")).to_be_visible()
        expect(ui.page.locator(".needs-note")).to_contain_text("scope read")

        # Forced: the controls shown anyway and Run now clicked; the API refuses and the page says its words.
        runs = len(api.ok("GET", f"/v1/jobs/{job['id']}/runs")["runs"])
        ui.page.evaluate("document.body.removeAttribute('data-scope')")
        ui.page.locator("#run-now").click()
        status = ui.page.locator("#status")
        expect(status).to_contain_text(
            f"the token {issued['token_id']} ('{issued['name']}') has scope read; "
            f"POST /v1/jobs/{job['id']}/trigger needs operate"
        )
        expect(status).to_have_class(re.compile(r"\bstatus-error\b"))
        assert len(api.ok("GET", f"/v1/jobs/{job['id']}/runs")["runs"]) == runs  # nothing was started
        assert [u for u in ui.watch.requests if u.endswith("/v1/tokens")] == []
        ui.assert_clean()
    finally:
        api.call("POST", f"/v1/runs/{run['run_id']}/cancel")


def test_an_admin_issues_a_token_in_the_tokens_panel_sees_it_once_and_revokes_it(
    ui: Console, other_team: tuple[str, Api]
) -> None:
    ui.allowed_statuses = (409,)
    _, theirs = other_team  # a team of its own: its only admin token is the one signed in
    admin = theirs.ok("GET", "/v1/token")
    open_as(ui, theirs.token, "#/team")
    panel = ui.page.locator("#tokens")
    expect(panel.get_by_role("heading", name="Tokens")).to_be_visible()
    mine = panel.locator(f"tr[data-token-id='{admin['token_id']}']")
    expect(mine).to_contain_text("in use")
    expect(mine).to_have_attribute("data-in-use", "true")

    name = f"ci-{tag()}"
    panel.get_by_label("Token name").fill(name)
    panel.get_by_label("Scope").select_option("read")
    panel.get_by_role("button", name="Issue token").click()
    issued = ui.page.locator("#issued-token")
    expect(issued).to_be_visible()
    expect(issued).to_contain_text("Copy the token now: it is shown this once")
    token = ui.page.locator("#issued-token-value").input_value()
    new = Api(theirs.url, token).ok("GET", "/v1/token")  # the token shown is the one issued
    assert (new["name"], new["scope"]) == (name, "read")
    expect(issued).to_contain_text(token_line(new))
    row = panel.locator(f"tr[data-token-id='{new['token_id']}']")
    expect(row).to_contain_text(name)
    expect(row.locator(".badge.scope-read")).to_have_text("read")
    expect(row).to_have_attribute("data-in-use", "false")

    ui.page.get_by_role("link", name="Jobs", exact=True).click()
    ui.page.get_by_role("link", name="Team", exact=True).click()
    expect(row).to_be_visible()
    expect(ui.page.locator("#issued-token")).to_be_hidden()  # shown once: gone with the page
    assert ui.page.locator("#issued-token-value").count() == 0 and token not in ui.page.content()

    # Revoke asks first: Keep it (or Escape) keeps the token.
    row.get_by_role("button", name=f"Revoke the token {name}").click()
    dialog = ui.page.get_by_role("dialog", name=f"Revoke the token {name}?")
    expect(dialog).to_contain_text(new["token_id"])
    dialog.get_by_role("button", name="Keep it").click()
    expect(dialog).to_have_count(0)
    assert Api(theirs.url, token).call("GET", "/v1/token")[0] == 200
    row.get_by_role("button", name=f"Revoke the token {name}").click()
    dialog.get_by_role("button", name="Revoke", exact=True).click()
    expect(ui.page.locator("#status")).to_have_text(f"The token {name} ({new['token_id']}) is revoked.")
    expect(row).to_have_count(0)
    assert Api(theirs.url, token).call("GET", "/v1/token")[0] == 401  # refused from the next request on

    # The team's last admin token: the API's 409 is shown and the token stays.
    mine.get_by_role("button", name=f"Revoke the token {admin['name']}").click()
    dialog = ui.page.get_by_role("dialog", name=f"Revoke the token {admin['name']}?")
    expect(dialog).to_contain_text("the console signs out")
    dialog.get_by_role("button", name="Revoke", exact=True).click()
    status = ui.page.locator("#status")
    expect(status).to_contain_text("The token was not revoked: ")
    expect(status).to_contain_text("last admin token")
    expect(mine).to_be_visible()
    assert theirs.call("GET", "/v1/token")[0] == 200
    ui.assert_clean()


# WCAG 2.x contrast of every visible text node against the first opaque background behind it: 4.5:1, or 3:1
# for large text (24 px, or 18.66 px bold). SVG text (the chart's, drawn with fill) is left out; the chart's
# words are in its summary and table, which are checked.
LOW_CONTRAST_TEXT = """() => {
  const parse = (c) => { const m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return null;
    const p = m[1].split(',').map(parseFloat);
    return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1}; };
  const channel = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
  const lum = (c) => 0.2126 * channel(c.r) + 0.7152 * channel(c.g) + 0.0722 * channel(c.b);
  const behind = (el) => { for (let e = el; e; e = e.parentElement) {
    const c = parse(getComputedStyle(e).backgroundColor); if (c && c.a > 0.5) return c; }
    return {r: 255, g: 255, b: 255, a: 1}; };
  const low = []; let checked = 0;
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode; const el = node.parentElement;
    if (!node.textContent.trim() || !el || el.closest('svg')) continue;
    const style = getComputedStyle(el); const box = el.getBoundingClientRect();
    if (style.visibility === 'hidden' || box.width <= 1 || box.height <= 1) continue;
    const fg = parse(style.color); const bg = behind(el);
    const [hi, lo] = [lum(fg), lum(bg)].sort((x, y) => y - x);
    const ratio = (hi + 0.05) / (lo + 0.05); const size = parseFloat(style.fontSize);
    const large = size >= 24 || (parseInt(style.fontWeight, 10) >= 700 && size >= 18.66);
    checked += 1;
    if (ratio < (large ? 3 : 4.5)) low.push([node.textContent.trim().slice(0, 40), ratio.toFixed(2)]);
  }
  return {checked, low};
}"""


def test_every_text_on_the_main_pages_meets_wcag_aa_contrast(ui: Console, api: Api) -> None:
    job = api.ok("POST", "/v1/jobs", job_spec(ui.system, f"Contrast {tag()}", labels={"env": "prod"}))
    api.ok("POST", f"/v1/jobs/{job['id']}/pause")
    api.ok("POST", f"/v1/jobs/{job['id']}/resume")
    ui.open()
    expect(ui.page.get_by_role("link", name=job["name"])).to_be_visible()
    pages = {"jobs": ("#/jobs", "table.jobs-table"), "job": (f"#/jobs/{job['id']}", "#view h1")}
    pages |= {"new": ("#/new", "#view h1"), "team": ("#/team", "#load-summary")}
    for name, (route, ready) in pages.items():
        ui.page.goto(ui.url + route)
        ui.page.wait_for_selector(ready)
        ui.page.wait_for_load_state("networkidle")
        found = ui.page.evaluate(LOW_CONTRAST_TEXT)
        assert found["checked"] > 5 and found["low"] == [], (name, found)
    ui.assert_clean()


def test_at_phone_width_no_page_scrolls_sideways(browser: Browser, system: LocalSystem, api: Api) -> None:
    job = api.ok(
        "POST",
        "/v1/jobs",
        job_spec(
            system,
            f"A job with a long name that has to wrap on a phone {tag()}",
            labels={"a-rather-long-label-key": "and-an-even-longer-label-value-to-wrap"},
        ),
    )
    api.ok("POST", f"/v1/jobs/{job['id']}/trigger")
    phone = new_console(browser, system, PHONE)
    try:
        for route in ("#/jobs", f"#/jobs/{job['id']}", "#/new", "#/team"):
            phone.open(route)
            phone.page.wait_for_selector("#view h1")
            phone.page.wait_for_load_state("networkidle")
            width, inner = phone.page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            assert width <= inner, (route, width, inner)
        phone.assert_clean()
    finally:
        ALL_REQUESTS.extend(phone.watch.requests)
        phone.context.close()


def test_last_the_token_was_in_no_request_url_and_in_no_line_after_the_ready_line(
    system: LocalSystem,
) -> None:
    assert len(ALL_REQUESTS) > 20  # the tests above ran and their pages were watched
    assert [u for u in ALL_REQUESTS if system.token in u] == []
    ready = next(i for i, line in enumerate(system.output) if line.startswith("duetime local ready:"))
    assert [line for line in system.output[ready + 1 :] if system.token in line] == []
