"""The real client libraries as measured clients (labs/client/libraries.py), against the fake upstream:
each delivers the whole stream and times every event against the server's stamp; the two
per-read parsers show their faults only when reads cut events (the relay's job, in the guards)."""
from __future__ import annotations

import pytest

from labs.client import libraries as libclients
from labs.fakes.upstream import FakeUpstream
from tests.labs.conftest import BODY

STAMPED = "/v1/chat/completions?n=12&interval=0.02&stamp=1"


@pytest.mark.parametrize("library", sorted(libclients.LIBRARIES))
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
