"""Fixtures for the browser view's tests: the view itself (`python -m labs serve`) on a free port,
and Debian's Chromium under Playwright. Nothing here skips: without Chromium these tests fail
and say how to install it (`make setup` does, as root)."""
from __future__ import annotations

import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from labs.scenario.chromium import launch_options
from server.processes import STOP_GRACE_S, ManagedProcess, free_port, managed

REPO_ROOT = Path(__file__).resolve().parents[2]
# Screenshots of real runs, as docs/view.md describes them (reports/ is not committed).
SCREENSHOTS = REPO_ROOT / "reports" / "view"


@dataclass
class View:
    url: str
    reports: Path
    process: ManagedProcess


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture(scope="session")
def view(tmp_path_factory: pytest.TempPathFactory, model_dir: str) -> Iterator[View]:
    port = free_port()
    reports = tmp_path_factory.mktemp("view-reports")
    process = ManagedProcess(name=f"view:{port}", argv=[
        sys.executable, "-m", "labs", "serve", "--port", str(port), "--out", str(reports)],
        log_path=reports / "view.log", cwd=REPO_ROOT)
    url = f"http://127.0.0.1:{port}"
    # The view stops an open scenario's servers and proxies on SIGTERM, each given STOP_GRACE_S:
    # measured 2.6 s for nginx-buffering's four on an idle machine; under load it passed the
    # default grace and the SIGKILL left them running (found orphaned after a suite's run).
    with managed(process, lambda: _answers(url + "/"), timeout_s=60, grace_s=STOP_GRACE_S * 5):
        yield View(url, reports, process)


@pytest.fixture(scope="module")
def chromium() -> Iterator[object]:
    """Module-scoped: Playwright's sync API keeps an event loop running while it is open, and
    the guards of the browser-layer scenarios (asyncio.run) must not find one."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(**launch_options())
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Page:
    page: object
    errors: list[str]


@pytest.fixture()
def page(chromium: object) -> Iterator[Page]:
    """A fresh page that records every console error and uncaught exception."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    tab = context.new_page()
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield Page(tab, errors)
    finally:
        context.close()
