"""The HTTP interface against a real uvicorn on loopback (synthetic engine), driven with httpx."""
from __future__ import annotations

import gzip
import time

import httpx
import pytest

from server.launcher import running_server
from server.processes import wait_until

JAPANESE = "鬱蒼とした森で𠮷野家の🦩と🧑🏿‍🚀が踊る"


def test_stream_is_shaped_as_openai_sends_it(api):
    result = api.stream(max_tokens=6, stream_options={"include_usage": True})
    assert result.status == 200 and result.saw_done and result.error is None
    first, *middle, final, usage = result.chunks
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(set(c["choices"][0]["delta"]) == {"content"} for c in middle)
    assert final["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "length"}
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 6
    assert usage["usage"]["total_tokens"] == usage["usage"]["prompt_tokens"] + 6
    for chunk in result.chunks:
        assert chunk["object"] == "chat.completion.chunk"
        assert (chunk["id"], chunk["created"], chunk["model"], chunk["system_fingerprint"]) == (
            first["id"], first["created"], "tiny", first["system_fingerprint"])
    assert result.raw.endswith(b"data: [DONE]\n\n")


def test_streaming_headers(api):
    result = api.stream(max_tokens=1)
    assert result.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert result.headers["cache-control"] == "no-cache"
    assert result.headers["x-accel-buffering"] == "no"


def test_streaming_headers_can_be_omitted_per_request(api):
    result = api.stream(max_tokens=1, lab={"omit_headers": ["X-Accel-Buffering", "cache-control"]})
    assert "x-accel-buffering" not in result.headers and "cache-control" not in result.headers
    assert result.saw_done


def test_no_usage_chunk_unless_asked(api):
    result = api.stream(max_tokens=3)
    assert all("usage" not in c for c in result.chunks)


def test_non_streaming_returns_one_completion(api):
    response = api.complete(max_tokens=5)
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["choices"][0]["message"]["role"] == "assistant"
    assert body["usage"]["completion_tokens"] == 5


def test_script_is_emitted_exactly_with_finish_stop(api):
    result = api.stream(lab={"script": JAPANESE})
    assert result.text == JAPANESE and result.finish_reason == "stop"
    assert not any("\ufffd" in c["choices"][0]["delta"]["content"] for c in result.content_chunks)


def test_naive_detokenizer_per_request_shows_replacement_characters(api):
    result = api.stream(lab={"script": JAPANESE, "detokenizer": "naive"})
    assert "\ufffd" in result.text


def test_stop_spanning_tokens_never_reaches_the_client(api):
    result = api.stream(lab={"script": "The answer is 42.<|stop|> and more"}, stop=["<|stop|>"])
    assert result.text == "The answer is 42." and result.finish_reason == "stop"


def test_without_holdback_the_start_of_the_stop_leaks(api):
    result = api.stream(lab={"script": "The answer is 42.<|stop|> and more", "stop_holdback": False},
                        stop=["<|stop|>"])
    assert result.text.startswith("The answer is 42.<") and result.finish_reason == "stop"


def test_partial_stop_at_the_end_is_flushed(api):
    result = api.stream(lab={"script": "ends with <|st"}, stop=["<|stop|>"])
    assert result.text == "ends with <|st" and result.finish_reason == "stop"


def test_headers_delay_is_silence_before_the_headers(api):
    started = time.monotonic()
    with api.client.stream("POST", "/v1/chat/completions",
                           json=api.body(stream=True, max_tokens=1,
                                         lab={"headers_delay_s": 0.4})) as response:
        headers_after = time.monotonic() - started
        response.read()
    assert headers_after >= 0.4


def test_first_token_delay_is_silence_after_the_headers(api):
    silence_s = 0.5
    started = time.monotonic()
    with api.client.stream("POST", "/v1/chat/completions",
                           json=api.body(stream=True, max_tokens=2,
                                         lab={"first_token_delay_s": silence_s})) as response:
        headers_after = time.monotonic() - started
        response.read()
        first_token_after = time.monotonic() - started
    # The headers leave at once (well inside the silence), the tokens only after it.
    assert headers_after < silence_s / 2, headers_after
    assert first_token_after >= silence_s, first_token_after


def _first_body_bytes(api, silence_s: float, lab: dict) -> tuple[bytes, float]:
    """The first piece of a stream's body and when it came, the first token due after a silence."""
    started = time.monotonic()
    with api.client.stream("POST", "/v1/chat/completions",
                           json=api.body(stream=True, max_tokens=2, lab={
                               "first_token_delay_s": silence_s, "heartbeat_s": 0, **lab})) as response:
        first = next(response.iter_raw())
        return first, time.monotonic() - started


def test_role_chunk_with_the_first_token_leaves_the_headers_alone_through_the_silence(api):
    silence_s = 0.5
    at_headers, at_headers_s = _first_body_bytes(api, silence_s, {})
    assert b'"role":"assistant"' in at_headers and at_headers_s < silence_s / 2, at_headers_s
    vllm_style, vllm_style_s = _first_body_bytes(api, silence_s, {"role_chunk": "with-first-token"})
    assert vllm_style.startswith(b"data: ") and b'"role":"assistant"' in vllm_style
    assert vllm_style_s >= silence_s, vllm_style_s  # nothing of the body before the first token
    reply = api.stream(max_tokens=3, lab={"role_chunk": "with-first-token"})
    assert reply.chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert reply.saw_done and len(reply.content_chunks) == 3


def test_hello_comment_leaves_right_after_the_headers(api):
    silence_s = 0.5
    hello, hello_s = _first_body_bytes(api, silence_s, {"role_chunk": "with-first-token", "hello": True})
    assert hello == b": ok\n\n" or hello.startswith(b": ok\n\n"), hello
    assert hello_s < silence_s / 2, hello_s
    reply = api.stream(max_tokens=2, lab={"hello": True})
    assert reply.raw.startswith(b": ok\n\ndata: ") and reply.heartbeats == 1 and reply.saw_done


def test_role_chunk_still_comes_first_when_the_stream_fails_before_a_token(api):
    reply = api.stream(max_tokens=3, lab={"role_chunk": "with-first-token", "error_after_tokens": 0})
    assert reply.chunks and reply.chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert reply.error_object is not None and reply.saw_done


def test_tokens_are_paced(api):
    result = api.stream(max_tokens=10, lab={"tokens_per_s": 50})
    assert len(result.content_chunks) >= 8
    assert sum(result.gaps) >= 0.14  # first to last content event
    assert max(result.gaps) < 0.2


def test_heartbeats_fill_silences(api):
    before = api.metric("streamlab_heartbeats_total")
    result = api.stream(max_tokens=2, lab={"first_token_delay_s": 0.6, "heartbeat_s": 0.1})
    assert result.heartbeats >= 3 and result.saw_done
    assert api.metric("streamlab_heartbeats_total") - before >= 3


def test_no_heartbeats_when_switched_off(api):
    result = api.stream(max_tokens=2, lab={"first_token_delay_s": 0.3, "heartbeat_s": 0})
    assert result.heartbeats == 0 and result.saw_done


def test_stall_timeout_ends_the_stream_in_band(api):
    before = api.metric('streamlab_requests_aborted_total{reason="stall"}')
    result = api.stream(max_tokens=5, lab={"first_token_delay_s": 3, "stall_timeout_s": 0.3})
    assert result.error_object is not None and result.error_object["type"] == "timeout"
    assert result.saw_done
    assert api.metric('streamlab_requests_aborted_total{reason="stall"}') == before + 1


def test_error_after_tokens_is_in_band_then_done(api):
    before = api.metric("streamlab_inband_errors_total")
    result = api.stream(max_tokens=20, lab={"error_after_tokens": 3})
    assert len(result.content_chunks) == 3
    assert result.error_object is not None and result.error_object["type"] == "server_error"
    assert result.saw_done and result.finish_reason is None
    assert api.metric("streamlab_inband_errors_total") == before + 1


def test_error_mode_silent_close_ends_without_done(api):
    result = api.stream(max_tokens=20, lab={"error_after_tokens": 3, "error_mode": "silent-close"})
    assert len(result.content_chunks) == 3 and result.body_error is None
    assert not result.saw_done and result.error is None


def test_error_mode_fake_done_looks_like_success(api):
    result = api.stream(max_tokens=20, lab={"error_after_tokens": 3, "error_mode": "fake-done"})
    assert result.saw_done and result.error is None and result.finish_reason == "stop"


def test_abort_after_tokens_drops_the_connection(api):
    result = api.stream(max_tokens=20, lab={"abort_after_tokens": 4})
    assert len(result.content_chunks) == 4
    assert isinstance(result.body_error, httpx.RemoteProtocolError)
    assert not result.saw_done and result.finish_reason is None


def test_stamps_carry_the_server_send_time(api):
    before = time.time()
    result = api.stream(max_tokens=5, lab={"stamp": True})
    after = time.time()
    assert all(before <= c["sent_at"] <= after for c in result.chunks)


def test_coalescing_puts_several_frames_in_one_write(api):
    writes = api.metric("streamlab_stream_writes_total")
    frames = api.metric("streamlab_sse_frames_total")
    result = api.stream(max_tokens=30, lab={"tokens_per_s": 300, "coalesce_ms": 50, "stamp": True})
    assert result.saw_done and len(result.content_chunks) == 30
    wrote = api.metric("streamlab_stream_writes_total") - writes
    framed = api.metric("streamlab_sse_frames_total") - frames
    assert framed >= 33 and wrote <= framed / 3
    # Stamps are the write time: the frames of one write share it.
    assert len({c["sent_at"] for c in result.chunks}) <= wrote


def test_health_models_and_metrics(api):
    health = api.client.get("/healthz")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    models = api.client.get("/v1/models").json()
    assert models["object"] == "list" and models["data"][0]["id"] == "tiny"
    text = api.client.get("/metrics").text
    for name in ("streamlab_active_streams", "streamlab_queued_requests", "streamlab_slots_in_use",
                 "streamlab_tokens_generated_total", "streamlab_tokens_after_disconnect_total",
                 "streamlab_requests_aborted_total", "streamlab_inband_errors_total",
                 "streamlab_stream_writes_total", "streamlab_sse_frames_total",
                 "streamlab_heartbeats_total", "process_cpu_seconds_total", "process_open_fds",
                 'streamlab_gc_pause_seconds_count{generation="2"}'):
        assert name in text
    # The soft open-file limit in force: raised to the hard limit at start-up.
    import resource

    assert api.metric("process_max_fds") == resource.getrlimit(resource.RLIMIT_NOFILE)[1]


def test_each_pass_of_the_cyclic_collector_is_timed() -> None:
    import gc

    from server import metrics

    def observed() -> tuple[float, float]:
        sample = metrics.REGISTRY.get_sample_value
        return (sample("streamlab_gc_pause_seconds_sum", {"generation": "2"}) or 0.0,
                sample("streamlab_gc_pause_seconds_count", {"generation": "2"}) or 0.0)

    sum0, count0 = observed()
    on_pass = metrics.time_collector_passes()
    try:
        gc.collect()  # one full pass: generation 2
    finally:
        gc.callbacks.remove(on_pass)
    sum1, count1 = observed()
    assert count1 == count0 + 1 and sum1 > sum0
    gc.collect()  # no longer observed
    assert observed() == (sum1, count1)


@pytest.fixture(scope="module")
def one_slot_gzip_server():
    """One slot, one queue place, and the gzip failure mode (only for clients that accept gzip)."""
    with running_server(["--engine", "synthetic", "--slots", "1", "--max-queue", "1",
                         "--gzip-middleware"]) as handle:
        yield handle


def wait_for_metric(server, name: str, value: float, timeout_s: float = 5.0) -> None:
    wait_until(lambda: server.metrics().get(name) == value, timeout_s, interval_s=0.01,
               describe=f"{name} to reach {value}")


def slow_body(**lab):
    return {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": True,
            "max_tokens": 2, "lab": lab}


def test_full_queue_gets_429_with_retry_after_before_any_byte(one_slot_gzip_server):
    server = one_slot_gzip_server
    with httpx.Client(base_url=server.url, timeout=10) as client:
        with client.stream("POST", "/v1/chat/completions",
                           json=slow_body(first_token_delay_s=2)) as holder:
            assert holder.status_code == 200
            wait_for_metric(server, "streamlab_slots_in_use", 1)
            with client.stream("POST", "/v1/chat/completions", json=slow_body()) as queued:
                assert queued.status_code == 200
                wait_for_metric(server, "streamlab_queued_requests", 1)
                rejected = client.post("/v1/chat/completions", json=slow_body())
                assert rejected.status_code == 429
                assert int(rejected.headers["retry-after"]) >= 1
                assert rejected.json()["error"]["code"] == "queue_full"


def test_heartbeats_flow_while_waiting_for_a_slot(one_slot_gzip_server):
    server = one_slot_gzip_server
    plain = {"accept-encoding": "identity"}
    with httpx.Client(base_url=server.url, timeout=10, headers=plain) as client:
        with client.stream("POST", "/v1/chat/completions",
                           json=slow_body(first_token_delay_s=0.5)) as holder:
            wait_for_metric(server, "streamlab_slots_in_use", 1)
            with client.stream("POST", "/v1/chat/completions",
                               json=slow_body(heartbeat_s=0.1)) as queued:
                raw = b""
                for data in queued.iter_raw():
                    raw += data
                    if b'"content":"' in raw.split(b"\n\n", 1)[1]:
                        break  # the first content token: the wait is over
            holder.read()
    before_first_token = raw[:raw.rindex(b'"content":"')]
    assert before_first_token.count(b": ping\n\n") >= 2


def test_gzip_middleware_holds_the_stream_back_in_lumps(one_slot_gzip_server):
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": True,
            "max_tokens": 60, "lab": {"tokens_per_s": 300}}
    with httpx.Client(base_url=one_slot_gzip_server.url, timeout=10) as client:
        with client.stream("POST", "/v1/chat/completions", json=body,
                           headers={"accept-encoding": "gzip"}) as response:
            assert response.headers["content-encoding"] == "gzip"
            reads = list(response.iter_raw())
    assert gzip.decompress(b"".join(reads)).endswith(b"data: [DONE]\n\n")
    assert len(reads) <= 4  # 60 events over 0.2 s, yet only a gzip header and a lump or two


