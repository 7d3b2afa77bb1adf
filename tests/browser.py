"""A real browser for the pages' tests: Debian's ``chromium`` driven headless by
Playwright (its Python package, with ``executable_path`` at the system's browser,
so nothing is downloaded). Playwright's locators wait for what a test expects, as
a person watching the page would, instead of a test sleeping and polling."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager

from playwright.sync_api import Browser, sync_playwright


@contextmanager
def chromium() -> Iterator[Browser]:
    found = shutil.which("chromium")
    assert found, "the pages' tests need Debian's chromium: apt-get install chromium (.ci/run does)"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=found, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()
