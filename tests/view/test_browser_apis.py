"""The browser's client reads every wire protocol as the lab's client does: static/apis.js against
labs/client/apis/ event by event, and client.js's fetch reader on whole canned streams (named
`event:` lines, pings, terminal events, failures), in Chromium. The streams are the canned ones
of tests/labs/api_streams.py (shapes the official SDKs parse); the page and the stream are served
by Playwright at one origin, so no server runs here (tests/view/test_view.py plays real ones)."""
from __future__ import annotations

import json
from typing import Any

import pytest

from labs.client.apis import CLIENT_APIS
from labs.scenario.chromium import CLIENT_SCRIPTS, PAGE_HTML
from server.apis.table import APIS
from tests.labs import api_streams
from tests.view.conftest import Page

ORIGIN = "http://127.0.0.1:9"
TEXTS = ["Once", " upon", " a", " time"]


def _every_stream(api: str) -> list[api_streams.Canned]:
    """The protocol's canned streams: whole, and each way it can end badly."""
    build = api_streams.CANNED[api]
    if api == "chat":
        return [build(TEXTS), build(TEXTS, end="none")]
    if api == "responses":
        return [build(TEXTS, end=end) for end in ("response.completed", "response.failed", "error", "none")]
    return [build(TEXTS, end=end) for end in ("message_stop", "error", "none")] + [build(TEXTS, named=False)]


def _events(canned: api_streams.Canned) -> list[tuple[str, str | None]]:
    """Each frame's data payload and `event:` name, as an SSE parser dispatches them."""
    out = []
    for raw in canned.before + canned.deltas + canned.after:
        lines = raw.decode().strip("\n").split("\n")
        name = next((line[len("event: "):] for line in lines if line.startswith("event: ")), None)
        data = "\n".join(line[len("data: "):] for line in lines if line.startswith("data: "))
        out.append((data, name))
    return out


def _client_page(page: Page, stream: bytes | None = None, path: str = "/stream") -> Any:
    """A page at ORIGIN with apis.js and client.js loaded; `stream` served at ORIGIN + path."""
    tab = page.page
    tab.route(ORIGIN + "/page", lambda route: route.fulfill(
        status=200, content_type="text/html; charset=utf-8", body=PAGE_HTML))
    if stream is not None:
        tab.route(ORIGIN + path, lambda route: route.fulfill(
            status=200, content_type="text/event-stream", body=stream))
    tab.goto(ORIGIN + "/page")
    for script in CLIENT_SCRIPTS:
        tab.add_script_tag(content=script.read_text(encoding="utf-8"))
    return tab


def test_the_browser_knows_the_protocols_of_the_servers_table_and_no_other(page: Page) -> None:
    tab = _client_page(page)
    assert tab.evaluate("StreamlabApis.names") == list(APIS)
    message = tab.evaluate("() => { try { StreamlabApis.classify('soap', '{}'); } catch (e) { return e.message; } }")
    assert message == "unknown api soap: choose one of chat, responses, messages"
    assert page.errors == []


@pytest.mark.parametrize("api", list(APIS))
def test_apis_js_classifies_every_event_as_the_lab_client_does(page: Page, api: str) -> None:
    tab = _client_page(page)
    spoken = CLIENT_APIS[api]
    events = [event for canned in _every_stream(api) for event in _events(canned)]
    browser = tab.evaluate(
        "([api, events]) => events.map(([data, name]) => [StreamlabApis.classify(api, data, name),"
        " StreamlabApis.isHeartbeat(api, name)])", [api, events])
    kinds = set()
    for (data, name), (js, heartbeat) in zip(events, browser):
        kind, text, *_ = spoken.classify(data, name)
        assert (js["kind"], heartbeat) == (kind, name in spoken.heartbeat_events), (data, name)
        if kind in ("content", "error"):
            assert js["text"] == text, (data, name)
        kinds.add(kind)
    # The precondition: these streams hold text deltas, a terminal event and errors to compare.
    assert {"content", "done"} <= kinds and ("error" in kinds) == (api != "chat")
    assert page.errors == []


def _run(tab: Any, api: str) -> dict[str, Any]:
    spec = {"url": ORIGIN + "/stream", "body": {"model": "tiny"}, "wireApi": api,
            "protocolHeaders": {k: v for k, v in CLIENT_APIS[api].headers().items()}}
    return tab.evaluate("spec => StreamlabClient.runStream(spec)", spec)


@pytest.mark.parametrize("api", list(APIS))
def test_a_whole_stream_is_complete_with_ttft_at_the_first_text_delta(page: Page, api: str) -> None:
    canned = api_streams.CANNED[api](TEXTS)
    tab = _client_page(page, b"".join(canned.before + canned.deltas + canned.after))
    result = _run(tab, api)
    assert result["outcome"] == "complete" and result["sawDone"] and result["text"] == "".join(TEXTS)
    kinds = [event["kind"] for event in result["events"]]
    first = kinds.index("content")
    assert first == len(canned.before)  # every lifecycle event came first, none counted
    assert result["ttftMs"] == result["events"][first]["t"]
    assert kinds.count("content") == len(TEXTS)
    # Messages' ping is a heartbeat, as an SSE comment is: never a token.
    assert kinds.count("comment") == (1 if api == "messages" else 0)
    assert page.errors == []


@pytest.mark.parametrize(("api", "end", "outcome"), [
    pytest.param("responses", "response.failed", "error-in-band", id="responses-failed"),
    pytest.param("responses", "none", "truncated", id="responses-no-completed"),
    pytest.param("messages", "error", "error-in-band", id="messages-overloaded"),
])
def test_a_stream_without_its_terminal_event_is_not_complete(page: Page, api: str, end: str, outcome: str) -> None:
    canned = api_streams.CANNED[api](TEXTS, end=end)
    tab = _client_page(page, b"".join(canned.before + canned.deltas + canned.after))
    result = _run(tab, api)
    assert result["outcome"] == outcome and not result["sawDone"], json.dumps(result)[:500]
    assert result["text"] == "".join(TEXTS)  # the deltas did arrive: only the end is wrong
    assert (result["error"] is not None) == (outcome == "error-in-band")


def test_a_messages_stream_without_event_lines_has_no_token_as_the_sdk_sees_it(page: Page) -> None:
    canned = api_streams.messages(TEXTS, named=False)
    tab = _client_page(page, b"".join(canned.before + canned.deltas + canned.after))
    result = _run(tab, "messages")
    assert result["status"] == 200 and result["ttftMs"] is None and result["text"] == ""
    assert result["outcome"] == "truncated" and len(result["events"]) == len(_events(canned))
    # The same bytes named: a whole answer (the precondition: only the names differ).
    named = api_streams.messages(TEXTS)
    assert [data for data, _ in _events(named)] == [data for data, _ in _events(canned)]
