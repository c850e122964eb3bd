"""HTTP/2 beside HTTP/1.1: whether an entry offers `h2`, and one verdict read over both protocols.

Browsers and most SDKs speak HTTP/2 to an `https://` entry that offers it (ALPN), and a hop may
stream one protocol and hold the other (an h2 listener with its own buffering, a CDN that
translates). So for an `https://` entry whose TLS handshake picks `h2` when offered `h2` and
`http/1.1`, the streaming checks measure the same stamped stream over both (the lab's h2 client,
labs/client/http2.py) and read each with the same judge. A difference is a finding only where the
judge names a fault on the HTTP/2 stream; `http://` entries are measured over HTTP/1.1 alone
(no h2c: the lab's h2 client speaks HTTP/2 over TLS only).
"""
from __future__ import annotations


from labs.client.alpn import negotiate
from labs.client.results import StreamResult
from labs.findings import Verdict
from labs.findings.evidence import ended, untold
from labs.probe.base import Context

H2_ONLY = "h2"  # Observation.measurements["only_over"]: the fault shows over HTTP/2 alone


async def offers_h2(ctx: Context, hop: int) -> bool:
    """Whether entry `hop` is compared over HTTP/2 (asked once per run)."""
    key = ("alpn", hop)
    if key not in ctx.notes:
        url = ctx.path.urls[hop]
        if ctx.settings.http1_only:
            ctx.notes[key] = (False, "--http1-only: HTTP/2 was not compared")
        elif not url.startswith("https://"):
            ctx.notes[key] = (False, "an http:// entry: HTTP/2 is compared over TLS with ALPN only "
                                     "(no h2c)")
        else:
            ctx.progress(f"asking {url} for h2 (ALPN)")
            chosen, said = await negotiate(url, ctx.path.verify_tls)
            ctx.notes[key] = (chosen == "h2", said)
    return bool(ctx.notes[key][0])


def http_note(ctx: Context) -> str:
    """What the report says about the protocols of the outermost entry."""
    shown, said = ctx.notes.get(("alpn", 0), (False, "no streaming check ran"))
    both = "the streaming checks ran over HTTP/2 and HTTP/1.1" if shown else "HTTP/1.1 only"
    return f"{both} ({said}); the other checks over HTTP/1.1"


def h2_verdict(result: StreamResult, verdict: Verdict) -> Verdict:
    """A judge's verdict on the HTTP/2 stream; untold when that stream did not even complete
    (over HTTP/1.1 that makes the run unusable, here it is one protocol's measurement)."""
    if result.outcome != "complete":
        detail = f": {result.error}" if result.error else ""
        return untold(f"the stream over HTTP/2 did not complete ({ended(result)}{detail})")
    return verdict


def fold(h1: Verdict, h2: Verdict | None) -> tuple[Verdict, bool]:
    """One check's verdict over both protocols, and whether its fault shows over HTTP/2 only.

    A fault over HTTP/1.1 stands whatever HTTP/2 showed; a fault over HTTP/2 alone is named as
    such; a pass needs both told. HTTP/1.1 untold, or HTTP/2 untold where HTTP/1.1 passed, is
    untold: a pass over one protocol is not a pass of the path its clients reach over the other.
    """
    if h2 is None or h1.untold:
        return h1, False
    if h1.fault:
        other = "over HTTP/2 too" if h2.fault else f"over HTTP/1.1 only; HTTP/2: {h2.observed}"
        return Verdict(True, f"{h1.observed} ({other})", h1.limit_s, unsure=h1.unsure), False
    if h2.untold:
        return Verdict(False, f"not measured over HTTP/2: {h2.untold} (HTTP/1.1: {h1.observed})",
                       untold=f"over HTTP/2: {h2.untold}"), False
    if h2.fault:
        return Verdict(True, f"over HTTP/2 only: {h2.observed} (HTTP/1.1: {h1.observed})",
                       h2.limit_s, unsure=h2.unsure), True
    return Verdict(False, f"{h1.observed} (HTTP/2: no fault either)"), False
