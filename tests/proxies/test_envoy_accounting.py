"""Envoy's ext_proc in STREAMED mode, the variant envoy-token-accounting's pair leaves out: it
streams, and its processor (proxies/envoy/token_counter.py) still counts every token when events
arrive split across body chunks (envoyproxy/ai-gateway#2162 lost usage there).

The precondition is proven first: the processor's own record says it saw several chunks and had
to join at least one event across two of them (the server's split_utf8_ms cuts each frame holding
a two-byte character); the count is then Envoy's access log (the processor's dynamic metadata)
against the usage the client received.
"""
from __future__ import annotations

import re

import pytest

from labs.catalogue.envoy import ACCOUNTING_SCRIPT
from proxies import EnvoySettings
from proxies.envoy.accounting import extproc_python
from proxies.runtime import get_runtime
from server.launcher import ServerHandle
from tests.runtimes import on_free_ports, stream

pytestmark = pytest.mark.skipif(extproc_python() is None,
                                reason="no ext_proc venv: python -m labs setup envoy-token-accounting")
RATE = 20.0  # tok/s: 50 ms between events, the margin the streaming checks below read
BODY = {"model": "tiny", "stream": True, "messages": [{"role": "user", "content": "count"}],
        "stream_options": {"include_usage": True},
        "lab": {"script": ACCOUNTING_SCRIPT, "tokens_per_s": RATE, "split_utf8_ms": 20.0}}


def _field(line: str, name: str) -> str | None:
    match = re.search(rf"\b{name}=(\S+)", line)
    return match.group(1) if match else None


@pytest.mark.parametrize("mode", ["STREAMED", "BUFFERED"])
def test_ext_proc_counts_every_token_of_split_events(mode: str, synthetic_server: ServerHandle) -> None:
    settings = on_free_ports(EnvoySettings(ext_proc_body_mode=mode), synthetic_server.port)
    with get_runtime("local").run_proxy(settings) as proxy:
        result = stream(proxy.url + "/v1/chat/completions", BODY)
        line = proxy.wait_access_log(1)[-1]
    usage = (result.usage or {}).get("completion_tokens")
    assert result.outcome == "complete" and result.saw_done and isinstance(usage, int), result.error
    assert _field(line, "counted") == str(usage), line
    split = int(_field(line, "split_events") or 0)
    assert result.ttft_s is not None and result.e2e_s is not None
    interval = 1.0 / RATE
    if mode == "STREAMED":
        # Precondition: events really came split across chunks, and the processor joined them.
        assert split >= 1, line
        # It streams: the first token within a few intervals, the events in reads of their own.
        assert result.ttft_s < 4 * interval, result.ttft_s
        assert result.bursts >= 0.75 * result.content_events, result.content_reads
    else:
        # BUFFERED hands the processor one body: nothing to join, and the client gets one lump.
        assert split == 0, line
        assert result.e2e_s - result.ttft_s < 2 * interval, (result.ttft_s, result.e2e_s)
        assert result.ttft_s > 0.5 * result.content_events * interval
