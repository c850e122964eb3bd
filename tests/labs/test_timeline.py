"""The timeline PNG: drawn from hand-made results, for each shape a lab produces."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pytest

from labs.client.results import Event, StreamResult
from labs.scenario.timeline import outcome_label, plot_timeline

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def streamed(n: int = 20, interval: float = 0.1, start: float = 0.0) -> StreamResult:
    events = [Event(interval * (i + 1), i + 2, "content", "w ") for i in range(n)]
    events.append(Event(interval * n, n + 1, "done"))
    return StreamResult(status=200, outcome="complete", events=events, ttfb_s=0.001,
                        ttft_s=interval, e2e_s=interval * n, reads=n + 1, saw_done=True,
                        start_s=start)


def lumped(n: int = 20, at: float = 2.0) -> StreamResult:
    events = [Event(at, 1, "content", "w ") for _ in range(n)] + [Event(at, 1, "done")]
    return StreamResult(status=200, outcome="complete", events=events, ttfb_s=at, ttft_s=at,
                        e2e_s=at, reads=1, saw_done=True)


def truncated() -> StreamResult:
    r = streamed(5)
    r.events.pop()
    r.outcome, r.saw_done = "truncated", False
    return r


def gateway_timeout() -> StreamResult:
    return StreamResult(status=504, outcome="http-error", ttfb_s=1.0, e2e_s=1.0, error="HTTP 504",
                        body_snippet="<html><head><title>504 Gateway Time-out</title></head></html>")


def is_png(path: Path) -> bool:
    return path.read_bytes()[:8] == PNG_MAGIC and path.stat().st_size > 10_000


def test_uses_the_agg_backend() -> None:
    assert matplotlib.get_backend().lower() == "agg"


def test_single_stream_panels(tmp_path: Path) -> None:
    out = plot_timeline({"broken": [lumped()], "fixed": [streamed()]}, tmp_path / "a" / "timeline.png",
                        "nginx-buffering", "proxy_buffering on vs off")
    assert out.exists() and is_png(out)


def test_failures_without_content(tmp_path: Path) -> None:
    out = plot_timeline({"broken": [gateway_timeout()], "fixed": [truncated()]}, tmp_path / "t.png",
                        "nginx-read-timeout")
    assert is_png(out)


def test_many_streams_one_row_each(tmp_path: Path) -> None:
    broken = [streamed(10, 0.05, start=0.0 if i < 32 else 1.0) for i in range(50)]
    broken[3] = truncated()
    out = plot_timeline({"broken": broken, "fixed": [streamed(10, 0.05) for _ in range(50)]},
                        tmp_path / "many.png", "haproxy-maxconn", "50 concurrent streams")
    assert is_png(out)


def test_no_variants_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        plot_timeline({}, tmp_path / "x.png", "nothing")


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        pytest.param(streamed(), "complete: saw [DONE]", id="complete"),
        pytest.param(truncated(), "truncated: no [DONE]", id="truncated"),
        pytest.param(gateway_timeout(), "HTTP 504: Gateway Time-out", id="http-504"),
    ],
)
def test_outcome_labels(result: StreamResult, expected: str) -> None:
    assert outcome_label(result) == expected
