"""The MCP origin (server/mcp/): its knobs as flags, its record of each request, and what a real
process does with its knobs, driven by the official SDK's client and by plain HTTP."""
from __future__ import annotations

import json
import time

import httpx
import pytest

from labs.client.mcp_get_stream import measure_get_stream
from labs.client.mcp_session import measure_session
from server.mcp.app import record
from server.mcp.knobs import OriginKnobs, from_args
from server.mcp.replicas import running_replicas
from server.signals import run_async

PACED = OriginKnobs(progress_interval_s=0.05, duration_s=0.3, first_progress_delay_s=0.4)


def test_knobs_round_trip_through_their_flags() -> None:
    knobs = OriginKnobs(sessions=False, json_response=True, progress_interval_s=0.2, duration_s=3.0,
                        first_progress_delay_s=1.5, keepalive_s=0.0, resumable=True, retry_ms=250,
                        notify_after_s=2.5, cors_origin="*", cors_expose_headers="Mcp-Session-Id",
                        cors_allow_headers="mcp-session-id,mcp-protocol-version", open_comment=True, replica=3)
    parsed, host, port = from_args([*knobs.argv(), "--port", "9"])
    assert (parsed, host, port) == (knobs, "127.0.0.1", 9)
    assert OriginKnobs().argv() == []  # the defaults need no flag


@pytest.mark.parametrize("flags", [["--progress-interval-s", "0"], ["--duration-s", "-1"], ["--replica", "-1"],
                                   ["--notify-after-s", "-1"]])
def test_a_knob_out_of_range_exits_2(flags: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        from_args(flags)
    assert exited.value.code == 2


def test_a_record_names_the_method_the_tool_and_the_session() -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "slow_task"}}).encode()
    assert record(1, "POST", body, b"abc", 404) | {"at": 0} == {
        "replica": 1, "at": 0, "http_method": "POST", "method": "tools/call", "tool": "slow_task",
        "session": "abc", "status": 404, "body_at": None}  # body_at: set when a body byte leaves
    assert record(0, "GET", b"", None, 200)["method"] is None
    assert record(0, "POST", b"[1, 2]", None, 400)["method"] is None  # a batch or junk: no method


def test_a_session_is_paced_as_its_knobs_say_and_recorded() -> None:
    with running_replicas(1, PACED) as replicas:
        outcome = run_async(measure_session(replicas.url(), calls=1))
        requests = replicas.requests()
    assert outcome.completed, outcome.error
    call = outcome.calls[0]
    # duration / interval notifications, the first after the silence the knob asks for.
    assert len(call.progress_at_s) == round(PACED.duration_s / PACED.progress_interval_s)
    assert call.first_progress_s is not None and call.first_progress_s >= PACED.first_progress_delay_s
    methods = [(r["method"], r["status"]) for r in requests if r["method"]]
    assert ("initialize", 200) in methods and ("tools/call", 200) in methods
    assert {r["session"] for r in requests} == {outcome.session_id} and outcome.session_id
    assert [r["tool"] for r in requests if r["method"] == "tools/call"] == ["slow_task"]


@pytest.mark.parametrize("notify_after_s", [0.3, 0.0])
def test_a_server_notification_follows_the_tool_call_on_the_get_stream_and_is_recorded(notify_after_s: float) -> None:
    """--notify-after-s: the origin sends notifications/tools/list_changed, tied to no request,
    that long after the tool returned; the SDK's client gets it on its GET stream while it idles,
    and the origin records it as sent (0: none sent, none received)."""
    from server.mcp.knobs import SENT_BY_SERVER
    with running_replicas(1, OriginKnobs(duration_s=0.1, notify_after_s=notify_after_s)) as replicas:
        outcome = run_async(measure_session(replicas.url(), calls=1, hold_s=1.0))
        sent = [r for r in replicas.requests() if r["http_method"] == SENT_BY_SERVER]
    assert outcome.completed, outcome.error
    expected = ["notifications/tools/list_changed"] if notify_after_s else []
    assert [r["method"] for r in sent] == [method for method, _ in outcome.notifications] == expected
    # After the tool's work and the knob's delay, not with the call's progress.
    assert all(at >= outcome.calls[0].sent_at_s + 0.1 + notify_after_s for _, at in outcome.notifications)


