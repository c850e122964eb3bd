"""The benchmarks' plan and progress bar (the benchmarks themselves run in `make bench`)."""
from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest
from rich.console import Console

from labs.bench import PARTS
from labs.bench.cli import parts
from labs.bench.progress import WITHIN_PART_CAP, BenchProgress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_every_part_has_a_runner_and_an_estimate() -> None:
    args = argparse.Namespace(streams=1000, duration=8.0, rounds=30, arrivals=1000, out=Path("unused"))
    plan = parts(args)
    assert tuple(plan) == PARTS
    assert all(part.expected_s > 0 for part in plan.values())
    # More streams, longer streams: a longer estimate.
    bigger = parts(argparse.Namespace(streams=2000, duration=16.0, rounds=30, arrivals=2000, out=Path("unused")))
    assert bigger["proxies"].expected_s > plan["proxies"].expected_s


def test_the_bar_follows_the_clock_within_a_part_and_jumps_at_its_end() -> None:
    out = io.StringIO()
    clock = Clock()
    with BenchProgress(Console(file=out, width=100), {"a": 10.0, "b": 30.0}, clock=clock) as bar:
        assert bar.total_s == 40.0
        with bar.part("a"):
            clock.now += 4
            bar.step("first step")
            assert bar.completed_s == 4.0
            clock.now += 60  # far longer than expected: the bar waits at the cap
            bar.step("a: second step")
            assert bar.completed_s == WITHIN_PART_CAP * 10.0
        assert bar.completed_s == 10.0  # ended early or late: its whole share
        with bar.part("b"):
            clock.now += 3
            bar.step("[not markup] third")
            assert bar.completed_s == 13.0
    lines = out.getvalue().splitlines()
    assert "a: first step" in lines and "a: second step" in lines  # the part named once
    assert "b: [not markup] third" in lines
    assert "100%" in lines[-1] and "b: done" in lines[-1]


def test_a_long_step_name_is_cut_never_the_times() -> None:
    clock = Clock()
    with BenchProgress(Console(file=io.StringIO(), width=80), {"a": 4000.0}, clock=clock) as bar:
        with bar.part("a"):
            clock.now += 1000  # hours-long estimates: the widest times
            bar.step("x" * 200)
            line = bar.line()
    assert len(line) <= 80, line
    assert "25%" in line and "0:16:40 elapsed," in line and " left a: xxx" in line and line.endswith("…")


def _admission(direct_cpu_us: list[float], raw_cpu_us: float | None, raw_failed: int = 0,
               failed: int = 0) -> dict:
    """A result of 3 rounds: --workers 1 direct at p99 300 ms, nginx 900 ms; the raw ASGI app
    (if any) at p99 200 ms, the bare asyncio server at 100 ms with 80 us per request."""
    from labs.bench import references
    from labs.bench.admission import judge, summarize, summarize_reference

    def run(p99: float, cpu_us: float, failed: int = 0) -> dict:
        return {"ttft_p50_s": p99 / 2, "ttft_p99_s": p99, "failed": failed, "client_cpu_ms": 100.0,
                "machine_busy_pct": 150.0, "server_cpu_us_per_request": cpu_us}
    refs = {references.BARE: summarize_reference([run(0.1, 80.0)])}
    if raw_cpu_us is not None:
        refs[references.RAW_ASGI] = summarize_reference([run(0.2, raw_cpu_us, raw_failed)])
    result = {"arrivals": 1000, "rounds": len(direct_cpu_us), "cores": 2, "load_average_1m": [1.0],
              "configs": {"workers=1": {"direct": summarize("direct", [run(0.3, cpu, failed) for cpu in direct_cpu_us]),
                                        "nginx": summarize("nginx", [run(0.9, 900.0)] * 3)}},
              "references": refs}
    judge(result)
    return result


