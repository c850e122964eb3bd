"""Part `locust`: do the lab's own client and Locust (1 master + 2 workers, the shipped
locustfile) report the same streams, and where does Locust itself become the bottleneck?

Straight to the synthetic server on loopback, 300 streams x 20 tok/s for 8 s, their starts spread
over RAMP_S (all at once, TTFT would measure how fast each client fires a burst, not the path).
The lab client runs before and after Locust (A-B-A): the two lab runs bracket Locust's in time,
their mean is what Locust is compared with, and their difference is how well the lab client
repeats itself on this machine at that moment. The server's own TTFT (its /metrics histogram,
request arrival to first token written) is the reference that says which client is off.

Tolerance (`tolerance`), from the resolution of the measurements and of the pacing: Locust keeps
response times rounded to 2 significant digits (whole ms below 100 ms, 10 ms to 1 s, 100 ms
above: half a step of error), the server's scheduler sends tokens due within 1 ms in one pass
(BATCH_S), and the runs do not share the server's schedule: one tenth of the token interval
(5 ms at 20 tok/s) is allowed for that, and checked against the lab client's own A-B-A
difference (if the lab client differs from itself by more, the machine was too noisy to judge).
And a percentile is only as precise as its samples fix it: the p99 of 300 TTFTs is one of about
the top seven values (labs.client.results.percentile_band: the ranks 2 binomial standard
deviations either side), so each client's band half-width adds, in quadrature.

Then both clients at CLIMB counts, until a Locust process reaches SATURATED_PCT of one core in its
busiest second (a worker is one gevent loop: that is Locust's own limit on this machine), bounded
by the largest count (2,000) and CLIMB_BUDGET_S.
"""
from __future__ import annotations

import math
import time
from functools import partial
from typing import Any, Callable

from labs.client.durations import milliseconds
from labs.load.results import StepResult

AGREEMENT_STREAMS = 300
CLIMB = (600, 1000, 1500, 2000)
WORKERS = 2
DURATION_S, RATE, RAMP_S = 8.0, 20.0, 2.0
BATCH_S = 0.001  # server/engine/scheduler.py BATCH_TOLERANCE_S: tokens due within 1 ms go together
RUN_SHARE = 0.1  # of the token interval: two runs one after the other, not on one schedule
SATURATED_PCT = 85.0  # of one core, in a Locust process's busiest second
CLIMB_BUDGET_S = 150.0
FIELDS = ("ttft_p50_s", "ttft_p99_s", "gap_p50_s", "gap_p99_s")
TTFT_BUCKETS = "streamlab_time_to_first_token_seconds_bucket"


def locust_rounding_s(value_s: float) -> float:
    """Half of Locust's rounding step at this value (it stores 2 significant digits of ms)."""
    ms = abs(value_s) * 1e3
    step_ms = 1.0 if ms < 100 else 10.0 if ms < 1000 else 100.0 if ms < 10000 else 1000.0
    return step_ms / 2e3


def tolerance(lab: float, other: float, tokens_per_s: float = RATE,
              sampling_s: float = 0.0) -> float:
    """The largest difference that still counts as agreement (see the module's docstring);
    `sampling_s`: how precisely the two clients' samples fix the percentile (`sampling`)."""
    return (locust_rounding_s(max(abs(lab), abs(other))) + BATCH_S + RUN_SHARE / tokens_per_s
            + sampling_s)


def half_band(step: StepResult, name: str) -> float:
    band = step.percentile_bands_s.get(name.removesuffix("_s"))
    return (band[1] - band[0]) / 2 if band else 0.0


def sampling(name: str, labs: list[StepResult], other: StepResult) -> float:
    """The percentile's sampling resolution: the lab runs' wider half-band and the other
    client's, in quadrature (two independent estimates of one percentile)."""
    ours = max(half_band(step, name) for step in labs)
    return math.hypot(ours, half_band(other, name))


def _mean(a: float | None, b: float | None) -> float | None:
    values = [v for v in (a, b) if v is not None]
    return sum(values) / len(values) if values else None


def compare(lab_a: StepResult, locust: StepResult, lab_b: StepResult) -> dict[str, Any]:
    rows = {}
    for name in FIELDS:
        a, b = _mean(getattr(lab_a, name), getattr(lab_b, name)), getattr(locust, name)
        spread = sampling(name, [lab_a, lab_b], locust)
        tol = None if a is None or b is None else tolerance(a, b, sampling_s=spread)
        repeat = (None if getattr(lab_a, name) is None or getattr(lab_b, name) is None
                  else abs(getattr(lab_a, name) - getattr(lab_b, name)))
        rows[name] = {"lab": a, "lab_runs": [getattr(lab_a, name), getattr(lab_b, name)],
                      "locust": b, "tolerance": tol, "sampling_s": spread, "lab_repeat": repeat,
                      "agree": tol is not None and abs(a - b) <= tol,  # type: ignore[operator]
                      "lab_repeats": repeat is not None and tol is not None and repeat <= tol}
    return rows


