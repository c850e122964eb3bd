"""The measuring client against the fake upstream, which fails the way each hop makes streams fail.

Margins come from the fake's pacing (n events, `interval` apart), never tight absolute times:
the tests share two cores with everything else.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from labs.client import measure_many, measure_stream, run_many
from labs.client.results import StreamResult
from labs.client.sse import SSEParser, classify
from labs.fakes.shapes import script
from labs.fakes.upstream import FakeUpstream
from tests.labs.conftest import BODY


def measure(upstream: FakeUpstream, path: str, **options) -> StreamResult:
    options.setdefault("read_timeout_s", 5.0)
    options.setdefault("total_timeout_s", 10.0)
    return asyncio.run(measure_stream(upstream.url(path), BODY, **options))


def test_paced_stream_is_one_burst_per_event(upstream: FakeUpstream) -> None:
    n, interval = 20, 0.02
    r = measure(upstream, f"/paced?n={n}&interval={interval}")
    s = r.summary(script=script(n))
    assert r.outcome == "complete" and r.status == 200 and r.saw_done
    assert s["content_events"] == n and s["script_match"] is True
    assert r.finish_reason == "stop"
    # the first token is written one interval after the headers
    assert interval * 0.8 <= r.ttft_s < interval + 0.25
    assert r.ttfb_s < r.ttft_s
    assert r.e2e_s >= n * interval * 0.8
    # one write per event: nearly every event has a read to itself (allow a few merges on a
    # busy machine), and the typical gap is the pacing
    assert s["bursts"] >= n * 0.75
    assert s["events_per_read_max"] <= 3
    assert interval * 0.5 <= s["gap_p50_s"] <= interval * 3
    assert s["tpot_s"] == pytest.approx((r.e2e_s - r.ttft_s) / (n - 1))
    assert r.body_complete and r.content_encoding is None


def test_lump_at_the_end_is_one_burst_and_ttft_equals_e2e(upstream: FakeUpstream) -> None:
    n, interval = 20, 0.01
    r = measure(upstream, f"/lump?n={n}&interval={interval}")
    s = r.summary()
    assert r.outcome == "complete"
    assert s["content_events"] == n
    assert s["bursts"] == 1 and s["events_per_read_max"] == n
    assert r.ttft_s >= n * interval * 0.8
    assert r.e2e_s - r.ttft_s < interval  # everything came in one read
    assert s["gap_max_s"] == 0.0


def test_close_without_done_is_truncated(upstream: FakeUpstream) -> None:
    r = measure(upstream, "/truncated?k=4")
    assert r.outcome == "truncated"
    assert r.status == 200 and not r.saw_done and not r.body_complete
    assert r.content_events == 4 and r.finish_reason is None
    assert r.end_s >= r.e2e_s  # when the FIN was seen, not the last byte


def test_nginx_504_page_is_an_http_error(upstream: FakeUpstream) -> None:
    r = measure(upstream, "/gateway-timeout?delay=0.05")
    assert r.outcome == "http-error" and r.status == 504
    assert "504 Gateway Time-out" in (r.body_snippet or "")
    assert r.error.startswith("HTTP 504")
    assert r.headers["content-type"] == "text/html" and r.content_events == 0
    assert r.ttfb_s >= 0.04


def test_gzip_with_sync_flush_still_streams(upstream: FakeUpstream) -> None:
    n, interval = 10, 0.02
    r = measure(upstream, f"/gzip?n={n}&interval={interval}")
    s = r.summary(script=script(n))
    assert r.outcome == "complete" and r.content_encoding == "gzip"
    assert s["script_match"] and s["bursts"] >= n * 0.75
    assert r.wire_bytes > 0 and r.body_bytes > 0


def test_gzip_whole_body_is_decoded(upstream: FakeUpstream) -> None:
    r = measure(upstream, "/gzip-lump?n=10")
    assert r.outcome == "complete" and r.content_encoding == "gzip"
    assert r.text == script(10) and r.bursts == 1
    assert r.body_bytes > r.wire_bytes  # SSE compresses well


def test_no_accept_encoding_header_when_none(upstream: FakeUpstream) -> None:
    # the upstream ignores the header; this checks the option is accepted and harmless
    r = measure(upstream, "/paced?n=2&interval=0.001", accept_encoding=None)
    assert r.outcome == "complete"


def test_in_band_error(upstream: FakeUpstream) -> None:
    r = measure(upstream, "/error?k=3")
    assert r.outcome == "error-in-band" and r.error == "engine failed"
    assert r.content_events == 3 and r.saw_done
    assert [e.kind for e in r.events][-2:] == ["error", "done"]


@pytest.mark.parametrize("how", ["fin", "rst"])
def test_closed_before_headers_is_a_reset(upstream: FakeUpstream, how: str) -> None:
    r = measure(upstream, "/close-early" + ("?rst=1" if how == "rst" else ""))
    assert r.outcome == "reset" and r.status is None
    assert ("before the response headers" in r.error) if how == "fin" else ("Reset" in r.error)


def test_rst_is_a_reset(upstream: FakeUpstream) -> None:
    r = measure(upstream, "/rst?k=3&delay=0.05")
    assert r.outcome == "reset"
    assert "ConnectionResetError" in (r.error or "")
    assert r.status == 200


def test_read_timeout_on_silence(upstream: FakeUpstream) -> None:
    rt = 0.2
    started = time.perf_counter()
    r = measure(upstream, "/silence?k=2&silence=3", read_timeout_s=rt)
    assert r.outcome == "timeout" and "read timeout" in r.error
    assert r.content_events == 2
    assert r.end_s - r.e2e_s >= rt * 0.9  # the silence the client sat through
    assert time.perf_counter() - started < 2.0  # gave up long before the silence ended


def test_read_timeout_before_headers(upstream: FakeUpstream) -> None:
    r = measure(upstream, "/silence?before_headers=1&silence=3", read_timeout_s=0.15)
    assert r.outcome == "timeout" and r.status is None and r.ttfb_s is None


def test_total_deadline(upstream: FakeUpstream) -> None:
    # heartbeats keep the read timeout from firing; the total deadline still ends it
    r = measure(upstream, "/paced?n=100&interval=0.02", read_timeout_s=1.0, total_timeout_s=0.3)
    assert r.outcome == "timeout" and "deadline" in r.error
    assert 0 < r.content_events < 100


def test_close_delimited_http10_body(upstream: FakeUpstream) -> None:
    r = measure(upstream, "/http10?n=5&interval=0.01")
    assert r.outcome == "complete" and r.http_version == "1.0"
    assert r.text == script(5) and r.body_complete


def test_heartbeats_are_counted_and_not_content(upstream: FakeUpstream) -> None:
    r = measure(upstream, "/paced?n=10&interval=0.005&heartbeat_every=2")
    assert r.outcome == "complete" and r.heartbeats == 5
    assert r.content_events == 10
    assert sum(e.kind == "comment" for e in r.events) == 5


def test_stamps_give_hop_delay(upstream: FakeUpstream) -> None:
    r = measure(upstream, "/paced?n=10&interval=0.005&stamp=1")
    s = r.summary()
    assert len(r.hop_delays) >= 10
    # same machine, loopback: the stamp-to-receive delay is small and not negative beyond
    # clock-read jitter
    assert -0.01 < s["hop_p50_s"] < 0.5 and s["hop_max_s"] < 1.0


def test_event_held_back_by_one(upstream: FakeUpstream) -> None:
    n, interval = 5, 0.05
    r = measure(upstream, f"/holdback?n={n}&interval={interval}")
    assert r.outcome == "complete" and r.text == script(n)
    # each event is dispatched only when the next write brings its final newline
    assert r.ttft_s >= interval * 0.8
    assert r.ttfb_s < interval * 0.8


def test_crlf_split_across_reads(upstream: FakeUpstream) -> None:
    r = measure(upstream, "/crlf")
    assert r.outcome == "complete" and r.text == "a" and r.heartbeats == 1


def test_read_body_mode_dispatches_everything_at_the_end(upstream: FakeUpstream) -> None:
    n, interval = 10, 0.02
    r = measure(upstream, f"/paced?n={n}&interval={interval}", mode="read-body")
    s = r.summary()
    assert r.outcome == "complete" and r.text == script(n)
    assert r.ttft_s == r.e2e_s and s["bursts"] == 1
    assert r.reads >= n * 0.75  # the socket still saw the stream arrive in pieces
    assert r.ttfb_s < interval * 2


def test_disconnect_after_events(upstream: FakeUpstream) -> None:
    r = measure(upstream, "/paced?n=20&interval=0.01", disconnect_after_events=5)
    assert r.outcome == "disconnected"
    assert r.content_events == 5 and r.disconnect_s is not None
    assert r.disconnect_s >= r.ttft_s


def test_connection_refused() -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    r = asyncio.run(measure_stream(f"http://127.0.0.1:{port}/v1/chat/completions", BODY))
    assert r.outcome == "connect-error" and "ConnectionRefused" in r.error


def test_result_is_json_serialisable(upstream: FakeUpstream) -> None:
    r = measure(upstream, "/paced?n=3&interval=0.001&stamp=1")
    d = json.loads(json.dumps(r.to_dict()))
    assert d["summary"]["content_events"] == 3
    back = StreamResult.from_dict(d)
    assert back.summary() == r.summary()


def test_measure_many_200_streams_within_deadline(upstream: FakeUpstream) -> None:
    n_streams, n, interval = 200, 10, 0.02
    started = time.perf_counter()
    batch = asyncio.run(run_many(upstream.url(f"/paced?n={n}&interval={interval}"), [BODY] * n_streams,
                                 concurrency=n_streams, deadline_s=15.0, read_timeout_s=5.0))
    wall = time.perf_counter() - started
    agg = batch.aggregate()
    assert agg["outcomes"] == {"complete": n_streams}
    assert agg["content_events"] == n_streams * n
    assert wall < 15.0
    assert agg["client_cpu_s"] is not None


def test_measure_many_bound_and_deadline(upstream: FakeUpstream) -> None:
    # 4 streams of ~0.5 s, 2 at a time, 0.7 s deadline: the first pair completes, the second
    # pair is cut at the deadline (open streams and unstarted ones both report timeout)
    results = asyncio.run(measure_many(upstream.url("/paced?n=25&interval=0.02"), [BODY] * 4,
                                       concurrency=2, deadline_s=0.8))
    outcomes = [r.outcome for r in results]
    assert outcomes[:2] == ["complete", "complete"]
    assert outcomes[2:] == ["timeout", "timeout"]


# ---- the parser on its own ------------------------------------------------------------------


def test_parser_handles_split_lines_and_comments() -> None:
    p = SSEParser()
    assert p.feed(b"data: {\"a\"") == []
    assert p.feed(b": 1}\n") == []
    assert p.feed(b"\n: ping\n") == [("data", '{"a": 1}', None), ("comment", "ping", None)]
    assert p.feed(b"event: x\ndata: l1\ndata: l2\r\n\r\n") == [("data", "l1\nl2", "x")]
    assert p.feed(b"data: tail\n") == [] and p.pending


def test_parser_keeps_utf8_split_across_reads_and_replaces_invalid_bytes() -> None:
    frame = 'data: {"choices":[{"delta":{"content":"🦩"}}]}\n\n'.encode()
    cut = frame.index("🦩".encode()) + 2  # inside the 4-byte sequence
    p = SSEParser()
    items = p.feed(frame[:cut]) + p.feed(frame[cut:])
    assert classify(items[0][1])[1] == "🦩"
    assert SSEParser().feed(b"data: \xff\xfe ok\n\n")[0][1] == "\ufffd\ufffd ok"


def test_deflate_accepts_zlib_and_raw() -> None:
    import zlib

    from labs.client.protocol import decoder_for

    data = b"data: [DONE]\n\n" * 3
    raw = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    for compressed in (zlib.compress(data), raw.compress(data) + raw.flush()):
        d = decoder_for("deflate")
        assert b"".join(d.decompress(compressed[i:i + 1]) for i in range(len(compressed))) == data


def test_classify_kinds() -> None:
    assert classify("[DONE]")[0] == "done"
    assert classify('{"choices":[{"delta":{"role":"assistant","content":""}}]}')[0] == "role"
    assert classify('{"choices":[{"delta":{"content":"x"},"finish_reason":null}]}')[:2] == ("content", "x")
    assert classify('{"choices":[{"delta":{},"finish_reason":"stop"}]}')[2] == "stop"
    assert classify('{"choices":[],"usage":{"total_tokens":3}}')[0] == "usage"
    assert classify('{"error":{"message":"m"}}')[:2] == ("error", "m")
    assert classify('{"choices":[{"text":"y"}],"sent_at":1.5}')[::3] == ("content", 1.5)
    assert classify("not json")[0] == "other"


def test_a_write_to_a_connection_the_server_already_closed_is_a_reset() -> None:
    """uvloop raises RuntimeError when writing to a closed transport: one stream is a reset,
    never an exception that sinks a whole batch."""
    from labs.client.protocol import Exchange, Options
    from labs.client.results import StreamResult

    class ClosedTransport:
        def write(self, data: bytes) -> None:
            raise RuntimeError("unable to perform operation on <TCPTransport closed=True>")

        def close(self) -> None:
            pass

        def is_closing(self) -> bool:
            return True

    async def scenario() -> StreamResult:
        result = StreamResult()
        exchange = Exchange(result, Options(), deadline=float("inf"))
        exchange.connection_made(ClosedTransport())  # type: ignore[arg-type]
        exchange.send(b"POST / HTTP/1.1\r\n\r\n")
        await asyncio.wait_for(exchange.done, 1)
        return result

    result = asyncio.run(scenario())
    assert result.outcome == "reset"
    assert "RuntimeError" in (result.error or "")


def test_through_a_forward_proxy_the_request_names_the_origin_in_absolute_form() -> None:
    from labs.client.protocol import Options, Target, request_bytes
    origin = Target.parse("http://127.0.0.1:8000/v1/chat/completions")
    direct = request_bytes(origin, b"{}", Options())
    proxied = request_bytes(origin, b"{}", Options(proxy="http://127.0.0.1:8118"))
    assert direct.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert proxied.startswith(b"POST http://127.0.0.1:8000/v1/chat/completions HTTP/1.1\r\n")
    assert b"host: 127.0.0.1:8000\r\n" in proxied.lower()  # the origin's, not the proxy's
    # An https origin would need a CONNECT tunnel, which the client does not make: it says so.
    with pytest.raises(ValueError, match="CONNECT"):
        asyncio.run(measure_stream("https://127.0.0.1:8443/v1/chat/completions", BODY,
                                   proxy="http://127.0.0.1:8118"))
