"""The browser view in headless Chromium: pages load, a scenario runs to done, the browser's own
TTFT shows the symptom in the broken panel and not in the fixed one, texts match the script, the
lab client's report of the same path follows, past reports are browsable, no console errors.

Bounds come from the scenario's own pacing (labs/scenario/checks/base.py), like the guards'.
"""
from __future__ import annotations

from typing import Any

import pytest

from labs import catalogue
from labs.view.pages import layers
from labs.scenario.checks.base import STREAM_SLACK_INTERVALS, STREAMED_READ_SHARE
from server.apis.table import APIS
from tests.view.conftest import SCREENSHOTS, Page, View

RUN_TIMEOUT_MS = 120_000
BUFFERING = catalogue.get("nginx-buffering")


def numbers(tab: Any, variant: str) -> dict[str, Any]:
    section = tab.locator(f"section[data-variant={variant}]")
    data = {name: section.get_attribute(f"data-{name}")
            for name in ("ttft-ms", "e2e-ms", "events", "reads", "outcome")}
    return {"ttft": float(data["ttft-ms"]), "e2e": float(data["e2e-ms"]),
            "events": int(data["events"]), "reads": int(data["reads"]),
            "outcome": data["outcome"], "text": section.locator(".text").inner_text()}


def run(tab: Any, view: View, name: str, api: str | None = None, **controls: str) -> None:
    tab.goto(f"{view.url}/scenario/{name}")
    for field, value in controls.items():
        tab.fill(f"#{field}", value)
    if api is not None:
        tab.select_option("#api", api)
    tab.click("button#run")
    tab.wait_for_selector("body[data-state=running]")
    tab.wait_for_selector("body[data-state=done], body[data-state=error]", timeout=RUN_TIMEOUT_MS)
    assert tab.get_attribute("body", "data-state") == "done", tab.inner_text("#status")


def assert_buffered_beside_streamed(tab: Any) -> None:
    """nginx-buffering's panels as the browser measured them, bounds from the workload's pacing."""
    workload = BUFFERING.workload
    due_ms, interval_ms = workload.first_due_s() * 1000, workload.interval_s * 1000
    broken, fixed = numbers(tab, "broken"), numbers(tab, "fixed")
    # The symptom: the first token far past its due time, in lumps.
    assert broken["ttft"] >= due_ms + 5 * interval_ms, broken
    assert broken["reads"] * 4 <= broken["events"], broken
    # The cure: the first token on time, (nearly) one read per event.
    assert fixed["ttft"] <= due_ms + STREAM_SLACK_INTERVALS * interval_ms, fixed
    assert fixed["reads"] >= STREAMED_READ_SHARE * fixed["events"], fixed
    # Both finished (on the protocol's terminal event), with the same events; the text is the script.
    for measured in (broken, fixed):
        assert measured["outcome"] == "complete" and measured["text"] == workload.script
        assert measured["e2e"] >= measured["ttft"]
    assert broken["events"] == fixed["events"] > 1


def test_the_index_lists_every_scenario(view: View, page: Page) -> None:
    tab = page.page
    tab.goto(view.url + "/")
    listed = tab.eval_on_selector_all("a[data-scenario]", "links => links.map(a => a.dataset.scenario)")
    # Every scenario once, grouped by layer in the catalogue's order (labs/view/pages.py).
    assert sorted(listed) == sorted(s.name for s in catalogue.SCENARIOS)
    assert listed == [s.name for group in layers() for s in group["scenarios"]]
    tab.click("a[data-scenario=nginx-buffering]")
    tab.wait_for_selector("button#run")
    assert tab.locator("section[data-variant=broken]").count() == 1
    assert tab.locator("section[data-variant=fixed]").count() == 1
    assert page.errors == []


