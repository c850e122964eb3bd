"""What the settings of a Caddy config suggest: one `Rule` per finding kind and setting (labs/verify/rules.py).

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

from typing import Callable

from labs import catalogue
from labs.verify.model import Options, Reading
from labs.verify.rules import SSE, Rule, Suspect, connection_cap, timeout_fix
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


def _buffered(r: Reading, o: Options) -> Suspect | None:
    buffers = r.get("response_buffers")
    if not buffers.value:
        return None
    return Suspect(f"{buffers.text}: reverse_proxy reads the answer into its buffer before it sends it",
                   f"in {r.scope}: remove response_buffers (buffer_responses); nothing from the server turns it "
                   "off. Cost: unbuffered, a slow client holds the upstream connection (and its model slot) "
                   "while it reads slowly; Caddy has no per-write timeout to bound it (the server's write "
                   "timeout is a deadline on the whole response, which would cut long streams)")


def _encoded(r: Reading, o: Options) -> Suspect | None:
    encode = r.get("encode")
    if not (encode.value and encode.value["event_streams"] and encoder_holds(r)):
        return None
    return Suspect(f"{encode.text}: {SSE} is among the types it compresses; a first event above "
                   f"minimum_length ({encode.value['minimum_length']} bytes: a long first delta, a tool call) "
                   "turns compression on and the encoder holds the answer to the end",
                   f"in the site of {r.scope}: @compressible not header Accept *{SSE}*  then  encode @compressible "
                   f"{' '.join(encode.value['encodings'])}; the server cannot opt out (measured on Caddy 2.6.2: "
                   "`Cache-Control: no-transform` is compressed and held all the same)")


def _low_latency(r: Reading, o: Options) -> Suspect | None:
    flush = r.get("flush_interval")
    if flush.value is None or flush.value >= 0 or not low_latency_holds(r):
        return None
    return Suspect(f"{flush.text}: Caddy's low-latency mode does not cancel the request to the server when "
                   "the client leaves (documented; measured here on 2.6.2: the server noticed only at its next "
                   "write)", f"in {r.scope}: remove flush_interval (text/event-stream answers are flushed at once "
                   "without it); no cost to streaming")


def _idle(name: str) -> Callable[[Reading, Options], Suspect | None]:
    """A transport timeout on the server's silence, `name`, below --max-silence."""
    def suspect(r: Reading, o: Options) -> Suspect | None:
        setting = r.get(name)
        if setting.value is None or not 0 < setting.value < o.max_silence_s:
            return None
        return Suspect(f"{setting.text}: a silence of the server longer than {setting.value:g} s ends the "
                       f"stream (--max-silence is {o.max_silence_s:g} s)",
                       f"in {r.scope}: transport http {{ {name} {timeout_fix(setting.value, o)}s }}; and `: ping` "
                       "heartbeats from the server, which keep any idle limit on the path from firing (the cost "
                       "of a long timeout: a hung server is noticed that late)", setting.value)
    return suspect


def _deadline(name: str, word: str) -> Callable[[Reading, Options], Suspect | None]:
    """A server timeout `name` (the Caddyfile's `word`) on the whole response, below --max-stream."""
    def suspect(r: Reading, o: Options) -> Suspect | None:
        setting = r.get(name)
        if setting.value is None or not 0 < setting.value < o.max_stream_s:
            return None
        return Suspect(f"{setting.text}: Go's net/http deadline on the whole response: a stream longer than "
                       f"{setting.value:g} s is cut (--max-stream is {o.max_stream_s:g} s)",
                       f"remove `{word}` from the server timeouts (keep read_header and idle, which bound clients "
                       "that send nothing); the server cannot lift a deadline of the proxy", setting.value)
    return suspect


def _conns(r: Reading, o: Options) -> Suspect | None:
    return connection_cap(r.get("max_conns_per_host"), o, "the server",
                          f"in {r.scope}: transport http {{ max_conns_per_host {2 * o.streams} }}")


# The first rule of each kind is where a measured fault no setting explains is placed.
RULES: tuple[Rule, ...] = (
    Rule("buffering", "response_buffers", "no response_buffers on the streaming route", ("streaming",), _buffered),
    Rule("coalescing", "flush_interval", "flush_interval -1"),
    Rule("compression-delay", "encode", f"@compressible not header Accept *{SSE}*  then  encode @compressible gzip",
         ("gzip",), _encoded),
    Rule("disconnect-not-propagated", "flush_interval",
         "leave flush_interval unset (event streams are flushed at once)", ("disconnect",), _low_latency),
    Rule("idle-timeout", "read_timeout", "transport http { read_timeout } above the longest silence", SILENCES,
         _idle("read_timeout")),
    Rule("idle-timeout", "response_header_timeout", "transport http { response_header_timeout } above the "
         "first token's silence", SILENCES[:1], _idle("response_header_timeout")),
    Rule("total-timeout", "server write_timeout", "no write (or read_body) server timeout for the API",
         ("long-stream",), _deadline("server write_timeout", "write")),
    Rule("total-timeout", "server read_timeout", "no read_body server timeout for the API", ("long-stream",),
         _deadline("server read_timeout", "read_body")),
    Rule("connection-limit", "max_conns_per_host", "max_conns_per_host above the concurrent streams",
         ("concurrent-streams",), _conns),
)
