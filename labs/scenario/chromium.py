"""Chromium under Playwright, for the browser-layer scenarios' guards and the view's own tests.

Playwright drives the system's Chromium (Debian's `chromium` package; `make setup` installs it
as root): its own browser download needs the internet. The page a guard runs in is served by
Playwright itself at the entry's origin (`page.route`), so the stream is a same-origin request
with no hop of ours in between and no CORS to configure on the lab's shared servers.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlsplit

from labs.client.results import StreamResult
from labs.scenario.model import Driver, Workload
from labs.scenario.browser_spec import browser_spec, from_browser

STATIC = Path(__file__).resolve().parents[1] / "view" / "static"
CLIENT_JS = STATIC / "client.js"
# What a page loads before running client.js: the wire protocols' classifiers it reads events with.
CLIENT_SCRIPTS = (STATIC / "apis.js", CLIENT_JS)
LAUNCH_ARGS = ("--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run")
PAGE_PATH = "/__streamlab/browser-client"
PAGE_HTML = "<!doctype html><meta charset=utf-8><title>streamlab browser client</title>"
CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
# What a workload this module drives needs installed (labs.needs reads it off the driver).
NEEDS = ("chromium", "python-browser")


class ChromiumMissing(RuntimeError):
    """No Chromium to drive; the message says how to install one."""


def chromium_path() -> str:
    """$STREAMLAB_CHROMIUM, else the first Chromium on PATH."""
    configured = os.environ.get("STREAMLAB_CHROMIUM")
    if configured:
        if not os.access(configured, os.X_OK):
            raise ChromiumMissing(f"STREAMLAB_CHROMIUM={configured} is not an executable")
        return configured
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    raise ChromiumMissing("no Chromium found: `make setup` installs Debian's `chromium` as root "
                          "(apt-get install -y --no-install-recommends chromium), or point "
                          "STREAMLAB_CHROMIUM at a Chromium or Chrome binary")


def launch_options() -> dict[str, Any]:
    return {"executable_path": chromium_path(), "args": list(LAUNCH_ARGS)}


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


async def run_streams(url: str, spec: Mapping[str, Any], streams: int = 1,
                      concurrency: int = 1) -> list[dict[str, Any]]:
    """client.js's results for `streams` requests (`concurrency` at once) from a page at the
    origin of `url`. A console error or an exception on the page fails the run."""
    from playwright.async_api import async_playwright

    problems: list[str] = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(**launch_options())
        try:
            # The HTTP/2 variant's certificate is made at run time and signed by nobody.
            context = await browser.new_context(ignore_https_errors=True)
            page = await context.new_page()
            page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
            page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
            page_url = origin_of(url) + PAGE_PATH
            await page.route(page_url, lambda route: route.fulfill(
                status=200, content_type="text/html; charset=utf-8", body=PAGE_HTML))
            await page.goto(page_url)
            for script in CLIENT_SCRIPTS:
                await page.add_script_tag(content=script.read_text(encoding="utf-8"))
            results = await page.evaluate(
                "([spec, n, c]) => StreamlabClient.runMany(spec, n, c)",
                [dict(spec), streams, concurrency])
        finally:
            await browser.close()
    # A dropped stream logs a network error on the console; that is the scenario, not a fault.
    unexpected = [p for p in problems if "net::ERR_" not in p and "Failed to load resource" not in p]
    if unexpected:
        raise RuntimeError("the browser page reported: " + "; ".join(unexpected))
    return results


def chromium_driver() -> Driver:
    """A Workload.driver: the workload's streams, run by Chromium through the variant's entry."""
    async def driver(url: str, body: dict[str, Any], workload: Workload,
                     options: Mapping[str, Any]) -> list[StreamResult]:
        spec = browser_spec(url, body, workload, options)
        raw = await run_streams(url, spec, workload.streams, workload.concurrency)
        return [from_browser(r) for r in raw]
    driver.needs = NEEDS  # type: ignore[attr-defined]
    return driver
