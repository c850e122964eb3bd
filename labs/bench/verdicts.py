"""`make bench`'s verdict over the parts it ran, and its exit status: 0 every target met, 1 a
target missed, 2 a part failed (its own error, or a module absent) or a target could not be
judged (skipped: a reference gave no usable figure). Each part with targets has one reader
here, from its result to (target, True | False | None) for each."""
from __future__ import annotations

import math
from typing import Any, Callable, Iterator, Mapping

Verdict = tuple[str, "bool | None"]
MET, MISSED, FAILED = 0, 1, 2


def at_most(ratio: float, target: float) -> bool:
    """A ratio against its target, a ratio equal to it included: CPU is read from /proc in 10 ms
    ticks, so per-request figures are whole multiples of 10 us at 1,000 arrivals, and 270 us
    against 180 us divides to 1.5000000000000002 (measured: a miss printed as "1.50x")."""
    return ratio <= target or math.isclose(ratio, target)


def ratio_cell(row: Mapping[str, Any], target: float, against: str = "") -> str:
    """A table's target cell for a row judged by `at_most`: "-" (no target), skipped with why,
    or pass / **miss** against "<= {target}x{against}"."""
    if "target_met" not in row:
        return "-"
    if row["target_met"] is None:
        return f"skipped: {row.get('skipped', 'no figure')}"
    return f"<= {target:g}x{against}: {'pass' if row['target_met'] else '**miss**'}"


def _admission(result: Mapping[str, Any]) -> Iterator[Verdict]:
    for config, paths in (result.get("configs") or {}).items():
        for name, row in paths.items():
            if row.get("met", "-") != "-":
                yield f"admission {config} {name}: CPU per admitted request / raw ASGI", row["met"]


def _server_cpu(result: Mapping[str, Any]) -> Iterator[Verdict]:
    for row in result.get("many") or []:
        if "target_met" in row:
            yield f"server-cpu {row['server']}: CPU per token / raw ASGI", row["target_met"]


def _apis(result: Mapping[str, Any]) -> Iterator[Verdict]:
    for name, row in (result.get("apis") or {}).items():
        if "target_met" in row:
            yield f"apis {name}: CPU per token / chat's", row["target_met"]


def _proxies(result: Mapping[str, Any]) -> Iterator[Verdict]:
    for name, row in (result.get("comparison") or {}).items():
        for target, met in (row.get("targets") or {}).items():
            yield f"proxies {name}: {target}", met


def _locust(result: Mapping[str, Any]) -> Iterator[Verdict]:
    if "agree" in result:
        yield "locust: the lab client agrees with Locust", result["agree"]


def _tools(result: Mapping[str, Any]) -> Iterator[Verdict]:
    for name, row in (result.get("rows") or {}).items():
        if row.get("target_s") is not None:  # the probe has none
            yield f"tools {name}: wall time", row["target_met"]


# The parts with targets; the others (prefill, server, engine, client) only measure.
TARGETS: dict[str, Callable[[Mapping[str, Any]], Iterator[Verdict]]] = {
    "admission": _admission, "server-cpu": _server_cpu, "apis": _apis, "proxies": _proxies, "locust": _locust,
    "tools": _tools,
}


def failed(name: str, result: Mapping[str, Any]) -> str | None:
    """Why a part gave no result (None when it did)."""
    problem = result.get("error") or result.get("missing")
    return f"{name}: {problem}" if problem else None


def summary(results: Mapping[str, Mapping[str, Any]]) -> tuple[int, list[str]]:
    """The exit status over these parts' results, and one line per target not met and per part
    that failed (nothing when every target was met)."""
    failures = [line for name, result in results.items() if (line := failed(name, result))]
    verdicts = [v for name, result in results.items() if name in TARGETS and not failed(name, result)
                for v in TARGETS[name](result)]
    missed = [f"missed: {label}" for label, met in verdicts if met is False]
    skipped = [f"skipped (could not be judged): {label}" for label, met in verdicts if met is None]
    lines = [f"failed: {line}" for line in failures] + missed + skipped
    status = FAILED if failures or skipped else MISSED if missed else MET
    met = sum(met is True for _, met in verdicts)
    lines.append(f"{met} of {len(verdicts)} targets met, {len(missed)} missed, {len(skipped)} "
                 f"not judged; {len(failures)} of {len(results)} parts failed: exit {status}")
    return status, lines
