"""compression-delay: a hop compresses the stream and holds each event back to do it.

Reads `Evidence.stream` (the request sent with `Accept-Encoding: gzip`, stamped by the origin),
`Evidence.reference` (the same request without it, when the tool has one) and `Evidence.pacing`.
A stream nobody compressed has no such fault. A compressed one is held when it has either shape of
a held stream (see buffering), or when its median event spent HELD_INTERVALS longer on the way
than uncompressed: measured against the reference when it is stamped (a clock offset between
origin and client cancels), else against no delay at all (origin and client on one clock). When
even the uncompressed stream is held, compression cannot be told apart: the verdict is untold.
"""
from __future__ import annotations

from labs.client.durations import milliseconds
from labs.client.results import percentile
from labs.findings import buffering
from labs.findings.evidence import Evidence, Verdict, ended, untold

HELD_INTERVALS = 0.5  # each event this many token intervals later than uncompressed


def judge(evidence: Evidence) -> Verdict:
    stream, pacing, reference = evidence.stream, evidence.pacing, evidence.reference
    if stream.outcome != "complete":
        return Verdict(True, f"with Accept-Encoding gzip the stream did not complete: {ended(stream)}"
                       + (f" ({stream.error})" if stream.error else ""))
    encoding = stream.content_encoding
    if encoding is None:
        return Verdict(False, "the path did not compress the stream (Accept-Encoding: gzip sent)")
    if reference is not None and buffering.held(reference, pacing)[0]:
        return untold("the path holds the stream even uncompressed (see buffering)")
    lumped, shape = buffering.held(stream, pacing)
    hop = percentile(stream.hop_delays, 50)
    base = percentile(reference.hop_delays, 50) if reference is not None else 0.0
    extra = None if hop is None or base is None else hop - base
    late = extra is not None and extra >= HELD_INTERVALS * pacing.interval_s
    observed = f"{encoding}-encoded: {shape}"
    if reference is not None:
        observed += f"; TTFT {milliseconds(stream.ttft_s)} (uncompressed {milliseconds(reference.ttft_s)})"
    if extra is not None:
        against = "than uncompressed" if reference is not None else "on the way"
        observed += f"; each event {milliseconds(extra)} later {against} (median)"
    verdict = Verdict(lumped or late, observed)
    if verdict.fault and not pacing.known:
        return Verdict(True, observed, unsure=buffering.PLAIN_REASON)
    return verdict