@pytest.fixture(scope="module")
def flags_server():
    """Failure modes set server-wide by flags (and the gzip fix), to check flags become defaults
    and that a request's `lab` overrides them."""
    with running_server(["--engine", "synthetic", "--gzip-middleware", "--gzip-exclude-sse",
                         "--omit-header", "X-Accel-Buffering", "--detokenizer", "naive",
                         "--no-stop-holdback", "--heartbeat-s", "0.1",
                         "--error-mode", "fake-done"]) as handle:
        yield handle


@pytest.fixture()
def flags_api(flags_server):
    from tests.server.conftest import Api

    with httpx.Client(base_url=flags_server.url, timeout=10) as client:
        yield Api(client, flags_server)


def test_gzip_fix_leaves_event_streams_alone(flags_api):
    response = flags_api.client.post("/v1/chat/completions", headers={"accept-encoding": "gzip"},
                                     json=flags_api.body(stream=True, max_tokens=3))
    assert "content-encoding" not in response.headers
    assert response.content.endswith(b"data: [DONE]\n\n")


def test_flags_set_the_defaults_and_lab_overrides_them(flags_api):
    broken = flags_api.stream(lab={"script": JAPANESE + "<|stop|>", "first_token_delay_s": 0.35},
                              stop=["<|stop|>"])
    assert "x-accel-buffering" not in broken.headers
    assert "\ufffd" in broken.text and broken.heartbeats >= 2
    assert "<|" in broken.text and broken.finish_reason == "stop"  # the stop leaked in part
    fixed = flags_api.stream(lab={"script": JAPANESE, "detokenizer": "incremental",
                                  "omit_headers": [], "heartbeat_s": None,
                                  "first_token_delay_s": 0.35})
    assert fixed.headers["x-accel-buffering"] == "no"
    assert fixed.text == JAPANESE and fixed.heartbeats == 0


def test_error_mode_flag_is_the_default(flags_api):
    faked = flags_api.stream(max_tokens=10, lab={"error_after_tokens": 2})
    assert faked.saw_done and faked.error is None and faked.finish_reason == "stop"
    honest = flags_api.stream(max_tokens=10, lab={"error_after_tokens": 2, "error_mode": "inband"})
    assert honest.saw_done and honest.error is not None


FD_PROBE = """
import logging, resource, sys
from server.limits import raise_fd_limit
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
print(raise_fd_limit(keep=sys.argv[1] == "keep"), hard)
"""


@pytest.mark.parametrize("keep", [True, False], ids=["keep-fd-limit", "raise-fd-limit"])
def test_fd_limit_is_raised_at_start_up_and_a_low_one_is_reported(keep):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", FD_PROBE, "keep" if keep else "raise"],
                          capture_output=True, text=True, timeout=20, check=True)
    soft, hard = (int(v) for v in done.stdout.split())
    if keep:
        assert soft == 256
        assert "WARNING open-file limit is 256" in done.stderr
    else:
        assert soft == hard
        assert "raised from 256" in done.stderr


def test_health_answers_like_vllm(api) -> None:
    reply = api.client.get("/health")
    assert reply.status_code == 200 and reply.content == b""