def test_admission_target_is_cpu_per_request_against_the_raw_asgi_app_of_the_same_rounds() -> None:
    from labs.bench.admission import TARGET_CPU_RATIO, reasons

    assert TARGET_CPU_RATIO == 1.5
    ok = _admission([200.0, 300.0, 900.0], raw_cpu_us=200.0)  # median 300 us: 1.5x, one noisy round
    direct = ok["configs"]["workers=1"]["direct"]
    assert direct["met"] is True and direct["cpu_ratio_to_raw"] == pytest.approx(1.5)
    assert direct["p99_ratio_to_raw"] == pytest.approx(1.5)  # reported beside, no target
    nginx = ok["configs"]["workers=1"]["nginx"]
    assert nginx["met"] == "-" and nginx["cpu_ratio_to_raw"] == pytest.approx(4.5)  # no target
    assert reasons(ok) == []
    # At the target exactly, as a run gave it: 0.18 s of ticks / 1,000 * 1e6 is 179.99999999999997,
    # and 270 us over it 1.5000000000000002.
    at_target = _admission([270.0] * 3, raw_cpu_us=0.18 / 1000 * 1e6)["configs"]["workers=1"]["direct"]
    assert at_target["cpu_ratio_to_raw"] > 1.5 and at_target["met"] is True
    slow = _admission([310.0] * 3, raw_cpu_us=200.0)  # 1.55x
    assert slow["configs"]["workers=1"]["direct"]["met"] is False
    assert "1.55x the raw ASGI app's 200 us on the same stack (target at most 1.5x)" in reasons(slow)[-1]
    # TTFT has no target: a p99 far above the raw app's with CPU in bounds is still a pass.
    assert _admission([250.0] * 3, raw_cpu_us=200.0)["configs"]["workers=1"]["direct"]["p99_ratio_to_raw"] > 1
    assert _admission([100.0] * 3, raw_cpu_us=200.0, failed=1)["configs"]["workers=1"]["direct"]["met"] is False
    for skipped in (_admission([100.0] * 3, raw_cpu_us=None), _admission([100.0] * 3, raw_cpu_us=200.0, raw_failed=2)):
        row = skipped["configs"]["workers=1"]["direct"]
        assert row["met"] is None and "raw ASGI on uvicorn reference gave no usable" in row["skipped"]
        assert reasons(skipped) == []  # skipped is not a miss


def test_bench_md_shows_the_admission_and_prefill_tables() -> None:
    from labs.bench.markdown import markdown

    admission = _admission([250.0], raw_cpu_us=200.0)
    cell = {"ttft_p50_s": 0.05, "ttft_p99_s": 0.1, "failed": 0}
    prefill = {"counts": [8], "rounds": 1, "median": {"short": {"serial": {"8": cell},
                                                                "batched": {"8": cell}}}}
    text = markdown({"admission": admission, "prefill": prefill}, "python -m labs bench")
    assert "| p99 / raw ASGI | CPU / raw ASGI | target |" in text
    assert ("| --workers 1 | direct | 150 | 300 | 300 | 250 | 0 | 1.50x | 1.25x | "
            "CPU <= 1.5x raw ASGI: pass |") in text
    assert "| --workers 1 | nginx | 450 | 900 | 900 / 900 / 900 | 900 | 0 | 4.50x | 4.50x | - |" in text
    assert "| reference | bare asyncio | 50 | 100 | 100 | 80 | 0 | 0.50x | 0.40x | - |" in text
    skipped = markdown({"admission": _admission([250.0], raw_cpu_us=None)}, "x")
    assert "| skipped: the raw ASGI on uvicorn reference gave no usable CPU figure in this run |" in skipped
    assert "| short | 8 | 50 | 100 | 50 | 100 | 1.00x |" in text


def test_a_part_that_failed_is_named_in_bench_md_with_its_error() -> None:
    from labs.bench.markdown import markdown

    text = markdown({"admission": {"error": "KeyError: 'x'"}}, "python -m labs bench")
    assert "## admission: not measured\n\nThe part failed: KeyError: 'x'" in text


