"""Run a command and measure the CPU of its whole process tree (for `make bench-peers`).

AIPerf and guidellm each fan out into several processes (AIPerf's services and workers,
guidellm's scheduler workers), so a tool's cost is the tree's, not its first process's. Two
readings, the larger kept:
- the kernel's own account at the end (`os.wait4` on the tool: its CPU plus that of every
  descendant it waited for), exact for a tree that reaps its children;
- samples of every live descendant from /proc while it runs (the last reading of each pid),
  which also catch a child that outlived its parent or was never reaped (Linux; elsewhere the
  kernel's account alone).
The command runs in its own session, so a timeout stops the whole tree by its process group.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

SAMPLE_S = 0.2
PROC = Path("/proc")
TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass
class TreeRun:
    returncode: int
    cpu_s: float  # user + system, the whole tree
    wall_s: float
    processes: int  # distinct processes seen (the tool's own included)
    timed_out: bool = False


def _stat(pid_dir: Path) -> tuple[int, int, float] | None:
    """(pid, parent pid, own user + system seconds) from /proc/PID/stat, or None if it is gone."""
    try:
        text = (pid_dir / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) ": the name may hold spaces
    return int(pid_dir.name), int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS_PER_S


def _tree_cpu(root: int, seen: dict[int, float]) -> None:
    """Record the CPU of `root` and of every live descendant (by parent links in /proc)."""
    if not PROC.is_dir():
        return
    stats = [s for d in PROC.iterdir() if d.name.isdigit() and (s := _stat(d))]
    children: dict[int, list[tuple[int, float]]] = {}
    for pid, ppid, cpu in stats:
        children.setdefault(ppid, []).append((pid, cpu))
    own = {pid: cpu for pid, _, cpu in stats}
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in own:
            seen[pid] = own[pid]
        todo += [child for child, _ in children.get(pid, ())]


def run_tree(argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, log: Path,
             timeout_s: float) -> TreeRun:
    """Run `argv` to its end (or `timeout_s`), its output into `log`; what the tree cost."""
    started = time.monotonic()
    with open(log, "wb") as out:
        process = subprocess.Popen(list(argv), cwd=cwd, env=dict(env), stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    seen: dict[int, float] = {}
    timed_out = False
    status, usage = 0, None
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        _tree_cpu(process.pid, seen)
        if time.monotonic() - started > timeout_s:
            timed_out = True
            _stop_group(process.pid)
            _, status, usage = os.wait4(process.pid, 0)
            break
        time.sleep(SAMPLE_S)
    process.returncode = os.waitstatus_to_exitcode(status)  # Popen must not wait on it again
    wall = time.monotonic() - started
    _stop_leftovers(process.pid, seen)  # whatever the tool left behind in its group
    kernel = usage.ru_utime + usage.ru_stime if usage else 0.0
    return TreeRun(process.returncode, max(kernel, sum(seen.values())), wall, max(1, len(seen)), timed_out)


def _stop_group(pgid: int) -> None:
    """The whole group, while its leader (the tool, not yet reaped) still holds the id."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _stop_leftovers(pgid: int, seen: Mapping[int, float]) -> None:
    """After the tool has gone: each process it started that still runs in its group, by pid."""
    for pid in seen:
        try:
            if pid != pgid and os.getpgid(pid) == pgid:
                os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
