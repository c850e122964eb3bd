"""What the settings of a Caddy config suggest: one `Suspicion` per fault (labs/verify/rules.py says how).

flush_interval > 0 is no suspicion: Caddy flushes a `text/event-stream` answer after every write
whatever it says (reverse_proxy's flushInterval); -1 is one (disconnect, measured). `encode` is: measured here (Caddy 2.6.2, the
catalogue's caddy-encode), a first write above minimum_length (512 bytes) turns gzip on and the
encoder then holds the answer to the end; small first events may pass uncompressed (the gzip
check asks again with large events, so its verdict does not depend on timing). Both are the older
release's: from 2.9.0 a flush reaches the encoder (the catalogue's caddy-encode says since when),
and 2.11 passes a departure on in low-latency mode (FIXED_IN), so neither is suspected on a release
that has the change.
"""
from __future__ import annotations

from labs import catalogue
from labs.verify.model import Options, Reading, Suspicion
from labs.verify.rules import SSE, timeout_fix
from proxies.caddy.kind import KIND as CADDY

SILENCES = ("silence-before-first-token", "silence-mid-stream")
# Measured 2026-12-06 (`labs verify --check disconnect --proxy-version 2.6|2.11`, the fixed
# Caddyfile with `flush_interval -1`): on Caddy 2.11.4 the server noticed a departure at once, on
# 2.6.2 only at its next write. The releases between were not measured: judged as 2.6.
FIXED_IN = "2.11"


def series(r: Reading) -> str:
    """The Caddy release that runs the config."""
    return r.wanted.series or CADDY.current.series


def encoder_holds(r: Reading) -> bool:
    """Whether that release's encoder holds a compressed stream (before caddy-encode's Since)."""
    return not any(change.reached_by(series(r)) for change in catalogue.get("caddy-encode").since)


def low_latency_holds(r: Reading) -> bool:
    """Whether that release's low-latency mode keeps a departed client's request (before FIXED_IN)."""
    return tuple(int(p) for p in series(r).split(".")) < tuple(int(p) for p in FIXED_IN.split("."))


def suspicions(r: Reading, o: Options) -> list[Suspicion]:
    found: list[Suspicion] = []
    buffers = r.get("response_buffers")
    if buffers.value:
        found.append(Suspicion("buffering", buffers.where,
                               f"{buffers.text}: reverse_proxy reads the answer into its buffer "
                               "before it sends it", f"in {r.scope}: remove response_buffers (buffer_responses); "
                               "nothing from the server turns it off. Cost: unbuffered, a slow client holds the "
                               "upstream connection (and its model slot) while it reads slowly; Caddy has no "
                               "per-write timeout to bound it (the server's write timeout is a deadline on the "
                               "whole response, which would cut long streams)", ("streaming",)))
    encode = r.get("encode")
    if encode.value and encode.value["event_streams"] and encoder_holds(r):
        found.append(Suspicion(
            "compression-delay", encode.where,
            f"{encode.text}: {SSE} is among the types it compresses; a first event above "
            f"minimum_length ({encode.value['minimum_length']} bytes: a long first delta, a tool call) "
            "turns compression on and the encoder holds the answer to the end",
            f"in the site of {r.scope}: @compressible not header Accept *{SSE}*  then  encode @compressible "
            f"{' '.join(encode.value['encodings'])}; the server cannot opt out (measured on Caddy 2.6.2: "
            "`Cache-Control: no-transform` is compressed and held all the same)", ("gzip",)))
    flush = r.get("flush_interval")
    if flush.value is not None and flush.value < 0 and low_latency_holds(r):
        found.append(Suspicion("disconnect-not-propagated", flush.where,
                               f"{flush.text}: Caddy's low-latency mode does not cancel the request to "
                               "the server when the client leaves (documented; measured here on 2.6.2: "
                               "the server noticed only at its next write)",
                               f"in {r.scope}: remove flush_interval (text/event-stream answers are flushed "
                               "at once without it); no cost to streaming", ("disconnect",)))
    for name, checks in (("read_timeout", SILENCES), ("response_header_timeout", SILENCES[:1])):
        setting = r.get(name)
        if setting.value is not None and 0 < setting.value < o.max_silence_s:
            found.append(Suspicion("idle-timeout", setting.where,
                                   f"{setting.text}: a silence of the server longer than "
                                   f"{setting.value:g} s ends the stream (--max-silence is {o.max_silence_s:g} s)",
                                   f"in {r.scope}: transport http {{ {name} {timeout_fix(setting.value, o)}s }}; "
                                   "and `: ping` heartbeats from the server, which keep any idle limit on the "
                                   "path from firing (the cost of a long timeout: a hung server is noticed "
                                   "that late)", checks, setting.value))
    for name, word in (("server write_timeout", "write"), ("server read_timeout", "read_body")):
        setting = r.get(name)
        if setting.value is not None and 0 < setting.value < o.max_stream_s:
            found.append(Suspicion("total-timeout", setting.where,
                                   f"{setting.text}: Go's net/http deadline on the whole response: a "
                                   f"stream longer than {setting.value:g} s is cut (--max-stream is "
                                   f"{o.max_stream_s:g} s)", f"remove `{word}` from the server timeouts "
                                   "(keep read_header and idle, which bound clients that send nothing); the "
                                   "server cannot lift a deadline of the proxy", ("long-stream",), setting.value))
    conns = r.get("max_conns_per_host")
    if conns.value and conns.value < o.streams:
        found.append(Suspicion("connection-limit", conns.where,
                               f"{conns.text}: at most {conns.value} connections to the server, one per "
                               f"stream (--streams is {o.streams})",
                               f"in {r.scope}: transport http {{ max_conns_per_host {2 * o.streams} }} (or remove "
                               "it). Cost: more streams reach the model server at once; its own concurrency "
                               "limit must then bound them", ("concurrent-streams",)))
    return found
