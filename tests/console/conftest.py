"""Fixtures of the console tests: brokers with the HTTP port on (one with console writes on, one read-only as
by default), a JSON client for /api/, and Playwright driving Debian's headless Chromium (`.ci/run` installs the
`chromium` package; Playwright's own browser download is never used)."""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tidelog.testing import BrokerHandle, run_broker

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("TIDELOG_ARTIFACTS", ROOT / "tmp" / "artifacts")) / "console"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
T = TypeVar("T")


def wait_until(fn: Callable[[], T], timeout_s: float = 60.0, what: str = "condition") -> T:
    """fn()'s first truthy value, polled; fails with the last value seen when `timeout_s` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = fn()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} never held; last: {value!r}"
        time.sleep(0.1)


class Api:
    """/api/ over HTTP, as a script would call it: (status, decoded JSON)."""

    def __init__(self, broker: BrokerHandle) -> None:
        self.broker = broker
        self.base = f"http://127.0.0.1:{broker.state.metrics.wait_http_port()}"
        self._token: str | None = None

    @property
    def token(self) -> str:
        if self._token is None:
            self._token = self.get("/api/session")["csrf_token"]
        assert self._token
        return self._token

    def call(self, method: str, path: str, body: Any = None, token: str | None | bool = True,
             headers: dict[str, str] | None = None) -> tuple[int, Any]:
        sent = dict(headers or {})
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            sent.setdefault("Content-Type", "application/json")
        if token is True:
            sent["X-CSRF-Token"] = self.token
        elif isinstance(token, str):
            sent["X-CSRF-Token"] = token
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=sent)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def get(self, path: str) -> Any:
        status, body = self.call("GET", path, token=False)
        assert status == 200, (path, status, body)
        return body

    def text(self, path: str) -> str:
        with urllib.request.urlopen(self.base + path, timeout=60) as response:
            return str(response.read().decode())


@pytest.fixture(scope="package")
def writable_broker() -> Iterator[BrokerHandle]:
    with run_broker(overrides={"metrics.port": 0, "console.read.only": "false",
                               "log.cleaner.backoff.ms": 100}) as broker:
        yield broker


@pytest.fixture(scope="package")
def readonly_broker() -> Iterator[BrokerHandle]:
    with run_broker(overrides={"metrics.port": 0}, topics={"shown": 1}) as broker:  # console.read.only defaults on
        yield broker


@pytest.fixture(scope="package")
def api(writable_broker: BrokerHandle) -> Api:
    return Api(writable_broker)


@pytest.fixture(scope="package")
def readonly_api(readonly_broker: BrokerHandle) -> Api:
    return Api(readonly_broker)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Module-scoped: Playwright's sync API runs an event loop on this thread while it is open, and any later
    test calling asyncio.run() would find it running (RuntimeError), so it must close with the browser tests."""
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install chromium (as .ci/run does)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(30_000)
    page = context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())
    try:
        yield page
    finally:
        context.close()


def screenshot(page: Any, name: str) -> Path:
    """A full-page screenshot kept as a test artifact (tmp/artifacts/console, not committed)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 0
    return path
