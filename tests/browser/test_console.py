"""The web console in Chromium against ``duetime local``: what a team sees and can do, and that the token
stays where it belongs (sessionStorage, the Authorization header) and nowhere else."""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Browser, expect

from ..integration.local_system import LocalSystem
from .conftest import ALL_REQUESTS, TIME_ZONE, Console, new_console
from .support import PHONE, Api

pytestmark = pytest.mark.integration

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


def test_a_token_fragment_signs_in_and_leaves_the_address_bar_at_once(ui: Console) -> None:
    ui.page.goto(f"{ui.url}#token={ui.system.token}")
    expect(ui.page.get_by_role("heading", name="Jobs", exact=True)).to_be_visible()
    assert ui.page.url == f"{ui.url}#/jobs"
    assert ui.system.token not in ui.page.evaluate("location.href + history.state")
    ui.page.reload()  # the tab keeps the session
    expect(ui.page.get_by_role("heading", name="Jobs", exact=True)).to_be_visible()
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


def test_a_refused_token_drops_the_session_and_shows_the_sign_in_form_with_a_message(ui: Console) -> None:
    ui.allowed_statuses = (401,)
    ui.page.goto(f"{ui.url}#token=dt_not-a-real-token")
    expect(ui.page.locator("#sign-in-message")).to_contain_text("refused")
    expect(ui.page.get_by_label("Team API token")).to_be_visible()
    assert ui.page.evaluate("sessionStorage.getItem('duetime.token')") is None
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