def test_server_cpu_target_is_the_ratio_to_the_raw_asgi_app() -> None:
    from labs.bench.markdown import markdown
    from labs.bench.server_cpu import TARGET_RATIO, judge, reason

    assert TARGET_RATIO == 1.3

    def result(lab_us: float, raw: dict | None) -> dict:
        rows = [{"server": "streamlab", "tokens": 80_000, "server_cpu_us_per_token": lab_us,
                 "gap_p99_s": 0.1, "failed": 0},
                {"server": "bare asyncio", "tokens": 80_000, "server_cpu_us_per_token": 10.0,
                 "gap_p99_s": 0.1, "failed": 0}]
        if raw is not None:
            rows.append({"server": "raw ASGI on uvicorn", "tokens": 80_000, "gap_p99_s": 0.1, "failed": 0, **raw})
        out = {"rows": [], "many": rows, "target_ratio": TARGET_RATIO}
        judge(out)
        out["reason"] = reason(out)
        return out
    met = result(26.0, {"server_cpu_us_per_token": 20.0})  # 1.3x raw ASGI, 2.6x the bare server
    assert met["many"][0]["target_met"] is True and met["reason"] is None
    assert "| streamlab | 80,000 | 26.0 | 1.30x | 100.0 | 0 | <= 1.3x: pass |" in markdown({"server-cpu": met}, "x")
    missed = result(27.0, {"server_cpu_us_per_token": 20.0})
    assert missed["many"][0]["target_met"] is False
    assert "1.35x the raw ASGI app's on the same stack (target at most 1.3x)" in missed["reason"]
    assert "<= 1.3x: **miss**" in markdown({"server-cpu": missed}, "python -m labs bench")
    for raw in (None, {"server_cpu_us_per_token": 30.0, "failed": 3}):
        skipped = result(10.0, raw)
        assert skipped["many"][0]["target_met"] is None and skipped["reason"] is None
        assert "skipped: the raw ASGI on uvicorn reference" in markdown({"server-cpu": skipped}, "x")


def test_locust_agreement_tolerance_comes_from_rounding_batching_and_pacing() -> None:
    from labs.bench.locust_agreement import compare, locust_rounding_s, server_ttft, tolerance
    from labs.load import StepResult

    # Locust's 2 significant digits of ms: half a step of 1, 10, 100 ms.
    assert [locust_rounding_s(v) for v in (0.05, 0.5, 5.0)] == [0.0005, 0.005, 0.05]
    # + the server's 1 ms batching window + a tenth of the 50 ms interval at 20 tok/s.
    assert tolerance(0.050, 0.052) == pytest.approx(0.0005 + 0.001 + 0.005)
    assert tolerance(0.140, 0.003) == pytest.approx(0.005 + 0.001 + 0.005)

    def step(ttft50: float, gap99: float) -> StepResult:
        return StepResult("p", 300, 160, 20.0, 8.0, ttft_p50_s=ttft50, ttft_p99_s=0.02,
                          gap_p50_s=0.05, gap_p99_s=gap99)

    rows = compare(step(0.003, 0.070), step(0.140, 0.072), step(0.005, 0.074))
    assert rows["ttft_p50_s"]["lab"] == pytest.approx(0.004)  # the two lab runs' mean
    assert not rows["ttft_p50_s"]["agree"] and rows["ttft_p50_s"]["lab_repeats"]
    assert rows["gap_p99_s"]["agree"] and rows["gap_p99_s"]["lab_repeat"] == pytest.approx(0.004)
    # A p99 fixed by few samples: each client's half-band adds in quadrature (3 and 4 ms: 5 ms).
    lab, other = step(0.003, 0.070), step(0.003, 0.080)
    assert not compare(lab, other, lab)["gap_p99_s"]["agree"]  # 10 ms > 6.5 ms
    lab.percentile_bands_s = {"gap_p99": [0.067, 0.073]}
    other.percentile_bands_s = {"gap_p99": [0.076, 0.084]}
    row = compare(lab, other, lab)["gap_p99_s"]
    assert row["sampling_s"] == pytest.approx(0.005)
    assert row["tolerance"] == pytest.approx(0.0115) and row["agree"]  # 10 ms <= 6.5 + 5 ms
    before = {'streamlab_time_to_first_token_seconds_bucket{le="0.005"}': 10.0,
              'streamlab_time_to_first_token_seconds_bucket{le="0.01"}': 10.0,
              'streamlab_time_to_first_token_seconds_bucket{le="+Inf"}': 10.0}
    after = {'streamlab_time_to_first_token_seconds_bucket{le="0.005"}': 60.0,
             'streamlab_time_to_first_token_seconds_bucket{le="0.01"}': 108.0,
             'streamlab_time_to_first_token_seconds_bucket{le="+Inf"}': 110.0}
    assert server_ttft(before, after) == {"requests": 100, "p50_at_most_s": 0.005,
                                          "p99_at_most_s": float("inf")}


