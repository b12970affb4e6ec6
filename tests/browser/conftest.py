"""Browser fixtures: one ``duetime local`` (as a user starts it) and one Chromium for the session; each test
gets a fresh browser context (its own sessionStorage) and a watch on what its page did."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import boto3
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright

from ..emulators import require_emulators
from ..integration.local_system import LocalSystem, isolated, start_local
from .support import CHROMIUM, DESKTOP, Api, Watch, launch, sign_in_by_link

TIME_ZONE = "Europe/Berlin"  # the browser's zone: the console shows local times, the API speaks UTC
ALL_REQUESTS: list[str] = []  # every URL any test's page requested, checked once more at the end


@pytest.fixture(scope="session")
def prefix() -> str:
    """The names of this session's ``duetime local`` tables and queue (``isolated(prefix)``)."""
    return f"ui{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def system(prefix: str) -> Iterator[LocalSystem]:
    require_emulators()
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"no browser at {CHROMIUM}: run `make browser-deps`", pytrace=False)
    system = start_local(isolated(prefix))
    yield system
    assert system.stop() == 0, "\n".join(system.output)
    dynamodb = boto3.session.Session().client("dynamodb")
    for table in ("jobs", "runs", "control"):
        with contextlib.suppress(Exception):
            dynamodb.delete_table(TableName=f"{prefix}-{table}")


@pytest.fixture(scope="session")
def api(system: LocalSystem) -> Api:
    return Api(system.url, system.token)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = launch(playwright)
        yield chromium
        chromium.close()


@dataclass
class Console:
    """A page of the console in a fresh browser context, and what it did."""

    system: LocalSystem
    context: BrowserContext
    page: Page
    watch: Watch
    allowed_statuses: tuple[int, ...] = field(default=())

    @property
    def url(self) -> str:
        return f"{self.system.url}/console/"

    def open(self, route: str = "#/jobs") -> None:
        """Signed in by a #token= link (Sign in chosen in the dialog it opens), then at ``route``."""
        sign_in_by_link(self.page, self.url, self.system.token)
        if route != "#/jobs":
            self.page.goto(self.url + route)

    def assert_clean(self) -> None:
        """No uncaught error, CSP violation or console error; the token in no request URL, cookie or DOM."""
        assert self.watch.problems(self.allowed_statuses) == []
        token = self.system.token
        assert [u for u in self.watch.requests if token in u] == []
        assert token not in self.page.evaluate("document.cookie")
        assert self.context.cookies() == []
        assert token not in self.page.content()


def new_console(browser: Browser, system: LocalSystem, viewport: dict[str, int]) -> Console:
    context = browser.new_context(viewport=viewport, timezone_id=TIME_ZONE, locale="en-US")  # type: ignore[arg-type]
    page = context.new_page()
    page.set_default_timeout(20_000)
    watch = Watch(requests=[]).attach(page)
    return Console(system, context, page, watch)


@pytest.fixture
def ui(browser: Browser, system: LocalSystem) -> Iterator[Console]:
    console = new_console(browser, system, DESKTOP)
    yield console
    ALL_REQUESTS.extend(console.watch.requests)
    console.context.close()
