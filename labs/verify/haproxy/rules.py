"""What the settings of an HAProxy config suggest: one `Rule` per finding kind and setting
(labs/verify/rules.py says how a table is read). The first rule of each kind is where a measured
fault no setting explains is placed, with its general fix."""
from __future__ import annotations

from labs.verify.model import Options, Reading
from labs.verify.rules import SSE, Rule, Suspect, timeout_fix


def _coalescing(r: Reading, o: Options) -> Suspect | None:
    nodelay = r.get("option http-no-delay")
    if nodelay.value:
        return None
    return Suspect(f"{nodelay.text}: HAProxy sends with MSG_MORE and the kernel holds small writes for up to "
                   "~200 ms", f"in {r.scope}: option http-no-delay (nothing the server sends changes HAProxy's "
                   "send path; the cost is more, smaller packets, which a stream of small events sends anyway)")


def _compression(r: Reading, o: Options) -> Suspect | None:
    algo, types = r.get("compression algo"), r.get("compression type")
    if not algo.value or (types.value is not None and SSE not in types.value):
        return None
    kept = [t for t in (types.value or []) if t != SSE] or ["application/json", "text/plain"]
    return Suspect(f"{algo.text} with {types.text}: the deflate stream keeps each event's last bytes until the "
                   "next one", f"in {r.scope}: compression type {' '.join(kept)}; or, from the server, "
                   "`Cache-Control: no-transform` on the stream (HAProxy does not compress such a response: "
                   "documented, and measured on 2.6)", where=None if types.value else algo.where)


def _idle(r: Reading, o: Options) -> Suspect | None:
    server = r.get("timeout server")
    if server.value is None or server.value >= o.max_silence_s:
        return None
    return Suspect(f"{server.text}: a silence longer than {server.value:g} s ends the stream (--max-silence is "
                   f"{o.max_silence_s:g} s)", f"in {r.scope}: timeout server {timeout_fix(server.value, o)}s, and "
                   "`: ping` heartbeats from the server (the cost of a long timeout: a hung server is noticed "
                   "that late)", server.value)


def _departure(r: Reading, o: Options) -> Suspect | None:
    abort = r.get("option abortonclose")
    if abort.value:
        return None
    return Suspect(f"{abort.text}: the server side stays open after the client leaves, until HAProxy next "
                   "writes to the client", f"option abortonclose in the defaults section that the chat frontend "
                   f"and {r.scope} inherit (HAProxy needs it on both sides; before 3.3 a frontend takes it only "
                   "from its defaults, and from 3.3 it is the default in HTTP proxies: upgrading is the other "
                   "fix; the cost: a request whose client left is not forwarded, which is what a stream wants)")


def _maxconn(name: str):
    """A maxconn (`global`, `frontend` or `server`) below --streams: the streams beyond it wait."""
    def suspect(r: Reading, o: Options) -> Suspect | None:
        limit = r.get(name)
        if limit.value is None or limit.value >= o.streams:
            return None
        return Suspect(f"{limit.text}: streams beyond {limit.value} wait for one to end (--streams is "
                       f"{o.streams})", f"maxconn {max(4096, o.streams * 4)} ({name.split()[0]})")
    return suspect


def _counter(r: Reading, o: Options) -> Suspect | None:
    counter = r.get("counter limit")
    # A counter's limit at or above --streams leaves the streams through (as nginx's limit_conn).
    if counter.value is None or counter.value.allowed >= o.streams:
        return None
    return Suspect(f"{counter.text}: every stream counts, so streams beyond the limit are refused (--streams is "
                   f"{o.streams})", f"in {r.scope}: a limit of at least {o.streams} (what one client's streams "
                   "reach at once), or none for the streaming backend")


STREAMING, IDLE, LIMIT = ("streaming",), ("silence-before-first-token", "silence-mid-stream"), ("concurrent-streams",)
RULES: tuple[Rule, ...] = (
    Rule("buffering", "option http-no-delay", "option http-no-delay", STREAMING),
    Rule("coalescing", "option http-no-delay", "option http-no-delay", STREAMING, _coalescing),
    Rule("compression-delay", "compression type", "compression type without text/event-stream", ("gzip",),
         _compression),
    Rule("idle-timeout", "timeout server", "timeout server above the longest silence", IDLE, _idle),
    Rule("total-timeout", "timeout server", "no whole-response limit for the streaming backend", ("long-stream",)),
    Rule("disconnect-not-propagated", "option abortonclose", "option abortonclose", ("disconnect",), _departure),
    # frontend maxconn first: a fault no setting explains is placed there.
    Rule("connection-limit", "frontend maxconn", "maxconn above the concurrent streams", LIMIT,
         _maxconn("frontend maxconn")),
    Rule("connection-limit", "global maxconn", "maxconn above the concurrent streams", LIMIT,
         _maxconn("global maxconn")),
    Rule("connection-limit", "server maxconn", "maxconn above the concurrent streams", LIMIT,
         _maxconn("server maxconn")),
    Rule("connection-limit", "counter limit", "a limit above the concurrent streams", LIMIT, _counter),
)
