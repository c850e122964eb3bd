"""Between the lab and the browser's client (labs/view/static/client.js): what a variant asks the browser
to do, and what the browser measured, in the lab's own terms (labs.client.results.StreamResult)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import quote

from labs.client.results import Event, StreamResult
from labs.scenario.model import Workload
from server.http.event_source import QUERY_PARAMETER

# Measuring-client options (labs.client.Options) and browser-only options, as client.js names them.
_SECONDS_TO_MS = {"read_timeout_s": "readTimeoutMs", "total_timeout_s": "timeoutMs"}
_SAME = {"mode": "mode", "disconnect_after_events": "abortAfterEvents",
         # Browser-only: which API reads the stream, how its bytes are decoded, how many
         # EventSource connections (the first and its reconnections) the client lets happen.
         "api": "api", "decoder": "decoder", "max_connections": "maxConnections"}
# The options only the browser's client knows (labs.client.Options has the rest).
BROWSER_ONLY = ("api", "decoder", "max_connections")
# What a browser cannot do as the lab's client does (a page sets neither of these itself).
NOT_IN_A_BROWSER = ("headers", "accept_encoding", "connect_timeout_s")
# What JavaScript's encodeURIComponent leaves as it is, besides letters and digits.
URI_COMPONENT_SAFE = "-_.!~*'()"


@dataclass(frozen=True)
class PageRequest:
    """One HTTP request the page sends for a stream, as client.js builds it."""

    method: str  # POST (fetch) or GET (EventSource)
    url: str
    body: str | None  # the JSON a POST carries; a GET carries it in the URL's query


def browser_spec(url: str, body: Mapping[str, Any], workload: Workload,
                 options: Mapping[str, Any]) -> dict[str, Any]:
    """client.js's `spec` for one variant: the entry URL, the request body, the client options."""
    merged = dict(options)
    if workload.disconnect_after_events is not None:
        merged.setdefault("disconnect_after_events", workload.disconnect_after_events)
    spec: dict[str, Any] = {"url": url, "body": dict(body)}
    for name, value in merged.items():
        if name in _SECONDS_TO_MS and value is not None:
            spec[_SECONDS_TO_MS[name]] = float(value) * 1000.0
        elif name in _SAME and value is not None:
            spec[_SAME[name]] = value
    return spec


def page_request(spec: Mapping[str, Any]) -> PageRequest:
    """What client.js sends for one stream of `spec`: fetch POSTs the body as JSON; EventSource
    can only GET, so the body travels URL-encoded in `?request=` (JSON.stringify, then
    encodeURIComponent), where the server's GET route reads it. Lets a test see, without a
    browser, the bodies a page would send."""
    text = json.dumps(spec["body"], ensure_ascii=False, separators=(",", ":"))
    if spec.get("api") == "eventsource":
        return PageRequest("GET", f"{spec['url']}?{QUERY_PARAMETER}={quote(text, safe=URI_COMPONENT_SAFE)}", None)
    return PageRequest("POST", spec["url"], text)


def skipped_options(options: Mapping[str, Any]) -> list[str]:
    """The variant's client options a page cannot apply (the view says so beside the panel)."""
    return [name for name in options if name in NOT_IN_A_BROWSER]


@dataclass
class BrowserStreamResult(StreamResult):
    """A stream as the browser measured it: StreamResult plus what only the browser knows."""

    api: str = "fetch"  # fetch + a stream reader, or EventSource
    decoder: str = "stream"  # TextDecoder with {stream: true}, or "naive" (each chunk alone)
    split_reads: int = 0  # chunks that ended inside a UTF-8 character
    connections: int = 0  # EventSource: the first connection and every reconnection
    last_event_ids: list[Any] = field(default_factory=list)  # Last-Event-ID at each (re)connection


def _seconds(ms: Any) -> float | None:
    return None if ms is None else float(ms) / 1000.0


def from_browser(raw: Mapping[str, Any]) -> BrowserStreamResult:
    """client.js's result (milliseconds) as the lab's StreamResult (seconds)."""
    events = [Event(t=float(e["t"]) / 1000.0, read=int(e["read"]), kind=e["kind"],
                    text=e.get("text") or "") for e in raw.get("events", [])]
    return BrowserStreamResult(
        url=raw.get("url", ""), mode="browser", status=raw.get("status"),
        http_version=raw.get("protocol"), outcome=raw.get("outcome", "truncated"),
        error=raw.get("error"), start_s=_seconds(raw.get("startOffsetMs")) or 0.0,
        ttfb_s=_seconds(raw.get("ttfbMs")), ttft_s=_seconds(raw.get("ttftMs")),
        e2e_s=_seconds(raw.get("e2eMs")), end_s=_seconds(raw.get("e2eMs")), events=events,
        reads=int(raw.get("reads") or 0), text=raw.get("text") or "",
        heartbeats=sum(1 for e in events if e.kind == "comment"),
        saw_done=bool(raw.get("sawDone")), body_complete=bool(raw.get("sawDone")),
        api=raw.get("api", "fetch"), decoder=raw.get("decoder", "stream"),
        split_reads=int(raw.get("splitReads") or 0), connections=int(raw.get("connections") or 0),
        last_event_ids=list(raw.get("lastEventIds") or []))
