"""The checks on hand-made runs: margins follow the workload's pacing, and missing data fails."""
from __future__ import annotations

from labs.scenario import checks
from labs.client.results import Event, StreamResult
from labs.scenario.model import Run, Workload


def stream(times: list[float], reads: list[int], **fields) -> StreamResult:
    events = [Event(t=t, read=r, kind="content", text="x") for t, r in zip(times, reads)]
    return StreamResult(outcome="complete", saw_done=True, status=200, events=events,
                        ttft_s=times[0] if times else None, e2e_s=times[-1] if times else None, **fields)


def run_of(*results: StreamResult, workload: Workload | None = None, **fields) -> Run:
    return Run(variant="broken", workload=workload or Workload(tokens_per_s=10.0), results=list(results), **fields)


PACED = stream([0.01 + 0.1 * i for i in range(20)], list(range(1, 21)))
LUMP = stream([2.0] * 20, [1] * 20)


def test_a_paced_stream_streams_and_a_lump_is_held() -> None:
    assert checks.streamed()(run_of(PACED)).passed
    assert not checks.held_to_end()(run_of(PACED)).passed
    assert checks.held_to_end()(run_of(LUMP)).passed
    assert not checks.streamed()(run_of(LUMP)).passed


def test_margins_scale_with_the_token_interval() -> None:
    late = stream([0.5 + 0.1 * i for i in range(20)], list(range(1, 21)))
    assert checks.ttft_late(4)(run_of(late)).passed  # 500 ms > 4 x 100 ms
    slow = Workload(tokens_per_s=1.0)  # the same 500 ms is half an interval at 1 tok/s
    late_and_slow = stream([0.5 + 1.0 * i for i in range(20)], list(range(1, 21)))
    assert not checks.ttft_late(4)(run_of(late_and_slow, workload=slow)).passed
    assert checks.streamed()(run_of(late_and_slow, workload=slow)).passed
    # ... but the 100 ms stream, at 1 tok/s, was not made at the workload's pace: it proves nothing.
    assert not checks.streamed()(run_of(late, workload=slow)).passed


def test_threshold_fails_when_the_value_cannot_be_measured() -> None:
    nothing = run_of(stream([], []))
    assert not checks.release_within(4)(nothing).passed  # release_s is None: still busy
    assert not checks.ttft_p99_within(3)(nothing).passed
    assert not checks.writes_per_token_at_most(0.2)(nothing).passed  # no tokens counted


def test_threshold_directions_and_the_observed_text() -> None:
    run = run_of(PACED, server_delta={"streamlab_tokens_generated_total": 20.0,
                                      "streamlab_stream_writes_total": 20.0})
    result = checks.writes_per_token_at_least(0.9)(run)
    assert result.passed and result.observed.startswith("1 writes")
    assert not checks.writes_per_token_at_most(0.2)(run).passed


def test_a_check_that_raises_fails_visibly() -> None:
    result = checks.text_is_script(index=3)(run_of(PACED))  # there is no fourth stream
    assert not result.passed and result.observed.startswith("could not measure")


def test_timing_bounds_honour_the_variants_own_lab_knobs() -> None:
    workload = Workload(tokens_per_s=10.0, lab={"headers_delay_s": 0.5})
    assert workload.first_due_s() == 0.5
    assert workload.first_due_s({"first_token_delay_s": 1.0}) == 1.5  # the variant's silence counts
    after_silence = stream([1.51 + 0.1 * i for i in range(20)], list(range(1, 21)))
    assert not checks.streamed()(run_of(after_silence, workload=workload)).passed  # late for 0.5 s
    assert checks.streamed()(run_of(after_silence, workload=workload, lab={"first_token_delay_s": 1.0})).passed
    # A variant's own pace changes the token interval every margin is made of.
    assert checks.ttft_late(4)(run_of(after_silence, workload=Workload(tokens_per_s=10.0))).passed
    assert not checks.ttft_late(4)(run_of(after_silence, workload=Workload(tokens_per_s=10.0),
                                          lab={"tokens_per_s": 2.0})).passed


def test_a_proxy_event_is_proved_by_its_counter_or_by_any_line_of_its_access_log() -> None:
    check = checks.proxy_stat_at_least("upstream_rq_pending_overflow", 1, "overflowed", logged="flags=UO ")
    counted = run_of(proxy_stats={"envoy:1": {"cluster.c.upstream_rq_pending_overflow": 3}})
    # The overflows are instant, so they are logged first, before the streams that got through:
    # the check must not read only the last lines (a fresh-clone CI run missed them that way).
    early = ["status=503 flags=UO details=overflow"] + ["status=200 flags=- details=via_upstream"] * 12
    logged = run_of(access_log={"envoy:1": early})
    neither = run_of(access_log={"envoy:1": ["status=200 flags=- details=via_upstream",
                                             "status=503 flags=UF details=upstream_reset"]},
                     evidence=["envoy:1 log: flags=UO in a warning, not an access line"])
    assert check(counted).passed and check(logged).passed
    result = check(neither)
    assert not result.passed and "upstream_rq_pending_overflow = 0" in result.observed
    assert "503 UF x1" in result.observed, result.observed
    assert not checks.proxy_stat_at_least("upstream_rq_pending_overflow", 1, "overflowed")(logged).passed
    result = check(neither)
    assert not result.passed and "upstream_rq_pending_overflow = 0" in result.observed
    assert not checks.proxy_stat_at_least("upstream_rq_pending_overflow", 1, "overflowed")(logged).passed


def test_a_held_body_let_go_at_once_is_one_lump_however_many_reads_carry_it() -> None:
    # The CI run that failed django-stream-iterator (broken): 21 events held to 2.0 s reached a
    # loaded client in 6 socket reads within 1 ms. One lump by arrival time, so held.
    fragmented = stream([2.0 + 0.0002 * i for i in range(21)], [1 + i // 4 for i in range(21)])
    assert fragmented.bursts == 6
    assert checks.held_to_end()(run_of(fragmented)).passed
    # Three events streamed at their pace are three lumps: not held, though they span 2 intervals.
    short = stream([0.01, 0.11, 0.21], [1, 2, 3])
    assert not checks.held_to_end()(run_of(short)).passed
    # Two lumps a pace apart: still few for 20 events; one event per interval is not.
    two = stream([1.9] * 10 + [2.0] * 10, [1] * 10 + [2] * 10)
    assert checks.held_to_end()(run_of(two)).passed
