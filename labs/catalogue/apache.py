"""Apache httpd scenarios: mod_proxy's ProxyTimeout cuts a silent stream."""
from __future__ import annotations

from labs.scenario import checks
from labs.scenario.model import Scaled, Scenario, Variant, Workload

DOCS = "https://httpd.apache.org/docs/2.4/mod/mod_proxy.html"
PROXY_TIMEOUT_S = 2  # apache-proxy-timeout: ProxyTimeout (whole seconds)
SILENCE_S = 4.0

SCENARIOS = [
    Scenario(
        name="apache-proxy-timeout",
        layer="proxy",
        kind=None,  # not a finding `labs verify` can see yet (small events, no reload, 3 proxies)
        symptom="long answers end mid-sentence behind Apache, with a 200 already sent",
        path=("apache",),
        workload=Workload(lab={"pause_after_tokens": 5, "pause_s": SILENCE_S}),
        broken=Variant(proxy={"apache": {"proxy_timeout": PROXY_TIMEOUT_S}}, lab={"heartbeat_s": 0}),
        fix=Variant(proxy={"apache": {"proxy_timeout": 10}}, lab={"heartbeat_s": 0.25}),
        symptom_checks=(checks.outcome_is("truncated"), checks.status_is(200),
                        checks.cut_after_silence(PROXY_TIMEOUT_S, "ProxyTimeout")),
        cure_checks=(checks.complete_with_done(),
                     checks.silence_outlasted(PROXY_TIMEOUT_S, "the broken ProxyTimeout")),
        explanation=(
            "mod_proxy_http waits at most ProxyTimeout (else the server-wide Timeout, 60 s) for each "
            "read from the backend. A model silent for longer (prefill, a tool call) gets its stream "
            "cut: before the headers Apache answers 502, after them it closes the connection without "
            "the chunked terminator or [DONE], and logs AH01110 (a read error from the backend). Set "
            "ProxyTimeout above the longest silence and have the server send heartbeats more often."),
        fix_summary="ProxyTimeout above the longest silence, plus `: ping` heartbeats from the server",
        finding=(
            "Measured here and not a failure: Apache's ProxyPass streams SSE with or without "
            "flushpackets=on (httpd 2.4 flushes each backend read when nothing more is pending), "
            "mod_deflate on text/event-stream still streams (compressed, one flush per event), and "
            "over h2c Apache sends the response headers at once."),
        scaled=(Scaled("ProxyTimeout", f"{PROXY_TIMEOUT_S}s", "Timeout, 60 s"),
                Scaled("silence mid-stream", f"{SILENCE_S:g}s", "minutes"),
                Scaled("heartbeat interval", "0.25s", "10s")),
        sources=(f"{DOCS}#proxytimeout", "https://httpd.apache.org/docs/2.4/mod/core.html#timeout"),
    ),
]
