"""The derived metrics on hand-made event lists: every definition of docs/metrics.md, by example."""

from __future__ import annotations

import json

import pytest

from labs.client.results import Event, StreamResult, aggregate, percentile


def stream(times_reads: list[tuple[float, int]], **fields) -> StreamResult:
    """A result whose content events arrive at the given (time, read) pairs."""
    events = [Event(0.001, 1, "role")]
    events += [Event(t, read, "content", f"w{i} ") for i, (t, read) in enumerate(times_reads)]
    r = StreamResult(status=200, outcome="complete", events=events, saw_done=True,
                     reads=max([1] + [read for _, read in times_reads]), **fields)
    r.text = "".join(e.text for e in r.content)
    if times_reads:
        r.ttft_s = times_reads[0][0]
        r.e2e_s = fields.get("e2e_s", times_reads[-1][0])
    return r


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 50) == 50.0
    assert percentile(values, 90) == 90.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([5.0], 99) == 5.0
    assert percentile([], 50) is None
    # always an observed value, never an interpolation
    assert percentile([0.1, 0.2, 0.9, 1.0], 60) in (0.1, 0.2, 0.9, 1.0)


def test_gaps_tpot_and_bursts_for_a_streamed_response() -> None:
    # 5 events, 100 ms apart, each in its own read
    r = stream([(0.1 * (i + 1), i + 2) for i in range(5)])
    s = r.summary()
    assert r.gaps == pytest.approx([0.1] * 4)
    assert s["gap_p50_s"] == pytest.approx(0.1) and s["gap_max_s"] == pytest.approx(0.1)
    assert s["tpot_s"] == pytest.approx((0.5 - 0.1) / 4)
    assert s["bursts"] == 5 and s["events_per_read_mean"] == 1 and s["events_per_read_max"] == 1
    assert s["content_events"] == 5


def test_coalescing_hop_shows_in_events_per_read_not_in_gaps_alone() -> None:
    # 6 events in 2 reads of 3: gaps are mostly 0, TTFT is late
    r = stream([(0.3, 2), (0.3, 2), (0.3, 2), (0.6, 3), (0.6, 3), (0.6, 3)])
    s = r.summary()
    assert s["bursts"] == 2 and s["events_per_read_mean"] == 3 and s["events_per_read_max"] == 3
    assert s["gap_p50_s"] == 0.0 and s["gap_max_s"] == pytest.approx(0.3)
    assert s["ttft_s"] == 0.3


def test_tpot_uses_e2e_last_byte() -> None:
    # E2E is the last byte (after [DONE]), not the last content event
    r = stream([(0.1, 2), (0.2, 3), (0.3, 4)], e2e_s=0.5)
    assert r.tpot_s == pytest.approx((0.5 - 0.1) / 2)


def test_no_tpot_or_gaps_with_fewer_than_two_events() -> None:
    r = stream([(0.2, 2)])
    s = r.summary()
    assert s["tpot_s"] is None and s["gap_p50_s"] is None and s["gap_max_s"] is None
    assert stream([]).summary()["bursts"] == 0


def test_role_and_empty_deltas_do_not_count() -> None:
    r = stream([(0.2, 2)])
    r.events.insert(1, Event(0.05, 1, "other", ""))
    assert r.content_events == 1 and r.ttft_s == 0.2


def test_hop_delay_percentiles_only_when_stamped() -> None:
    r = stream([(0.1, 2), (0.2, 3)])
    assert r.summary()["hop_p50_s"] is None
    for e, hop in zip(r.events, [0.001, 0.002, 0.010]):
        e.hop_s = hop
    s = r.summary()
    assert s["hop_p50_s"] == 0.002 and s["hop_p99_s"] == 0.010 and s["hop_max_s"] == 0.010


def test_replacement_chars_counted() -> None:
    r = StreamResult(text="ok \ufffd\ufffd and \ufffd")
    assert r.replacement_chars == 3 and r.summary()["replacement_chars"] == 3


@pytest.mark.parametrize(
    ("text", "stops", "leak"),
    [
        pytest.param("Hello world", ["END"], None, id="no-leak"),
        pytest.param("Hello EN", ["END"], "EN", id="prefix-at-end"),
        pytest.param("Hello E", "END", "E", id="one-char-prefix"),
        pytest.param("Hello END more", ["END"], "END", id="whole-stop-inside"),
        pytest.param("Hello ENx", ["END"], None, id="prefix-not-at-end"),
        pytest.param("a\n", ["\n\n", "###"], "\n", id="second-line-of-list"),
        pytest.param("anything", None, None, id="no-stops"),
    ],
)
def test_stop_leak(text: str, stops, leak) -> None:
    assert StreamResult(text=text).stop_leak(stops) == leak


def test_script_match() -> None:
    r = StreamResult(text="exact text")
    assert r.script_match("exact text") is True
    assert r.script_match("exact text ") is False
    assert r.script_match(None) is None
    assert r.summary(script="exact text")["script_match"] is True


def test_summary_keys_are_stable() -> None:
    full = stream([(0.1, 2), (0.2, 3)]).summary()
    empty = StreamResult(outcome="reset").summary()
    assert list(full) == list(empty)
    json.dumps(full)


def test_round_trip_through_json() -> None:
    r = stream([(0.1, 2), (0.2, 2)], headers={"content-type": "text/event-stream"})
    back = StreamResult.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back == r


def test_aggregate_counts_outcomes_and_pools_gaps() -> None:
    a = stream([(0.1, 2), (0.2, 3)])
    b = stream([(1.1, 2), (1.4, 3)])
    c = StreamResult(outcome="http-error", status=504)
    agg = aggregate([a, b, c], client_cpu_s=0.004)
    assert agg["streams"] == 3
    assert agg["outcomes"] == {"complete": 2, "http-error": 1}
    assert agg["statuses"] == {"200": 2, "504": 1}
    assert agg["ttft_p50_s"] == 0.1 and agg["ttft_max_s"] == 1.1
    assert agg["gap_max_s"] == pytest.approx(0.3) and agg["gap_p50_s"] == pytest.approx(0.1)
    assert agg["client_cpu_per_event_us"] == pytest.approx(0.004 / 6 * 1e6)


def test_percentile_band_says_how_precisely_the_samples_fix_a_percentile() -> None:
    from labs.client.results import percentile_band

    values = [float(v) for v in range(1, 301)]
    # p99 of 300: rank 297 +- 2 x sqrt(300 x 0.99 x 0.01) = 3.4 ranks: ranks 293 .. 300.
    assert percentile_band(values, 99) == [293.0, 300.0]
    # p50 of 300: rank 150 +- 17.3 ranks.
    assert percentile_band(values, 50) == [132.0, 168.0]
    assert percentile_band([5.0], 99) == [5.0, 5.0] and percentile_band([], 50) is None
