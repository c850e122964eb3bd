"""The MCP origin's knobs, declared once: the dataclass below is the flags of `python -m server.mcp`
(`parser()`), the replicas' command line (`OriginKnobs.argv`) and the docs' table (docs/mcp.md).

The tool's pacing is the chat server's token pacing in other words: a progress notification every
`progress_interval_s` until `duration_s` has passed, after a silence of `first_progress_delay_s`.
"""
from __future__ import annotations

import argparse
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, Sequence

# sse-starlette's EventSourceResponse, which the SDK answers every SSE stream with (the POST's and
# the standalone GET's), writes a `: ping - <time>` comment every 15 s unless told otherwise:
# sse_starlette/sse.py DEFAULT_PING_INTERVAL. The SDK passes no `ping`, so 15 s is its default.
SDK_KEEPALIVE_S = 15.0
# The `http_method` of the record the origin writes when it sends a server notification of its
# own (`notify_after_s`): no HTTP request carried it (server/mcp/app.py).
SENT_BY_SERVER = "SERVER"


def knob(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class OriginKnobs:
    """What one origin process does; every field is a `--flag` (underscores as dashes)."""

    sessions: bool = knob(True, "stateful: `initialize` opens a session whose `Mcp-Session-Id` every later "
                                "request must carry to the same process (the 2025 revisions' default); off: "
                                "the SDK's `stateless_http`, a fresh transport per request")
    json_response: bool = knob(False, "answer a POST with one JSON body instead of an SSE stream (progress "
                                      "notifications are then never sent on it)")
    progress_interval_s: float = knob(0.05, "the slow tool's pace: one progress notification every this many "
                                            "seconds (the chat server's token interval)")
    duration_s: float = knob(0.5, "how long the slow tool works before it returns its result")
    first_progress_delay_s: float = knob(0.0, "a silence before the first progress notification (a tool that "
                                              "thinks before it reports)")
    keepalive_s: float = knob(SDK_KEEPALIVE_S, "a `: ping` comment on every open SSE stream (the POST's and "
                                               "the standalone GET's) after this many idle seconds; 0: none. "
                                               "15 s is the SDK's own (through sse-starlette)")
    resumable: bool = knob(False, "an event store: every SSE event gets an id, each POST stream opens with a "
                                  "priming event, and a GET with Last-Event-ID replays what followed (server/mcp/events.py); "
                                  "off, as the SDK's default: a cut stream is lost")
    retry_ms: int = knob(0, "the `retry:` an SSE stream suggests to a client that reconnects (resumable only); "
                            "0: none, the client's own default")
    notify_after_s: float = knob(0.0, "a server notification (`notifications/tools/list_changed`, tied to no "
                                      "request, so the SDK sends it on the session's standalone GET stream) this "
                                      "many seconds after each tool call returns; 0: none. The origin records it "
                                      "as sent, so a scenario can tell a lost one from one never sent")
    cors_origin: str = knob("", "answer CORS for a page on this origin (`*`: any): Starlette's `CORSMiddleware` around "
                                "the app, methods GET, POST, DELETE, as the SDK's README shows for browser clients; "
                                "'': none, the SDK's own (it sends no CORS header)")
    cors_expose_headers: str = knob("", "with --cors-origin: the response headers a page may read "
                                        "(`expose_headers`, comma-separated; `Mcp-Session-Id` is the one a browser "
                                        "client needs); '': Starlette's default, none")
    cors_allow_headers: str = knob("", "with --cors-origin: the request headers a preflight allows besides the "
                                       "safelisted ones (`allow_headers`, comma-separated: `mcp-session-id`, "
                                       "`mcp-protocol-version`, `last-event-id`); '': Starlette's default, none")
    open_comment: bool = knob(False, "an `: open` SSE comment on every SSE response right after its headers "
                                     "(server/mcp/opening.py): a first body byte, so a hop that holds the headers "
                                     "until one (nginx before 1.23 over HTTP/2) lets them go at once. The SDK "
                                     "primes only resumable POST streams; its GET stream's first byte is a "
                                     "notification or the first keep-alive")
    replica: int = knob(0, "this process's number among its replicas, written in each request it records")

    def argv(self) -> list[str]:
        """These knobs as flags (only those that differ from the defaults)."""
        default = OriginKnobs()
        flags: list[str] = []
        for name, value in asdict(self).items():
            if value == getattr(default, name):
                continue
            flag = "--" + name.replace("_", "-")
            if isinstance(value, bool):
                flags.append(flag if value else "--no-" + name.replace("_", "-"))
            else:
                flags += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
        return flags


def parser() -> argparse.ArgumentParser:
    """`python -m server.mcp`'s flags: the knobs, then where it listens."""
    parse = argparse.ArgumentParser(prog="python -m server.mcp", description=__doc__.splitlines()[0])
    parse.add_argument("--host", default="127.0.0.1")
    parse.add_argument("--port", type=int, default=8765)
    for item in fields(OriginKnobs):
        flag = "--" + item.name.replace("_", "-")
        default = item.default if item.default is not MISSING else None
        if isinstance(default, bool):
            parse.add_argument(flag, action=argparse.BooleanOptionalAction, default=default,
                               help=item.metadata["help"])
        else:
            parse.add_argument(flag, type=type(default), default=default, help=item.metadata["help"])
    return parse


def from_args(args: Sequence[str] | None = None) -> tuple[OriginKnobs, str, int]:
    """(the knobs, the host, the port) of a command line; a knob out of range exits 2."""
    parse = parser()
    values = vars(parse.parse_args(args))
    host, port = values.pop("host"), values.pop("port")
    knobs = OriginKnobs(**values)
    if knobs.progress_interval_s <= 0 or knobs.duration_s < 0 or knobs.first_progress_delay_s < 0 \
            or knobs.keepalive_s < 0 or knobs.replica < 0 or knobs.notify_after_s < 0 \
            or knobs.retry_ms < 0:
        parse.error("the intervals must be above 0, the other durations and the replica 0 or more")
    return knobs, host, port