def test_nginx_buffering_blank_then_all_at_once_beside_a_flowing_stream(view: View, page: Page) -> None:
    tab = page.page
    run(tab, view, "nginx-buffering")
    assert_buffered_beside_streamed(tab)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(SCREENSHOTS / "nginx-buffering-panels.png"))
    # Then the lab client's run of the same path, side by side with the browser's numbers.
    tab.wait_for_selector("body[data-report=ready]", timeout=RUN_TIMEOUT_MS)
    rows = tab.locator("table.comparison tr[data-variant]")
    assert rows.count() == 2
    verdicts = tab.inner_text("table.rows tr.verdict")
    assert "symptom reproduced" in verdicts and "cured" in verdicts
    assert tab.locator("section#report img.picture").count() == 1
    tab.screenshot(path=str(SCREENSHOTS / "nginx-buffering.png"), full_page=True)
    assert (view.reports / "nginx-buffering" / "browser.json").is_file()
    assert page.errors == []


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_nginx_buffering_on_another_api_plays_as_a_chat_stream_does(view: View, page: Page, api: str) -> None:
    tab = page.page
    # The page offers the server's protocols, the scenario's own selected.
    assert tab.goto(f"{view.url}/scenario/nginx-buffering") is not None
    assert tab.eval_on_selector_all("#api option", "options => options.map(o => o.value)") == list(APIS)
    assert tab.input_value("#api") == BUFFERING.workload.api == "chat"
    # Messages: the page's request carries anthropic-version and x-api-key, which the server's
    # CORS answer must allow (the preflight refused every Messages run before).
    run(tab, view, "nginx-buffering", api=api)
    assert tab.get_attribute("body", "data-api") == api
    assert APIS[api].path not in tab.inner_text("section[data-variant=broken] .entry")
    assert f"({api})" in tab.inner_text("section[data-variant=broken] .entry")
    # TTFT is the first text delta: the lifecycle events the server sends before it
    # (response.created ...) do not move it; complete is response.completed (no [DONE] here).
    assert_buffered_beside_streamed(tab)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(SCREENSHOTS / f"nginx-buffering-{api}-panels.png"))
    # The lab client ran the same protocol through the same path, and judged it alike.
    tab.wait_for_selector("body[data-report=ready]", timeout=RUN_TIMEOUT_MS)
    verdicts = tab.inner_text("table.rows tr.verdict")
    assert "symptom reproduced" in verdicts and "cured" in verdicts
    assert page.errors == []


def test_close_the_tab_after_three_tokens(view: View, page: Page) -> None:
    tab = page.page
    run(tab, view, "nginx-buffering", abort="3")
    for variant in ("broken", "fixed"):
        measured = numbers(tab, variant)
        assert measured["outcome"] == "disconnected", measured
        assert measured["events"] == 3
    tab.wait_for_selector("body[data-report=ready], body[data-report=error]", timeout=RUN_TIMEOUT_MS)
    assert page.errors == []


def test_past_reports_are_browsable(view: View, page: Page) -> None:
    # Its own past report when no earlier test of this module left one (it runs alone too).
    if not (view.reports / "nginx-buffering" / "report.md").is_file():
        from labs.scenario.report import write_report
        from tests.labs.test_report import outcome

        write_report(outcome(), view.reports / "nginx-buffering")
    tab = page.page
    tab.goto(view.url + "/reports")
    tab.click("a[data-report=nginx-buffering]")
    image = tab.locator("img.picture").first
    image.wait_for()
    # Polled: the element is in the page before its picture has loaded; a broken one never does.
    tab.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=image.element_handle(),
                          timeout=10_000)
    assert "nginx-buffering" in tab.inner_text("pre.markdown")
    assert page.errors == []


def test_bad_input_is_shown_and_loses_nothing(view: View, page: Page) -> None:
    tab = page.page
    tab.goto(f"{view.url}/scenario/nginx-buffering")
    tab.fill("#streams", "0")
    tab.click("button#run")
    tab.wait_for_selector("body[data-state=error]")
    assert "outside" in tab.inner_text("#status")
    assert tab.is_enabled("button#run")
    missing = tab.goto(f"{view.url}/scenario/no-such-scenario")
    assert missing is not None and missing.status == 404
    assert "no scenario named" in tab.inner_text("main")