@pytest.mark.parametrize("expose", ["Mcp-Session-Id", ""])
def test_cors_origin_answers_the_preflight_and_exposes_what_the_knob_names(expose: str) -> None:
    """--cors-origin: Starlette's CORSMiddleware answers a preflight (recorded, as the origin saw it)
    and names the exposed headers on initialize's answer; without the knob, no CORS header at all."""
    knobs = OriginKnobs(cors_origin="*", cors_expose_headers=expose, cors_allow_headers="mcp-session-id")
    preflight = {"origin": "http://127.0.0.1:1", "access-control-request-method": "POST",
                 "access-control-request-headers": "content-type, mcp-session-id"}
    with running_replicas(1, knobs) as replicas, httpx.Client() as http:
        allowed = http.options(replicas.url(), headers=preflight)
        refused = http.options(replicas.url(), headers={**preflight, "access-control-request-headers": "last-event-id"})
        opened = http.post(replicas.url(), json=INITIALIZE, headers={**HEADERS, "origin": "http://127.0.0.1:1"})
        recorded = [(r["http_method"], r["status"]) for r in replicas.requests()]
    assert (allowed.status_code, refused.status_code) == (200, 400)
    assert opened.headers["access-control-allow-origin"] == "*" and opened.headers["mcp-session-id"]
    assert opened.headers.get("access-control-expose-headers", "") == expose
    assert recorded[:2] == [("OPTIONS", 200), ("OPTIONS", 400)]
    with running_replicas(1, OriginKnobs()) as replicas, httpx.Client() as http:
        plain = http.post(replicas.url(), json=INITIALIZE, headers={**HEADERS, "origin": "http://127.0.0.1:1"})
    assert not any(name.startswith("access-control-") for name in plain.headers)


def test_sessions_off_hands_out_no_session_id() -> None:
    with running_replicas(1, OriginKnobs(sessions=False, duration_s=0.1)) as replicas:
        outcome = run_async(measure_session(replicas.url(), calls=1))
        requests = replicas.requests()
    assert outcome.completed and outcome.session_id is None
    assert requests and all(r["session"] is None for r in requests)


HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "slow_task", "arguments": {}, "_meta": {"progressToken": "p"}}}


def _opened(http: httpx.Client, url: str) -> dict[str, str]:
    """A session opened by hand: the headers every later request carries."""
    opened = http.post(url, json=INITIALIZE, headers=HEADERS)
    session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers={**HEADERS, **session})
    return session


def _event_ids(text: str) -> list[str]:
    return [line[len("id: "):] for line in text.splitlines() if line.startswith("id: ")]


@pytest.mark.parametrize("resumable", [True, False])
def test_resumable_streams_carry_event_ids_and_a_get_replays_what_followed(resumable: bool) -> None:
    knobs = OriginKnobs(resumable=resumable, retry_ms=500, duration_s=0.2)
    with running_replicas(1, knobs) as replicas, httpx.Client(timeout=10) as http:
        session = _opened(http, replicas.url())
        called = http.post(replicas.url(), json=CALL, headers={**HEADERS, **session}).text
        ids = _event_ids(called)
        if not resumable:  # the SDK's default: no ids, nothing to resume from
            assert ids == [] and "notifications/progress" in called
            return
        # A priming event (an id, no data, the retry asked for), then each progress and the result.
        assert "retry: 500" in called and len(ids) == 1 + round(knobs.duration_s / knobs.progress_interval_s) + 1
        with http.stream("GET", replicas.url(), headers={"accept": "text/event-stream", "last-event-id": ids[1],
                                                         **session}) as replay:
            replayed = ""
            for line in replay.iter_lines():
                replayed += line + "\n"
                if '"result"' in line:
                    break
    assert _event_ids(replayed) == ids[2:]  # what followed the second event, with the same ids


