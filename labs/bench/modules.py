"""Parts 3 and 4, `server` and `engine`: the server's own benchmarks (`python -m server.tools.bench`,
framing and the whole path; `python -m server.tools.engine_bench`, tiny-model tokens/s), run as
bounded subprocesses; recorded as missing when absent, as an error when they fail."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

REPO_ROOT = Path(__file__).resolve().parents[2]


def _module_exists(name: str) -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def run_module(module: str, out: Path, args: Sequence[str] = (), timeout_s: float = 300) -> dict[str, Any]:
    """`python -m MODULE --json OUT ARGS`, bounded; its JSON, or why there is none."""
    if not _module_exists(module):
        return {"missing": f"{module} does not exist in this checkout"}
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", module, "--json", str(out), *args], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"{module} ran past {timeout_s:.0f} s"}
    wall = time.monotonic() - started
    if done.returncode != 0 or not out.exists():
        return {"error": f"{module} exited {done.returncode}", "stderr": done.stderr[-2000:]}
    return {"wall_s": round(wall, 1), "stdout": done.stdout[-3000:], "result": json.loads(out.read_text())}
