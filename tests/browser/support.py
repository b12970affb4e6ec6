"""Helpers for driving the console in Debian's Chromium with Playwright (sync API), shared by the browser
tests and ``scripts/console_screenshots.py``. Playwright's own browser downloads are never used: the
browser is the system's ``/usr/bin/chromium`` (``scripts/browser_deps.sh`` installs it)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import urllib3
from playwright.sync_api import Browser, ConsoleMessage, Page, Playwright, Request, Response

CHROMIUM = os.environ.get("DUETIME_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
HTTP = urllib3.PoolManager()
T = TypeVar("T")


def launch(playwright: Playwright) -> Browser:
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


@dataclass
class Api:
    """The public API with the team's token, as a script or test calls it (never through the page)."""

    url: str
    token: str

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        response = HTTP.request(
            method,
            self.url + path,
            body=json.dumps(body) if body is not None else None,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        return response.status, (json.loads(response.data) if response.data else None)

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, data = self.call(method, path, body)
        assert 200 <= status < 300, f"{method} {path}: {status} {data}"
        return data


def wait_for(predicate: Callable[[], T | None], timeout: float = 60.0, every: float = 0.25) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(every)


def utc_in(seconds: float) -> str:
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=seconds)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Watch:
    """What a page did: its requests, the answers that were errors, console messages and uncaught errors."""

    requests: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    console: list[ConsoleMessage] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def attach(self, page: Page) -> Watch:
        page.on("request", self._request)
        page.on("response", self._response)
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        return self

    def _console(self, message: ConsoleMessage) -> None:
        self.console.append(message)

    def _request(self, request: Request) -> None:
        self.requests.append(request.url)

    def _response(self, response: Response) -> None:
        if response.status >= 400:
            answer = response.text()
            self.failed.append(f"{response.status} {response.request.method} {response.url}: {answer}")

    def problems(self, allowed_statuses: tuple[int, ...] = ()) -> list[str]:
        """Uncaught errors, CSP violations and console errors or warnings; a failed API request logged by
        the browser ("the server responded with a status of N") is allowed when N is in allowed_statuses."""
        found = list(self.errors)
        if any(m.type == "error" and "status of" in m.text for m in self.console):
            found += [f"answered {f}" for f in self.failed if int(f.split()[0]) not in allowed_statuses]
        for message in self.console:
            if message.type not in ("error", "warning"):
                continue
            text = message.text
            if any(f"status of {status}" in text for status in allowed_statuses):
                continue
            found.append(f"{message.type}: {text}")
        return found


def sign_in_by_link(page: Page, console_url: str, token: str) -> None:
    """Signed in by a ``#token=`` link: in a tab not signed in, the console asks first, naming the link's
    team, and Sign in is chosen (a tab signed in with ``token`` already asks nothing)."""
    page.goto(f"{console_url}#token={token}")
    page.locator("#sign-in-link, #nav:not([hidden])").first.wait_for()
    dialog = page.get_by_role("dialog", name="Sign in with this link?")
    if dialog.count():
        dialog.get_by_role("button", name="Sign in").click()
    page.wait_for_selector("#nav:not([hidden])")


def sign_in(page: Page, console_url: str, token: str) -> None:
    page.goto(console_url)
    page.get_by_label("Team API token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_selector("table.jobs-table tbody tr")


def seed_jobs(api: Api, url: str) -> list[dict[str, Any]]:
    """A realistic team: cron jobs in time zones, rates, a one-time job, labels; one paused."""
    target = f"{url}/demo/target"
    specs: list[dict[str, Any]] = [
        {
            "name": "Nightly invoice export",
            "schedule": {"cron": "0 2 * * *", "timezone": "Europe/Berlin"},
            "target": {"url": target, "method": "POST"},
            "labels": {"team": "billing", "env": "prod"},
            "exact": True,
        },
        {
            "name": "Hourly cache warm-up",
            "schedule": {"cron": "5 * * * *", "timezone": "UTC"},
            "target": {"url": target, "method": "POST"},
            "labels": {"team": "platform", "env": "prod"},
        },
        {
            "name": "Payment reconciliation",
            "schedule": {"cron": "*/15 8-18 * * 1-5", "timezone": "America/New_York"},
            "target": {"url": target},
            "labels": {"team": "billing", "env": "prod", "tier": "critical"},
            "exact": True,
        },
        {
            "name": "Report digest",
            "schedule": {"rate": "30 minutes"},
            "target": {"url": target},
            "labels": {"team": "growth", "env": "staging"},
        },
        {
            "name": "Flaky partner webhook",
            "schedule": {"rate": "6 hours"},
            "target": {"url": f"{target}?status=500"},
            "labels": {"team": "platform", "env": "staging"},
            "retry": {"max_attempts": 2, "backoff_seconds": [1]},
        },
        {
            "name": "Year-end archive",
            "schedule": {"at": utc_in(20 * 86400)},
            "target": {"url": target},
            "labels": {"team": "billing"},
        },
    ]
    return [api.ok("POST", "/v1/jobs", spec) for spec in specs]
