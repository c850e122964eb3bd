"""The browser MCP client's record (labs/scenario/mcp_browser.py) and mcp-cors-expose's checks in
both directions on hand-made runs: a symptom check rejects a cured run, a cure check a broken one,
and no check passes on a run that lacks its precondition (same origin, no preflight, no session
issued). The real thing, Chromium and the SDK's bundle, runs in the guards
(tests/test_mcp_scenarios.py -k mcp-cors-expose)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from labs import catalogue
from labs.scenario.mcp_browser import BrowserMcpResult, from_page
from labs.scenario.mcp_model import McpRun, McpScenario

SCENARIO = catalogue.find("mcp-cors-expose")
assert isinstance(SCENARIO, McpScenario)
ROUTE = "http://127.0.0.1:8080/mcp"
PAGE = "http://127.0.0.1:9090"
MISSING = ('Streamable HTTP error: Error POSTing to endpoint: {"jsonrpc":"2.0","id":null,"error":'
           '{"code":-32600,"message":"Bad Request: Missing session ID"}}')


def _page_record(session: str | None, cured: bool) -> dict[str, Any]:
    """What mcp-browser/index.js returns, as measured: initialize, then initialized (400 without the id)."""
    requests = [{"method": "POST", "rpc": "initialize", "sentSession": None, "status": 200, "readableSession": session},
                {"method": "POST", "rpc": "notifications/initialized", "sentSession": session,
                 "status": 202 if cured else 400, "readableSession": session}]
    calls = [{"sent_at_s": 0.07, "progress_at_s": [0.012, 0.06], "result": "done", "error": None,
              "elapsed_s": 0.52}] if cured else []
    return {"url": ROUTE, "pageOrigin": PAGE, "sessionId": session, "opened": cured, "requests": requests,
            "calls": calls, "error": None if cured else MISSING, "elapsed_s": 0.6}


def _replica(method: str | None, session: str | None, status: int, http_method: str = "POST") -> dict[str, Any]:
    return {"replica": 0, "at": 0.0, "http_method": http_method, "method": method, "tool": None,
            "session": session, "status": status}


def broken_run() -> McpRun:
    session = from_page(_page_record(None, cured=False), preflights=[204])
    # The origin issued "s1"; the request that came without it was refused (the SDK's 2.3 server
    # names a fresh id on that 400, as measured).
    return McpRun("nginx", "broken", [session], [_replica("initialize", "s1", 200),
                                                 _replica("notifications/initialized", "s2", 400)], 1)


def cured_run() -> McpRun:
    session = from_page(_page_record("s1", cured=True), preflights=[204])
    return McpRun("nginx", "expose-session-id", [session], [
        _replica("initialize", "s1", 200), _replica("notifications/initialized", "s1", 202),
        _replica(None, "s1", 200, "GET"), _replica("tools/call", "s1", 200)], 1)


def _verdicts(run: McpRun, variant: str) -> list[bool]:
    return [check(run).passed for check in SCENARIO.checks(variant)]


def test_the_page_record_becomes_the_lab_s_session_record() -> None:
    session = from_page(_page_record(None, cured=False), preflights=[204])
    assert isinstance(session, BrowserMcpResult)
    assert session.responses == [("POST", 200, None), ("POST", 400, None)]
    assert session.readable_session is None and session.page_origin == PAGE and not session.completed
    refused = from_page({**_page_record("s1", cured=False), "requests": [
        {"method": "POST", "rpc": "notifications/initialized", "sentSession": "s1", "status": None,
         "error": "Failed to fetch"}]}, preflights=[400])
    assert refused.refused == ["POST notifications/initialized: Failed to fetch"] and refused.responses == []


def test_the_symptom_checks_pass_on_the_broken_run_and_fail_on_the_cured_one() -> None:
    assert all(_verdicts(broken_run(), "broken"))
    assert not all(_verdicts(cured_run(), "broken"))


def test_the_cure_checks_pass_on_the_cured_run_and_fail_on_the_broken_one() -> None:
    assert all(_verdicts(cured_run(), "expose-session-id"))
    assert not all(_verdicts(broken_run(), "expose-session-id"))


@pytest.mark.parametrize("lacking", ["same origin", "no preflight", "no session issued"])
def test_no_side_passes_without_its_precondition(lacking: str) -> None:
    for run, variant in ((broken_run(), "broken"), (cured_run(), "expose-session-id")):
        session = run.sessions[0]
        assert isinstance(session, BrowserMcpResult)
        if lacking == "same origin":
            session.page_origin = "http://127.0.0.1:8080"
        elif lacking == "no preflight":
            session.preflights = []
        else:
            run.requests = [{**r, "session": None} for r in run.requests]
        assert not all(_verdicts(run, variant)), f"{variant} passed with {lacking}"


def test_labs_run_names_a_missing_bundle_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from labs.scenario import mcp_browser, play
    lab = SimpleNamespace(runtime=SimpleNamespace(name="local"))
    monkeypatch.setattr(mcp_browser, "BUNDLE", tmp_path / "mcp-client.js")
    reason = play.cannot_run(SCENARIO, lab)  # type: ignore[arg-type]
    assert reason and "python -m proxies.apps.install mcp-browser" in reason and "\n" not in reason
    assert play.cannot_run(catalogue.find("mcp-idle-stream"), lab) is None  # type: ignore[arg-type]


def test_setup_installs_the_bundle_and_chromium_only_for_the_browser_scenario() -> None:
    from labs.needs import needs_of
    assert {"mcp-browser-bundle", "chromium"} <= set(needs_of("mcp-cors-expose"))
    assert not {"mcp-browser-bundle", "chromium"} & set(needs_of("mcp-idle-stream"))
