"""Part `tools`: how long the user's-path tools take, as a user runs them: `labs verify` of an
exported config (`--quick`, and the default with its silences at their defaults) and a default
`labs probe` of one deployed path (the lab's server behind the fixed nginx, a canary token set).

Each runs as its own process (`python -m labs ...`), so its wall time includes the interpreter's
start and its imports, and its CPU includes every process it started and reaped (the proxy, the
lab's server): what the user waits for and what the machine spends.
"""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from typing import Any, Sequence

from labs.bench.modules import REPO_ROOT
from labs.bench.proxies import Progress

CONFIG = "proxies/fixed/nginx.conf"
TOKEN_VARIABLE = "STREAMLAB_LAB_TOKEN"
# The targets, in seconds of wall time on this 2-core machine: what a user waits for. The probe
# has none: its default silences (30 s, and a 20 s stream looking for a total deadline) are
# waits it exists to make, so its time is shown, not judged.
TARGETS_S: dict[str, float | None] = {"verify --quick": 10.0, "verify": 45.0, "probe": None}


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: Sequence[str], env: dict[str, str] | None = None, timeout_s: float = 300) -> dict[str, Any]:
    """Run `python -m labs ARGV` to its end: wall time, CPU of it and its reaped children, exit code."""
    cpu_before, started = _children_cpu_s(), time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "labs", *argv], cwd=REPO_ROOT, capture_output=True,
                              text=True, timeout=timeout_s, env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        return {"command": "python -m labs " + " ".join(argv), "error": f"ran past {timeout_s:.0f} s"}
    return {"command": "python -m labs " + " ".join(argv), "exit": done.returncode,
            "wall_s": round(time.monotonic() - started, 2), "cpu_s": round(_children_cpu_s() - cpu_before, 2),
            "tail": (done.stdout + done.stderr)[-600:]}


def bench_tools(progress: Progress) -> dict[str, Any]:
    from proxies import variant
    from proxies.runtime.local import run_proxy
    from server.launcher import running_server
    from server.processes import free_port

    rows: dict[str, dict[str, Any]] = {}
    progress("verify --quick")
    rows["verify --quick"] = timed(["verify", CONFIG, "--quick"])
    progress("verify")
    rows["verify"] = timed(["verify", CONFIG])
    progress("probe")
    token = "bench-" + os.urandom(8).hex()
    with running_server(["--engine", "synthetic", "--lab-token", token]) as server, \
            run_proxy(variant("nginx", "fixed").with_(listen_port=free_port(), upstream_port=server.port)) as proxy:
        rows["probe"] = timed(["probe", f"{proxy.url}/v1"], env={TOKEN_VARIABLE: token})
    for name, row in rows.items():
        target = row["target_s"] = TARGETS_S[name]
        # Exit 0 or 1 is a verdict; 2 (its own error) or a timeout never meets a target.
        row["target_met"] = None if target is None else (row.get("exit") in (0, 1) and row.get("wall_s", 1e9) <= target)
    return {"config": CONFIG, "rows": rows}


def markdown_lines(result: dict[str, Any]) -> list[str]:
    lines = [f"## The user's-path tools, as run (`{result['config']}`; the probe: the lab's server "
             "behind the fixed nginx)", "",
             "| command | exit | wall (s) | CPU (s) | target (s) | met |", "| --- | ---: | ---: | ---: | ---: | --- |"]
    for row in result["rows"].values():
        target = "-" if row["target_s"] is None else f"{row['target_s']:g}"
        met = "-" if row["target_met"] is None else "yes" if row["target_met"] else "**no**"
        if "error" in row:
            lines.append(f"| `{row['command']}` | - | - | - | {target} | **no**: {row['error']} |")
            continue
        lines.append(f"| `{row['command']}` | {row['exit']} | {row['wall_s']:.1f} | {row['cpu_s']:.1f} | "
                     f"{target} | {met} |")
    return [*lines, ""]
