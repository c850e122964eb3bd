"""Each finding kind's judge, both ways: the fault it names, the look-alike it must not name, and a
clean stream that gives no finding. Streams are built by hand (tests/labs/built_streams.py);
every test name starts with its judge's module (tests/labs/test_findings_kinds.py holds every
judge to having some).
"""
from __future__ import annotations

from typing import Any

import pytest

from labs.client.results import StreamResult
from labs.findings import (Evidence, Pacing, buffering, coalescing, compression, connection_limit, departure,
                           idle_timeout, total_timeout)
from tests.labs.built_streams import DT, clean, due, grouped, held, stream

PACE = Pacing(first_due_s=0.0, interval_s=DT)


def one(result: StreamResult, pacing: Pacing = PACE, **evidence: Any) -> Evidence:
    return Evidence([result], pacing, **evidence)


# ---- buffering -------------------------------------------------------------------------------


def test_buffering_held_to_the_end_or_late_in_lumps_is_named() -> None:
    assert buffering.judge(one(held())).fault
    lumps = stream([0.8] * 5 + [1.3] * 5 + [1.9] * 10, [1] * 5 + [2] * 5 + [3] * 10)
    verdict = buffering.judge(one(lumps))
    assert verdict.fault and "late, in lumps" in verdict.observed


def test_buffering_clean_and_look_alikes_give_no_finding() -> None:
    assert not buffering.judge(one(clean())).fault
    # Made all at once (a cache, a fast origin): one lump, but nothing waited for the pace.
    assert not buffering.judge(one(stream([0.02] * 20, [1] * 20))).fault
    # A slow first token that then streams: late, but one event per read.
    assert not buffering.judge(one(stream(due(20, start=1.0)))).fault
    # Late and grouped by three: coalescing's shape, under the lump bar of 4 per read.
    verdict = buffering.judge(one(grouped(late_by=0.8)))
    assert not verdict.fault and "lumps from 4" in verdict.observed


def test_buffering_baseline_is_the_direct_streams_ttft() -> None:
    """The same stream is late against a fast origin and on time against one that is itself slow."""
    lumps = stream([0.7] * 10 + [1.0] * 10, [1] * 10 + [2] * 10)
    assert buffering.judge(one(lumps, Pacing(0.0, DT))).fault
    assert not buffering.judge(one(lumps, Pacing(0.5, DT))).fault


def test_buffering_without_a_known_pace_is_a_warning_and_needs_a_long_stream() -> None:
    guessed = Pacing(0.0, DT, known=False)
    verdict = buffering.judge(one(held(), guessed))
    assert verdict.fault and verdict.unsure == buffering.PLAIN_REASON
    # Too short to tell, late or early: a lump in 6 events proves nothing without a canary (a fast
    # origin behind a buffering hop arrives early and whole), so it is untold, never a pass.
    for short in (stream([0.5] * 6, [1] * 6), stream([0.05] * 20, [1] * 20)):
        verdict = buffering.judge(one(short, guessed))
        assert not verdict.fault and verdict.untold and "too short a stream" in verdict.untold
        assert buffering.judge(one(short)).untold is None  # with a known pace it is judged
    # A short stream that arrived event by event flowed: a pass, with or without a canary.
    flowing = buffering.judge(one(stream(due(6)), guessed))
    assert not flowing.fault and flowing.untold is None


# ---- coalescing ------------------------------------------------------------------------------


def test_coalescing_groups_that_waited_on_the_way_are_named() -> None:
    verdict = coalescing.judge(one(grouped()))
    assert verdict.fault and "events per read" in verdict.observed