def _get_stream_comments(knobs: OriginKnobs, listen_s: float) -> list[str]:
    """Open a session by hand, then its standalone GET stream; the comment lines read in `listen_s`."""
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}
    with running_replicas(1, knobs) as replicas, httpx.Client(timeout=5) as http:
        opened = http.post(replicas.url(), json=initialize, headers=headers)
        session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        http.post(replicas.url(), json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                  headers={**headers, **session})
        comments, until = [], time.monotonic() + listen_s
        with http.stream("GET", replicas.url(), headers={"accept": "text/event-stream", **session},
                         timeout=httpx.Timeout(5, read=listen_s + 1)) as stream:
            assert stream.status_code == 200
            try:
                for line in stream.iter_lines():
                    if line.startswith(":"):
                        comments.append(line)
                    if time.monotonic() > until:
                        break
            except httpx.ReadTimeout:
                pass
    return comments


def test_the_get_stream_carries_keepalive_comments_at_the_knob_s_interval() -> None:
    comments = _get_stream_comments(OriginKnobs(keepalive_s=0.3), listen_s=1.6)
    assert len(comments) >= 3 and all(c.startswith(": ping") for c in comments), comments


def test_keepalive_0_leaves_the_get_stream_silent() -> None:
    assert _get_stream_comments(OriginKnobs(keepalive_s=0.0), listen_s=1.0) == []


@pytest.mark.parametrize("open_comment", [True, False], ids=["open-comment", "sdk-default"])
def test_open_comment_is_the_get_stream_s_first_byte_right_after_its_headers(open_comment: bool) -> None:
    """Keep-alives off, so nothing else writes: with --open-comment the GET stream's first body byte
    is one `: open` comment with its headers, and the origin records sending it; without, the SDK
    sends the GET no byte at all (mcp-held-headers)."""
    with running_replicas(1, OriginKnobs(keepalive_s=0.0, open_comment=open_comment)) as replicas:
        stream = run_async(measure_get_stream(replicas.url(), 1.0))
        [get] = [r for r in replicas.requests() if r["http_method"] == "GET"]
    assert stream.status == 200 and get["status"] == 200
    if open_comment:
        assert stream.first_byte_s is not None and stream.first_byte_s - stream.headers_s < 0.2
        assert len(stream.comments_at_s) == 1 and stream.events == 0
        assert get["body_at"] is not None and get["body_at"] - get["at"] < 0.2
    else:
        assert stream.first_byte_s is None and get["body_at"] is None


def test_every_knob_is_in_the_docs_table() -> None:
    from dataclasses import fields
    from pathlib import Path
    table = (Path(__file__).resolve().parents[2] / "docs" / "mcp.md").read_text(encoding="utf-8")
    missing = [item.name for item in fields(OriginKnobs) if f"`--{item.name.replace('_', '-')}" not in table]
    assert missing == [], f"docs/mcp.md's knob table lacks {missing}"


def test_the_origin_refuses_to_bind_off_loopback(capsys: pytest.CaptureFixture[str]) -> None:
    from server.mcp.__main__ import main
    assert main(["--host", "0.0.0.0", "--port", "9"]) == 2
    assert "loopback only" in capsys.readouterr().err


def test_json_responses_carry_the_result_without_progress() -> None:
    with running_replicas(1, OriginKnobs(json_response=True, duration_s=0.2)) as replicas:
        outcome = run_async(measure_session(replicas.url(), calls=1))
    assert outcome.completed and outcome.calls[0].progress_at_s == []  # no stream to carry them


def test_the_1x_line_serves_the_handshake_but_not_the_2026_revision() -> None:
    """The origin on mcp 1.30 (its own venv): a session as deployed servers serve it, and the
    2026-07-28 client's discover refused (a 1.x server knows only sessions)."""
    with running_replicas(1, OriginKnobs(duration_s=0.2), sdk="1.30") as replicas:
        legacy = run_async(measure_session(replicas.url(), mode="legacy", calls=1))
        modern = run_async(measure_session(replicas.url(), mode="modern", calls=1))
        requests = replicas.requests()
    assert legacy.completed and legacy.session_id and len(legacy.calls[0].progress_at_s) == 4
    assert not modern.opened and modern.statuses == [400]
    assert ("server/discover", 400) in [(r["method"], r["status"]) for r in requests]