def server_ttft(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """The server's TTFT histogram over one run: the bucket bounds holding its p50 and p99."""
    buckets = sorted((float(k.split('le="')[1].split('"')[0]), v - before.get(k, 0.0))
                     for k, v in after.items() if k.startswith(TTFT_BUCKETS))
    total = buckets[-1][1] if buckets else 0.0
    out: dict[str, Any] = {"requests": int(total)}
    for q in (50, 99):
        out[f"p{q}_at_most_s"] = next((le for le, n in buckets if total and n >= q / 100 * total), None)
    return out


def _numbers(step: StepResult, server: dict[str, Any]) -> dict[str, Any]:
    return {"streams": step.concurrency, "complete": step.completed, "outcomes": step.outcomes,
            **{name: getattr(step, name) for name in FIELDS}, "rate_pct": round(step.rate_pct, 1),
            "client_cpu_s": round(step.client_cpu_s, 2), "client_cpu_pct": round(step.client_cpu_pct, 1),
            "client_cpu_per_event_us": step.client_cpu_per_event_us,
            "client_peak_cpu_pct": step.client_peak_cpu_pct, "client_peak_process": step.client_peak_process,
            "wall_s": round(step.wall_s, 2), "machine_busy_pct": round(step.machine_busy_pct, 1),
            "healthy": step.healthy, "server_ttft": server}


def bench_locust_agreement(progress: Callable[[str], None]) -> dict[str, Any]:
    from labs.load import SYNTHETIC, LoadLab, ServerSpec
    from labs.pathload.locust_run import locust_available, run_locust_step
    from labs.pathload.ramp import LoadSettings, OwnPath, run_step

    if not locust_available():
        return {"missing": "Locust is not installed (pip install 'streamlab[locust]')"}
    with LoadLab(progress=progress) as lab:
        # More slots than the largest count: the engine's admission (429) is not under test.
        server = lab.server(ServerSpec(slots=max(SYNTHETIC.slots, max(CLIMB) + 100)))
        path = OwnPath(server.url + "/v1", LoadSettings(
            streams=(AGREEMENT_STREAMS, *CLIMB), tokens_per_s=RATE, duration_s=DURATION_S,
            ramp_s=RAMP_S))
        path.detect()

        def measure(client: str, n: int) -> dict[str, Any]:
            progress(f"{client}: {n} streams")
            time.sleep(0.5)  # the last run's connections go
            before = server.metrics()
            step = (run_step(path, n, RATE, None) if client == "lab" else
                    run_locust_step(path, n, RATE, None, workers=WORKERS))
            return {"step": step, "numbers": _numbers(step, server_ttft(before, server.metrics()))}

        runs = [measure(client, AGREEMENT_STREAMS) for client in ("lab", "locust", "lab")]
        climb: list[dict[str, Any]] = []
        started = time.monotonic()
        for n in CLIMB:
            if time.monotonic() - started > CLIMB_BUDGET_S:
                break
            pair = {"lab": measure("lab", n), "locust": measure("locust", n)}
            climb.append(pair)
            if (pair["locust"]["step"].client_peak_cpu_pct or 0.0) >= SATURATED_PCT:
                break
    lab_a, locust, lab_b = (r["step"] for r in runs)
    agreement = compare(lab_a, locust, lab_b)
    saturated = next((p["locust"]["numbers"] for p in climb
                      if (p["locust"]["step"].client_peak_cpu_pct or 0.0) >= SATURATED_PCT), None)
    departs = None
    for pair in climb:
        ours, theirs = pair["lab"]["step"], pair["locust"]["step"]
        off = [name for name in FIELDS if getattr(ours, name) is not None
               and getattr(theirs, name) is not None
               and abs(getattr(ours, name) - getattr(theirs, name)) > tolerance(
                   getattr(ours, name), getattr(theirs, name),
                   sampling_s=sampling(name, [ours], theirs))]
        if off:
            departs = {"streams": ours.concurrency, "metrics": off}
            break
    return {"streams": AGREEMENT_STREAMS, "duration_s": DURATION_S, "tokens_per_s": RATE,
            "ramp_s": RAMP_S, "workers": WORKERS,
            "tolerance": {"locust_rounding": "half a step of 2 significant digits of ms",
                          "batch_s": BATCH_S, "run_share_of_interval": RUN_SHARE},
            "runs": [r["numbers"] for r in runs], "agreement": agreement,
            "agree": all(r["agree"] for r in agreement.values()),
            "lab_repeats": all(r["lab_repeats"] for r in agreement.values()),
            "climb": [{k: v["numbers"] for k, v in pair.items()} for pair in climb],
            "locust_saturated": saturated, "locust_departs": departs,
            "saturated_pct": SATURATED_PCT}


# A cell of a table whose column header names the unit.
_ms_cell = partial(milliseconds, digits=1, unit=False, grouped=True)


def markdown_lines(result: dict[str, Any]) -> list[str]:
    """The part's section of bench.md."""
    if "agreement" not in result or "runs" not in result:
        return []
    interval_ms = 1e3 / result["tokens_per_s"]
    lines = [f"## Lab client and Locust (1 master + {result['workers']} workers), "
             f"{result['streams']} streams x {result['tokens_per_s']:g} tok/s for "
             f"{result['duration_s']:g} s, started over {result['ramp_s']:g} s, loopback", "",
             f"Tolerance = half of Locust's rounding step at the value (0.5 ms below 100 ms, 5 ms "
             f"below 1 s) + the server's 1 ms batching window + {RUN_SHARE:g} of the token "
             f"interval ({RUN_SHARE * interval_ms:g} ms: the runs take turns on the server) + "
             f"the percentile's sampling resolution (both clients' half-bands in quadrature). Lab "
             f"client before and after Locust; its two runs' difference is its own repeatability.", "",
             "| metric | lab client, runs 1 / 2 (ms) | lab mean | Locust | tolerance (of it sampling) "
             "| lab repeat | agree |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for name, row in result["agreement"].items():
        runs = " / ".join(_ms_cell(v) for v in row["lab_runs"])
        lines.append(f"| {name} | {runs} | {_ms_cell(row['lab'])} | {_ms_cell(row['locust'])} | "
                     f"{_ms_cell(row['tolerance'])} ({_ms_cell(row.get('sampling_s'))}) | "
                     f"{_ms_cell(row['lab_repeat'])} | {'yes' if row['agree'] else '**no**'} |")
    lines += ["", "| run | client | streams | complete | TTFT p50/p99 (ms) | server's TTFT p50/p99 at most "
              "(ms, /metrics buckets) | gap p50/p99 (ms) | client CPU s (% of one core) | busiest "
              "Locust process (busiest second) | CPU per event (us) | machine |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    rows = [("agreement", c, r) for c, r in zip(("lab", "Locust", "lab"), result["runs"])]
    for pair in result["climb"]:
        rows += [("climb", "lab", pair["lab"]), ("climb", "Locust", pair["locust"])]
    for stage, client, r in rows:
        server = r["server_ttft"]
        per_event = r["client_cpu_per_event_us"]
        peak = ("-" if r["client_peak_cpu_pct"] is None else
                f"{r['client_peak_cpu_pct']:.0f}% ({r['client_peak_process']})")
        lines.append(
            f"| {stage} | {client} | {r['streams']} | {r['complete']} | "
            f"{_ms_cell(r['ttft_p50_s'], digits=0)}/{_ms_cell(r['ttft_p99_s'], digits=0)} | "
            f"{_ms_cell(server.get('p50_at_most_s'), digits=0)}/{_ms_cell(server.get('p99_at_most_s'), digits=0)} | "
            f"{_ms_cell(r['gap_p50_s'])}/{_ms_cell(r['gap_p99_s'])} | "
            f"{r['client_cpu_s']:.1f} ({r['client_cpu_pct']:.0f}%) | {peak} | "
            f"{'-' if per_event is None else f'{per_event:.0f}'} | {r['machine_busy_pct']:.0f}% |")
    saturated, departs = result.get("locust_saturated"), result.get("locust_departs")
    counts = ", ".join(str(p["locust"]["streams"]) for p in result["climb"]) or "none"
    lines += ["", "Locust's own limit on this machine: " + (
        f"a Locust process reached {saturated['client_peak_cpu_pct']:.0f}% of one core "
        f"({saturated['client_peak_process']}) at {saturated['streams']} streams" if saturated else
        f"no Locust process reached {result['saturated_pct']:g}% of one core at {counts} streams")
        + ("; its numbers left the lab client's by more than the tolerance first at "
           f"{departs['streams']} streams ({', '.join(departs['metrics'])})." if departs else "."), ""]
    if not result["lab_repeats"]:
        lines += ["The lab client differed from itself by more than the tolerance: the machine was "
                  "too noisy for this comparison (rerun when it is quiet).", ""]
    return lines
