"""The console's screenshots in docs/: a fresh ``duetime local`` (in the running emulators), a team with a few
realistic jobs (labels, runs that succeeded and one that died, a paused job, changes in the history), and
Chromium at desktop and phone sizes. ``make screenshots`` runs it (it starts the emulators if need be).

    docs/console-jobs.png   the jobs list (1280x800)
    docs/console-job.png    a job page: summary, next runs, runs, history (1280 wide, whole page)
    docs/console-team.png   the team page: quota and the next 24 hours (1280x800)
    docs/console-phone.png  the jobs list on a phone (390x844)
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "shared"))
# duetime local runs this checkout's code (and console files), whatever the venv has installed.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "shared"), os.environ.get("PYTHONPATH")]))

import boto3  # noqa: E402
from playwright.sync_api import Page, sync_playwright  # noqa: E402

from tests.browser.support import DESKTOP, PHONE, Api, launch, seed_jobs, sign_in_by_link, wait_for  # noqa: E402
from tests.integration.local_system import isolated, start_local  # noqa: E402

DOCS = ROOT / "docs"
TIME_ZONE = "Europe/Berlin"
FINISHED = {"succeeded", "failed", "dead", "cancelled", "skipped"}


def settle(api: Api, run_id: str, timeout: float = 90) -> None:
    wait_for(lambda: api.ok("GET", f"/v1/runs/{run_id}")["status"] in FINISHED, timeout=timeout)


def make_history(api: Api) -> dict[str, str]:
    """Jobs with runs and changes; returns the id of the job to show on its own page, by name."""
    jobs = {job["name"]: job["id"] for job in seed_jobs(api, api.url)}
    nightly, flaky = jobs["Nightly invoice export"], jobs["Flaky partner webhook"]
    runs = [api.ok("POST", f"/v1/jobs/{nightly}/trigger")["run_id"]]
    api.ok(
        "PATCH", f"/v1/jobs/{nightly}", {"labels": {"team": "billing", "env": "prod", "owner": "finance-ops"}}
    )
    runs.append(api.ok("POST", f"/v1/jobs/{nightly}/trigger")["run_id"])
    runs.append(api.ok("POST", f"/v1/jobs/{jobs['Hourly cache warm-up']}/trigger")["run_id"])
    runs.append(api.ok("POST", f"/v1/jobs/{flaky}/trigger")["run_id"])
    api.ok("POST", f"/v1/jobs/{jobs['Report digest']}/pause")
    api.ok("POST", f"/v1/jobs/{nightly}/pause")
    api.ok("POST", f"/v1/jobs/{nightly}/resume")
    for run_id in runs:
        settle(api, run_id)
    return jobs


def shoot(page: Page, path: Path, full_page: bool = False) -> None:
    page.wait_for_load_state("networkidle")
    page.evaluate("document.activeElement && document.activeElement.blur()")
    page.screenshot(path=str(path), full_page=full_page)
    print(f"wrote {path.relative_to(ROOT)}", flush=True)


def main() -> int:
    prefix = f"shots{uuid.uuid4().hex[:8]}"
    system = start_local(isolated(prefix))
    try:
        api = Api(system.url, system.token)
        jobs = make_history(api)
        console = f"{system.url}/console/"
        DOCS.mkdir(exist_ok=True)
        with sync_playwright() as playwright:
            browser = launch(playwright)
            for viewport in (DESKTOP, PHONE):
                context = browser.new_context(viewport=viewport, timezone_id=TIME_ZONE, locale="en-US")  # type: ignore[arg-type]
                page = context.new_page()
                sign_in_by_link(page, console, system.token)
                page.wait_for_selector("table.jobs-table tbody tr[data-job-id]")
                page.goto(f"{console}#/jobs")  # a page of its own: no "Signed in." message
                page.wait_for_selector("table.jobs-table tbody tr[data-job-id]")
                if viewport is PHONE:
                    shoot(page, DOCS / "console-phone.png")
                    context.close()
                    continue
                shoot(page, DOCS / "console-jobs.png")
                page.goto(f"{console}#/jobs/{jobs['Nightly invoice export']}")
                page.wait_for_selector("#runs-table tbody tr[data-run-id]")
                page.wait_for_selector("#history-table tbody tr[data-action]")
                time.sleep(0.5)
                shoot(page, DOCS / "console-job.png", full_page=True)
                page.goto(f"{console}#/team")
                page.wait_for_selector("svg.chart")
                shoot(page, DOCS / "console-team.png")
                context.close()
            browser.close()
    finally:
        system.stop()
        dynamodb = boto3.session.Session().client("dynamodb")
        for table in ("jobs", "runs", "control"):
            with contextlib.suppress(Exception):
                dynamodb.delete_table(TableName=f"{prefix}-{table}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