def test_coalescing_clean_and_look_alikes_give_no_finding() -> None:
    assert not coalescing.judge(one(clean())).fault
    # Grouped reads with no event held on the way: the client read slowly, not the path.
    slow_reader = stream(due(21), [1 + i // 3 for i in range(21)], hops=[0.002] * 21)
    assert not coalescing.judge(one(slow_reader)).fault
    # Held altogether is buffering's finding, not this one.
    assert not coalescing.judge(one(held())).fault


def test_coalescing_without_stamps_is_untold() -> None:
    verdict = coalescing.judge(one(stream(due(21), [1 + i // 3 for i in range(21)])))
    assert not verdict.fault and verdict.untold


# ---- compression -----------------------------------------------------------------------------


def test_compression_a_compressed_stream_held_back_is_named() -> None:
    assert compression.judge(one(held(content_encoding="gzip"))).fault
    # Streamed shape, but every event a whole interval later than uncompressed.
    late = stream(due(20, start=0.11), hops=[0.102] * 20, content_encoding="gzip")
    assert compression.judge(one(late, reference=clean())).fault
    assert compression.judge(one(clean(outcome="truncated", content_encoding="gzip"))).fault


def test_compression_clean_and_look_alikes_give_no_finding() -> None:
    assert not compression.judge(one(clean())).fault  # nobody compressed it
    # Compressed, and each event flushed at once (nginx gzip with buffering off).
    assert not compression.judge(one(clean(content_encoding="gzip"), reference=clean())).fault
    # A clock offset between origin and client is in both streams' stamps and cancels.
    offset = stream(due(20), hops=[3.002] * 20, content_encoding="gzip")
    assert not compression.judge(one(offset, reference=stream(due(20), hops=[3.0] * 20))).fault


def test_compression_is_untold_when_even_the_uncompressed_stream_is_held() -> None:
    verdict = compression.judge(one(held(content_encoding="gzip"), reference=held()))
    assert not verdict.fault and verdict.untold


# ---- idle timeout ----------------------------------------------------------------------------


def pause(after: int, silence: float, n: int = 8) -> list[float]:
    return [t + (silence if i >= after else 0.0) for i, t in enumerate(due(n))]


def test_idle_timeout_a_cut_in_the_silence_is_named_with_its_limit() -> None:
    cut = stream(due(3), outcome="truncated", saw_done=False)
    cut.end_s = cut.content[-1].t + 1.0
    verdict = idle_timeout.judge(one(cut, silence_s=3.0))
    assert verdict.fault and verdict.limit_s == pytest.approx(1.0)
    page = StreamResult(outcome="http-error", status=504, ttfb_s=1.0, end_s=1.01)
    assert idle_timeout.judge(one(page, silence_s=3.0)).limit_s == pytest.approx(1.0)
    gave_up = stream(due(3), outcome="timeout", saw_done=False)
    verdict = idle_timeout.judge(one(gave_up, silence_s=3.0))
    assert verdict.fault and verdict.limit_s is None


def test_idle_timeout_a_silence_that_passed_gives_no_finding() -> None:
    verdict = idle_timeout.judge(one(stream(pause(3, 3.0)), silence_s=3.0))
    assert not verdict.fault and not verdict.untold


def test_idle_timeout_is_untold_when_the_silence_did_not_happen() -> None:
    verdict = idle_timeout.judge(one(clean(), silence_s=3.0))
    assert not verdict.fault and verdict.untold


# ---- total timeout ---------------------------------------------------------------------------


def long_stream(seconds: float, **fields: Any) -> StreamResult:
    return stream([0.01 + DT * i for i in range(int(seconds / DT))], **fields)


def test_total_timeout_a_cut_is_named_with_its_limit() -> None:
    cut = long_stream(2.0, outcome="truncated", saw_done=False)
    verdict = total_timeout.judge(one(cut, duration_s=4.5))
    assert verdict.fault and verdict.limit_s == pytest.approx(cut.end_s)
    # The close came a second after the last byte (Envoy's delayed close): half an interval after it.
    late = long_stream(2.0, outcome="truncated", saw_done=False)
    late.end_s = (late.e2e_s or 0.0) + 1.0
    assert total_timeout.judge(one(late, duration_s=4.5)).limit_s == pytest.approx((late.e2e_s or 0) + DT / 2)


def test_total_timeout_a_long_stream_that_completed_gives_no_finding() -> None:
    verdict = total_timeout.judge(one(long_stream(4.5), duration_s=4.5))
    assert not verdict.fault and not verdict.untold


def test_total_timeout_is_untold_for_a_short_or_silent_stream() -> None:
    assert total_timeout.judge(one(long_stream(1.0), duration_s=4.5)).untold
    assert total_timeout.judge(one(long_stream(1.0, outcome="timeout"), duration_s=4.5)).untold


# ---- departure -------------------------------------------------------------------------------


def left(k: int = 3) -> StreamResult:
    result = stream(due(k), outcome="disconnected", saw_done=False)
    result.disconnect_s = result.e2e_s
    return result


FAST = Pacing(0.0, 0.05)  # verify's and probe's departures stream 20 tokens a second


def test_departure_noticed_late_or_never_is_named() -> None:
    assert departure.judge(Evidence([left()], FAST, silence_s=2.0, release_s=None)).fault
    verdict = departure.judge(Evidence([left()], FAST, silence_s=2.0, release_s=2.0))
    assert verdict.fault and "only 2.00 s later" in verdict.observed


def test_departure_noticed_at_once_gives_no_finding() -> None:
    verdict = departure.judge(Evidence([left()], FAST, silence_s=2.0, release_s=0.02))
    assert not verdict.fault and not verdict.untold


def test_departure_bound_is_ten_intervals_or_half_a_shorter_pause() -> None:
    assert departure.late_after(Evidence([left()], FAST, silence_s=2.0)) == pytest.approx(0.5)
    assert departure.late_after(Evidence([left()], FAST, silence_s=0.4)) == pytest.approx(0.2)
    assert departure.judge(Evidence([left()], FAST, silence_s=0.4, release_s=0.3)).fault


def test_departure_with_heartbeats_is_late_from_the_heartbeat_the_path_notices_at() -> None:
    """A path that notices only at a write notices at a heartbeat: late from one heartbeat after
    that one (the slack) plus the same ten intervals (0.5 s), both ways, and a pause no longer
    than that cannot tell."""
    beating = {"silence_s": 4.5, "heartbeat_s": 1.0}
    assert departure.late_after(Evidence([left()], FAST, **beating)) == pytest.approx(2.5)
    assert not departure.judge(Evidence([left()], FAST, release_s=1.06, **beating)).fault
    assert not departure.judge(Evidence([left()], FAST, release_s=2.06, **beating)).fault  # the slack
    assert departure.judge(Evidence([left()], FAST, release_s=3.06, **beating)).fault  # the third
    assert departure.judge(Evidence([left()], FAST, release_s=None, **beating)).fault
    second = {"silence_s": 5.5, "heartbeat_s": 1.0, "heartbeats_to_notice": 2}  # Varnish 7.1
    assert departure.late_after(Evidence([left()], FAST, **second)) == pytest.approx(3.5)
    assert not departure.judge(Evidence([left()], FAST, release_s=2.06, **second)).fault
    assert departure.judge(Evidence([left()], FAST, release_s=3.6, **second)).fault
    short = departure.judge(Evidence([left()], FAST, silence_s=2.5, heartbeat_s=1.0, release_s=1.6))
    assert short.untold and not short.fault


def test_departure_is_untold_when_the_client_never_left() -> None:
    verdict = departure.judge(Evidence([clean()], FAST, silence_s=2.0, release_s=None))
    assert not verdict.fault and verdict.untold


# ---- connection limit ------------------------------------------------------------------------


def burst(starts: list[float], length: float = 1.3) -> list[StreamResult]:
    return [stream([s + DT * i for i in range(int(length / DT))]) for s in starts]


def test_connection_limit_refused_or_queued_streams_are_named() -> None:
    refused = burst([0.01] * 8) + [StreamResult(outcome="http-error", status=503)] * 2
    verdict = connection_limit.judge(Evidence(refused, PACE))
    assert verdict.fault and "2 of 10 streams did not complete" in verdict.observed and "503" in verdict.observed
    waves = burst([0.01] * 5 + [1.32] * 5)
    verdict = connection_limit.judge(Evidence(waves, PACE))
    assert verdict.fault and "waves" in verdict.observed


def test_connection_limit_clean_and_look_alikes_give_no_finding() -> None:
    assert not connection_limit.judge(Evidence(burst([0.01 + 0.005 * i for i in range(20)]), PACE)).fault
    # First tokens spread by a busy admission, well under a stream.
    assert not connection_limit.judge(Evidence(burst([0.01 + 0.04 * i for i in range(20)]), PACE)).fault
    # The origin itself queued the late ones (its own records say so): not the path's limit.
    waves = burst([0.01] * 5 + [1.32] * 5)
    origin = [0.005] * 5 + [1.31] * 5
    verdict = connection_limit.judge(Evidence(waves, PACE, origin_first_token_s=origin))
    assert not verdict.fault and "in front of the origin" in verdict.observed


def test_connection_limit_cannot_tell_queueing_through_a_buffering_hop() -> None:
    """Streams released in lumps (4 KB buffers): their first tokens come when a buffer fills, so
    a spread of them is no wave, and no spread proves no queue: untold, never a pass or a fault."""
    lumped = [stream([s + 0.6] * 4 + [s + 1.2] * 4, [1] * 4 + [2] * 4) for s in [0.01] * 5 + [0.2] * 5]
    verdict = connection_limit.judge(Evidence(lumped, PACE))
    assert not verdict.fault and verdict.untold and "lumps" in verdict.untold
    refused = lumped + [StreamResult(outcome="http-error", status=503)]
    assert connection_limit.judge(Evidence(refused, PACE)).fault  # a refusal still shows, lumps or not


def shifted(result: StreamResult, by: float) -> StreamResult:
    return stream([e.t + by for e in result.events], [e.read for e in result.events])


def test_connection_limit_judges_a_burst_through_a_coalescing_hop() -> None:
    """dmr-ollama-haproxy's shape (tests/data/wild): HAProxy without http-no-delay sends events
    three a read, the first on time. coalescing names that and buffering does not, so the burst is
    judged (the waves named, an even start clean) where it was untold as a buffering hop's; streams
    held to their end still are untold, with the reason."""
    lumps = grouped(13, 3)
    assert coalescing.judge(one(lumps)).fault and not buffering.judge(one(lumps)).fault  # the judges' reading
    waves = connection_limit.judge(Evidence([shifted(lumps, s) for s in [0.0] * 5 + [1.3] * 5], PACE))
    assert waves.fault and not waves.untold and "waves" in waves.observed, waves
    even = connection_limit.judge(Evidence([shifted(lumps, 0.01 * i) for i in range(10)], PACE))
    assert not even.fault and not even.untold and "10 streams complete" in even.observed, even
    whole = held(13)
    assert buffering.judge(one(whole)).fault
    untold = connection_limit.judge(Evidence([shifted(whole, s) for s in [0.0] * 5 + [1.3] * 5], PACE))
    assert not untold.fault and untold.untold and "held" in untold.untold, untold


def test_connection_limit_reads_a_load_steps_numbers() -> None:
    step = connection_limit.Burst(300, {"complete": 300}, first_wait_s=0.0, last_wait_s=7.0, stream_s=8.0)
    assert connection_limit.judge_burst(step).fault
    admission = connection_limit.Burst(300, {"complete": 300}, first_wait_s=0.0, last_wait_s=3.0, stream_s=8.0)
    assert not connection_limit.judge_burst(admission).fault
