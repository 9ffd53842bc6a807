"""Headless Chromium for the tests that open the session viewer in a real browser.

Playwright drives the system's Chromium (Debian's `chromium` package): Playwright's own
browser downloads are never used, so nothing is fetched from the network. As root Chromium
needs `--no-sandbox`; the other switches keep it from reaching for the network (this machine
has none) or doing work a test never looks at. Without Chromium or Playwright the tests are
skipped, saying why, and fail in CI (`tests/unavailable.py`).

Screenshots go to `ACP_TEST_ARTIFACTS` when it is set (a directory kept after the run), else
to the test's own temporary directory; each is named after its test.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from unavailable import unavailable

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

ARTIFACTS_ENV = "ACP_TEST_ARTIFACTS"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
]
TIMEOUT_MS = 20_000
"""How long Playwright waits for what a test expects to appear (it polls, it never sleeps)."""


def chromium_path() -> str | None:
    """The system's Chromium, if installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


@contextmanager
def launched_browser() -> Iterator[Browser]:
    """A headless Chromium, closed on exit; skips the test (fails it in CI) without one."""
    executable = chromium_path()
    if executable is None:
        unavailable("no Chromium: install Debian's chromium package")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("Playwright is not installed (pip install -e '.[test]')")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def fresh_page(browser: Browser, width: int = 1100, height: int = 700) -> Iterator[Page]:
    """A page in a context of its own (its own sessionStorage), closed on exit."""
    context = browser.new_context(viewport={"width": width, "height": height})
    context.set_default_timeout(TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


def artifacts_dir(tmp_path: Path) -> Path:
    """Where a test's screenshots go: `ACP_TEST_ARTIFACTS`, else its temporary directory."""
    given = os.environ.get(ARTIFACTS_ENV)
    directory = Path(given) if given else tmp_path
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def save_screenshot(page: Page, directory: Path, test_name: str) -> Path:
    """The whole page as `<test name>.png` in `directory`; the file's path."""
    path = directory / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', test_name)}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def status(page: Page, key: str) -> Any:
    """One key of the viewer's read-only state, `window.acpViewer`."""
    return page.evaluate(f"window.acpViewer.{key}")


def wait_for_state(page: Page, state: str) -> None:
    """Until the viewer is in `state` (failing at once if it reached "error" instead)."""
    page.wait_for_function("state => ['error', state].includes(window.acpViewer?.state)", arg=state)
    assert status(page, "error") is None
    assert status(page, "state") == state
