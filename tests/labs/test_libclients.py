"""The real client libraries as measured clients (labs/client/libraries.py), against the fake upstream:
each delivers the whole stream and times every event against the server's stamp; the two
per-read parsers show their faults only when reads cut events (the relay's job, in the guards)."""
from __future__ import annotations

import pytest

from labs.client import libraries as libclients
from labs.fakes.upstream import FakeUpstream
from tests.labs.conftest import BODY

STAMPED = "/v1/chat/completions?n=12&interval=0.02&stamp=1"


# The Anthropic SDK speaks Messages only (tests/labs/test_anthropic_client.py); the rest, chat.
CHAT_LIBRARIES = sorted(set(libclients.LIBRARIES) - {"anthropic"})


@pytest.mark.parametrize("library", CHAT_LIBRARIES)
def test_every_library_reads_a_whole_stamped_stream(upstream: FakeUpstream, library: str) -> None:
    result = libclients.measure_sync(library, upstream.url(STAMPED), BODY)
    assert result.outcome == "complete" and result.status == 200, result.error
    assert result.content_events == 12 and result.finish_reason == "stop"
    assert len(result.hop_delays) >= 12 and all(0 <= hop < 5 for hop in result.hop_delays)
    assert result.reads >= 1 and result.ttft_s is not None and result.ttft_s <= result.e2e_s


def test_an_unknown_library_is_named() -> None:
    with pytest.raises(libclients.UnknownLibrary, match="known: requests-iter-lines"):
        libclients.measure_sync("urllib3", "http://127.0.0.1:9/v1/chat/completions", BODY)


def test_a_failed_connection_is_a_measurement_not_a_crash() -> None:
    result = libclients.measure_sync("httpx-iter-lines", "http://127.0.0.1:9/v1/chat/completions", BODY)
    assert result.outcome == "truncated" and "ConnectError" in (result.error or "")


def test_node_fetch_reports_undicis_body_timeout_as_node_does(upstream: FakeUpstream) -> None:
    # Two events, then 3 s of silence: a 1 s bodyTimeout cuts it (undici's timers tick about once
    # a second, so the cut comes 1-2 s in), Node's default (300 s) does not.
    silent = upstream.url("/silence?k=2&silence=3.0")
    cut = libclients.measure_sync("node-fetch", silent, BODY, body_timeout_s=1.0)
    assert cut.outcome == "timeout" and cut.content_events == 2 and cut.status == 200
    assert cut.error == "TypeError: terminated (UND_ERR_BODY_TIMEOUT, Body Timeout Error)"
    assert cut.e2e_s is not None and 1.0 <= cut.e2e_s < 2.9
    waited = libclients.measure_sync("node-fetch", silent, BODY)
    assert waited.content_events == 2 and "UND_ERR_BODY_TIMEOUT" not in (waited.error or "")
    assert waited.e2e_s is not None and waited.e2e_s >= 3.0


def test_a_library_refuses_an_option_it_does_not_take() -> None:
    with pytest.raises(libclients.UnknownLibrary, match="takes body_timeout_s"):
        libclients.measure_sync("node-fetch", "http://127.0.0.1:9/v1/chat/completions", BODY, bodytimeout=1)
    with pytest.raises(libclients.UnknownLibrary, match="takes no options"):
        libclients.measure_sync("httpx-iter-lines", "http://127.0.0.1:9/v1/chat/completions", BODY, body_timeout_s=1)