def test_a_missed_admission_target_says_why_with_the_measured_figures() -> None:
    from labs.bench.admission import judge, markdown_lines, reasons, summarize, summarize_reference

    def run(p99: float, cpu_us: float) -> dict:
        return {"ttft_p50_s": p99 / 2, "ttft_p99_s": p99, "failed": 0, "client_cpu_ms": 250.0,
                "machine_busy_pct": 180.0, "server_cpu_us_per_request": cpu_us}

    result = {"arrivals": 1000, "rounds": 1, "cores": 2, "load_average_1m": [2.0, 3.0],
              "configs": {"workers=1": {"direct": summarize("direct", [run(0.6, 550.0)]),
                                        "nginx": summarize("nginx", [run(0.35, 300.0)])}},
              "references": {"plain FastAPI": summarize_reference([run(0.32, 350.0)]),
                             "raw ASGI on uvicorn": summarize_reference([run(0.3, 200.0)])}}
    judge(result)
    why = reasons(result)
    assert len(why) == 2  # the context, then direct: nginx has no target
    assert why[0].startswith("This machine: 2 cores, 180-180% busy")
    assert "load average 2.0 -> 3.0; the measuring client used 250-250 ms" in why[0]
    assert "plain FastAPI reached p99 320 ms with 350 us of CPU per request" in why[0]
    assert why[1] == ("--workers 1 direct: 550 us of server CPU per admitted request, 2.75x the raw "
                      "ASGI app's 200 us on the same stack (target at most 1.5x): the lab server's own work "
                      "above its HTTP stack is 350 us per request, 350 ms of one core for 1,000 "
                      "arrivals; its TTFT p99 600 ms is 2.00x the raw ASGI app's (no target). Where "
                      "it goes: `python -m labs.bench.profile` (docs/performance.md).")
    text = "\n".join(markdown_lines(result))
    assert "| reference | plain FastAPI | 160 | 320 | 320 | 350 | 0 | 1.07x | 1.75x | - |" in text
    assert "| CPU <= 1.5x raw ASGI: **miss** |" in text
    assert "- --workers 1 direct: 550 us" in text
    summarize_met = {**result, "configs": {"workers=1": {"nginx": result["configs"]["workers=1"]["nginx"]}}}
    assert reasons(summarize_met) == []


def test_the_profile_puts_each_sample_in_its_innermost_phase_and_scales_to_the_measured_cpu() -> None:
    from labs.bench.profile import OTHER, phase_of, read_collapsed, summarize

    raw = ["Runner.run (asyncio/runners.py:118);RequestResponseCycle.run_asgi (uvicorn/x.py:1);"
           "create_app.<locals>.chat_completions (server/http/app.py:9);Service.parse (server/http/app.py:5);"
           "BaseModel.model_validate_json (pydantic/main.py:3) 3",
           "Runner.run (asyncio/runners.py:118);RequestResponseCycle.run_asgi (uvicorn/x.py:1) 1",
           "Runner.run (asyncio/runners.py:118) 4", "", "not a stack line",
           "Thread.run (threading.py:1);Scheduler._run_thread (server/engine/scheduler.py:2) 2",
           "somewhere (else.py:1) 2"]
    stacks = read_collapsed(raw)
    assert [count for _, count in stacks] == [3, 1, 4, 2, 2]
    assert phase_of(stacks[0][0]) == "JSON parse + validation (pydantic)"
    assert phase_of(stacks[1][0]).startswith("framework layers")
    assert phase_of(stacks[4][0]) == OTHER
    result = summarize(stacks, cpu_us_per_unit=600.0)  # 12 samples share 600 us
    phases = {name: (us, pct) for name, us, pct in result["phases"]}
    assert phases["JSON parse + validation (pydantic)"] == (150.0, 25.0)
    assert phases["decode loop (engine thread)"] == (100.0, 100 * 2 / 12)
    assert result["top"][0] == ("Runner.run (runners.py)", 200.0, 100 * 4 / 12)


def test_tools_targets_read_the_exit_and_the_wall_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool's own error (exit 2) or a timeout never meets a target; the probe has none."""
    from labs.bench import tools

    answers = iter([{"command": "q", "exit": 0, "wall_s": 6.0, "cpu_s": 3.0},
                    {"command": "v", "exit": 2, "wall_s": 5.0, "cpu_s": 1.0},
                    {"command": "p", "error": "ran past 300 s"}])
    monkeypatch.setattr(tools, "timed", lambda *args, **kwargs: next(answers))
    monkeypatch.setattr("server.launcher.running_server", _nothing)
    monkeypatch.setattr("proxies.runtime.local.run_proxy", _nothing)
    rows = tools.bench_tools(lambda step: None)["rows"]
    assert [rows[name]["target_met"] for name in ("verify --quick", "verify", "probe")] == [True, False, None]
    text = "\n".join(tools.markdown_lines({"config": "c", "rows": rows}))
    assert "| `q` | 0 | 6.0 | 3.0 | 10 | yes |" in text and "| `v` | 2 | 5.0 | 1.0 | 45 | **no** |" in text
    assert "| `p` | - | - | - | - | **no**: ran past 300 s |" in text


