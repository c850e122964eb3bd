"""A cut after the origin's headers with no status before it is named as headers held until the
first body byte (labs/probe/held_headers.py): no status at all (Cloudflare's shape, which no lab
proxy gives), or the status only with the cut (nginx 1.22 over HTTP/2, reproduced through the real
proxy in test_platform_limits.py); headers that came at once, or a stream that was not cut, are not."""
from __future__ import annotations

from labs.client.results import StreamResult
from labs.probe import held_headers, platforms, silence
from labs.probe.base import Observation
from labs.probe.report import ProbeReport


def cut(status: int | None, headers_s: float | None, end_s: float = 5.0, outcome: str = "truncated") -> StreamResult:
    return StreamResult(status=status, headers_s=headers_s, end_s=end_s, outcome=outcome, error="reset")


def test_no_status_or_a_status_only_with_the_cut_is_held():
    assert held_headers.held(cut(None, None))                  # Cloudflare: the client saw no 200
    assert held_headers.held(cut(200, 5.0))                    # nginx 1.22 over HTTP/2: with the reset
    assert not held_headers.held(cut(200, 0.004))              # the headers at once: a plain cut
    assert not held_headers.held(cut(200, 0.004, outcome="complete"))
    assert not held_headers.held(cut(None, None, outcome="timeout"))  # the client's own wait, not a cut
    # The bar is half the way to the cut: the origin sent its headers at once.
    assert held_headers.held(cut(200, held_headers.HELD_SHARE * 5.0))
    assert not held_headers.held(cut(200, 0.99 * held_headers.HELD_SHARE * 5.0))


def test_the_finding_names_the_hold_its_fix_and_the_platform_that_holds():
    shown = held_headers.seen(cut(None, None, end_s=125.4), "HTTP/1.1")
    assert "no status at all before the cut" in held_headers.said(shown)
    report = ProbeReport(urls=["https://tools.example.com/v1"], origin="streamlab")
    report.add(Observation("idle-timeout-after-headers", "idle-timeout", True, "headers held ...",
                           "a silence of 131.00 s ...; " + held_headers.said(shown), limit_s=125.4,
                           measurements={held_headers.KEY: shown}), None, "nginx-read-timeout: raise it")
    finding, = report.findings
    assert finding.fix.split(" | ")[0] == held_headers.FIX
    assert finding.fix.endswith(platforms.heartbeat_advice(125.4))
    hint, = finding.hints
    assert hint.startswith("Cloudflare (proxied)") and hint.endswith("as seen here")
    # The same limit without the hold names Cloudflare without the claim.
    plain, = platforms.hints("idle-timeout", "after-headers", 125.4)
    assert not plain.endswith("as seen here")


def test_the_http2_try_is_a_silence_the_limit_clearly_cuts():
    """The bracket's upper end can lie a millisecond over the limit (a try of 3.001 s cut by
    nginx's 3 s): a CI run's HTTP/2 try there passed, and the hold went unseen. The try is at the
    bracket's tolerance over the limit, never past the longest silence asked."""
    assert silence.clearly_cut(3.0, 3.001, 3.6) == 3.0 * (1 + silence.TOLERANCE)
    assert silence.clearly_cut(3.0, 3.5, 3.6) == 3.5  # a cut already well over: kept
    assert silence.clearly_cut(3.0, 3.001, 3.1) == 3.1  # --max-silence is the ceiling
