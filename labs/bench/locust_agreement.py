"""Part `locust`: do the lab's own client and Locust (1 master + 2 workers, the shipped
locustfile) report the same stream, and where does Locust itself become the bottleneck?

Straight to the synthetic server on loopback, both clients open 300 streams x 20 tok/s, their
starts spread over RAMP_S (all at once, TTFT measures how fast each client can fire a burst:
requests' per-request cost puts Locust's hundreds of ms behind); their TTFT p50/p99 and gap
p50/p99 must agree within `tolerance`, and each client's CPU is recorded. Then both clients
again at 600 and 1,000 streams: the first step where Locust's gap p99 leaves the lab client's by
more than the tolerance is where Locust's own cost shows in its numbers on this machine.
"""
from __future__ import annotations

from typing import Any, Callable

from labs.load.results import StepResult

AGREEMENT_STREAMS = 300
LOCUST_STEPS = (300, 600, 1000)
WORKERS = 2
DURATION_S, RATE, RAMP_S = 8.0, 20.0, 2.0


def tolerance(name: str, lab: float, other: float) -> float:
    """What counts as agreement. Gaps: the server paces 50 ms, so 5 ms or 20 % (Locust stores ms,
    and its reads go through requests' buffering). TTFT under a burst depends on the arrival order
    the client makes (Locust spawns users in batches): 50 ms or 50 %."""
    larger = max(abs(lab), abs(other))
    if name.startswith("gap"):
        return max(0.005, 0.2 * larger)
    return max(0.05, 0.5 * larger)


FIELDS = ("ttft_p50_s", "ttft_p99_s", "gap_p50_s", "gap_p99_s")


def compare(lab: StepResult, other: StepResult) -> dict[str, Any]:
    rows = {}
    for name in FIELDS:
        a, b = getattr(lab, name), getattr(other, name)
        ok = a is not None and b is not None and abs(a - b) <= tolerance(name, a, b)
        rows[name] = {"lab": a, "locust": b, "tolerance": None if a is None or b is None
                      else tolerance(name, a, b), "agree": ok}
    return rows


def _numbers(step: StepResult) -> dict[str, Any]:
    return {"streams": step.concurrency, "complete": step.completed, "outcomes": step.outcomes,
            **{name: getattr(step, name) for name in FIELDS}, "rate_pct": round(step.rate_pct, 1),
            "client_cpu_s": round(step.client_cpu_s, 2), "client_cpu_pct": round(step.client_cpu_pct, 1),
            "client_cpu_per_event_us": step.client_cpu_per_event_us,
            "wall_s": round(step.wall_s, 2), "machine_busy_pct": round(step.machine_busy_pct, 1),
            "healthy": step.healthy}


def bench_locust_agreement(progress: Callable[[str], None]) -> dict[str, Any]:
    from labs.load import SYNTHETIC, LoadLab
    from labs.load.locust_run import locust_available, run_locust_step
    from labs.load.own_path import LoadSettings, OwnPath, run_step

    if not locust_available():
        return {"missing": "Locust is not installed (pip install 'streamlab[locust]')"}
    with LoadLab(progress=progress) as lab:
        server = lab.server(SYNTHETIC)
        path = OwnPath(server.url + "/v1", LoadSettings(
            streams=LOCUST_STEPS, tokens_per_s=RATE, duration_s=DURATION_S, ramp_s=RAMP_S))
        path.detect()
        lab_steps, locust_steps = [], []
        for n in LOCUST_STEPS:
            progress(f"lab client: {n} streams")
            lab_steps.append(run_step(path, n, RATE, None))
            progress(f"Locust (1 master + {WORKERS} workers): {n} streams")
            locust_steps.append(run_locust_step(path, n, RATE, None, workers=WORKERS))
    agreement = compare(lab_steps[0], locust_steps[0])
    bottleneck = None
    for ours, step in zip(lab_steps, locust_steps):
        a, b = ours.gap_p99_s or 0.0, step.gap_p99_s or 0.0
        if b - a > tolerance("gap", a, b):
            bottleneck = {"streams": step.concurrency, "lab_gap_p99_s": a, "locust_gap_p99_s": b}
            break
    return {"streams": AGREEMENT_STREAMS, "duration_s": DURATION_S, "tokens_per_s": RATE,
            "ramp_s": RAMP_S, "workers": WORKERS, "lab": [_numbers(s) for s in lab_steps],
            "locust": [_numbers(s) for s in locust_steps], "agreement": agreement,
            "agree": all(r["agree"] for r in agreement.values()), "locust_bottleneck": bottleneck}


def markdown_lines(result: dict[str, Any]) -> list[str]:
    """The part's section of bench.md."""
    if "agreement" not in result:
        return []
    lines = [f"## Lab client and Locust (1 master + {result['workers']} workers), "
             f"{result['streams']} streams x {result['tokens_per_s']:g} tok/s, started over "
             f"{result['ramp_s']:g} s, loopback", "",
             "| metric | lab client (ms) | Locust (ms) | tolerance (ms) | agree |",
             "| --- | ---: | ---: | ---: | --- |"]
    for name, row in result["agreement"].items():
        cells = [("-" if row[k] is None else f"{row[k] * 1e3:.1f}") for k in ("lab", "locust", "tolerance")]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {'yes' if row['agree'] else '**no**'} |")
    lines += ["", "| client | streams | complete | TTFT p50/p99 (ms) | gap p99 (ms) | client CPU s (% of one "
              "core over the step, start-up included) | CPU per event (us) | machine |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for label, step in [("lab", s) for s in result["lab"]] + [("Locust", s) for s in result["locust"]]:
        gap = "-" if step["gap_p99_s"] is None else f"{step['gap_p99_s'] * 1e3:.1f}"
        ttft = "/".join("-" if step[k] is None else f"{step[k] * 1e3:.0f}" for k in ("ttft_p50_s", "ttft_p99_s"))
        per_event = step["client_cpu_per_event_us"]
        lines.append(f"| {label} | {step['streams']} | {step['complete']} | {ttft} | {gap} | "
                     f"{step['client_cpu_s']:.1f} ({step['client_cpu_pct']:.0f}%) | "
                     f"{'-' if per_event is None else f'{per_event:.0f}'} | {step['machine_busy_pct']:.0f}% |")
    where = result.get("locust_bottleneck")
    lines += ["", "Locust becomes the bottleneck at " + (
        f"{where['streams']} streams (gap p99 {where['locust_gap_p99_s'] * 1e3:.0f} ms against the lab "
        f"client's {where['lab_gap_p99_s'] * 1e3:.0f} ms)" if where else f"none of {', '.join(str(s['streams']) for s in result['locust'])} streams"), ""]
    return lines