class _Handle:
    port = 1
    url = "http://127.0.0.1:1"


def _nothing(*args: object, **kwargs: object):
    import contextlib
    return contextlib.nullcontext(_Handle())


def _tools_result(*met: bool | None) -> dict:
    """The tools part's rows, each met or missed, or without a target (None, as the probe's)."""
    return {"config": "c", "rows": {f"verify {i}": {"command": f"v{i}", "exit": 0, "wall_s": 1.0, "cpu_s": 1.0,
                                                    "target_s": None if m is None else 10.0, "target_met": m}
                                    for i, m in enumerate(met)}}


def _bench_exit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                outcomes: dict) -> tuple[int, str]:
    """`python -m labs bench --only ...` with the parts replaced by `outcomes` (a result, or an
    exception the part raises): its exit status and what it printed (stdout, then stderr)."""
    from labs.bench import cli

    def run(outcome: object):
        def part(progress: object) -> dict:
            if isinstance(outcome, Exception):
                raise outcome
            return outcome  # type: ignore[return-value]
        return part
    monkeypatch.setattr(cli, "parts", lambda args: {name: cli.Part(name, run(outcome), 1.0)
                                                     for name, outcome in outcomes.items()})
    status = cli.main(["--only", ",".join(outcomes), "--out", str(tmp_path)])
    printed = capsys.readouterr()
    return status, printed.out + printed.err


def test_bench_exits_0_when_every_target_is_met(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    status, out = _bench_exit(monkeypatch, tmp_path, capsys, {"tools": _tools_result(True, True, None)})
    assert status == 0 and "2 of 2 targets met, 0 missed, 0 not judged; 0 of 1 parts failed: exit 0" in out


def test_bench_exits_1_when_a_target_is_missed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    status, out = _bench_exit(monkeypatch, tmp_path, capsys, {"tools": _tools_result(True, False)})
    assert status == 1 and "missed: tools verify 1: wall time" in out
    # A missed admission target counts too, and a part with no target never does.
    status, out = _bench_exit(monkeypatch, tmp_path, capsys,
                              {"admission": _admission([400.0], raw_cpu_us=200.0), "client": {"rows": []}})
    assert status == 1 and "missed: admission workers=1 direct" in out


def test_bench_exits_2_when_a_part_fails_or_a_target_cannot_be_judged(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out = _bench_exit(monkeypatch, tmp_path, capsys,
                              {"tools": _tools_result(False), "prefill": RuntimeError("the server never started")})
    assert status == 2  # a crash outranks a miss
    assert "failed: prefill: RuntimeError: the server never started" in out
    assert "The part failed: RuntimeError: the server never started" in (tmp_path / "bench.md").read_text()
    status, out = _bench_exit(monkeypatch, tmp_path, capsys,
                              {"admission": _admission([100.0], raw_cpu_us=None)})
    assert status == 2 and "skipped (could not be judged): admission workers=1 direct" in out


def test_bench_s_own_failure_is_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from labs.bench import cli

    def broken(results: object, command: str) -> str:
        raise OSError("No space left on device")
    monkeypatch.setattr(cli, "markdown", broken)
    status, printed = _bench_exit(monkeypatch, tmp_path, capsys, {"tools": _tools_result(True)})
    assert status == 2  # the part ran and met its target, but no report was written
    assert printed.endswith("\nerror: the bench failed: OSError: No space left on device\n")
    assert "targets met" not in printed  # no verdict


def test_bench_judges_only_the_parts_it_ran(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    import json

    (tmp_path / "prefill.json").write_text(json.dumps({"error": "RuntimeError: an earlier run's"}))
    (tmp_path / "tools.json").write_text(json.dumps(_tools_result(False)))
    status, _ = _bench_exit(monkeypatch, tmp_path, capsys, {"admission": _admission([250.0], raw_cpu_us=200.0)})
    assert status == 0
    assert "an earlier run's" in (tmp_path / "bench.md").read_text()  # still shown in the report
