"""What a process costs while a load step runs, read from /proc: CPU, open fds, the accept queue.

No psutil: three small files are enough, and reading them costs microseconds.
- CPU: fields 14 and 15 (utime, stime) of /proc/PID/stat count every thread of the process.
  nginx does its work in worker processes, so a "process" here is a tree: the PID and its live
  descendants (a dead child's CPU would move to the parent's cutime only when it is reaped).
- Open fds: entries of /proc/PID/fd, summed over the tree. Every stream holds a socket, so the
  count against the soft RLIMIT_NOFILE (`Max open files` in /proc/PID/limits) is the fd headroom.
- Accept queue: for a LISTEN socket, the rx_queue column of /proc/net/tcp is the number of
  connections the kernel has completed but the process has not accept()ed yet. A proxy at its
  maxconn stops accepting, so the queue is where its extra clients wait, invisible to its logs.

`Sampler` polls fds and the accept queue in a thread (peaks matter, and they are gone by the
end of a step) and takes CPU at its start and stop.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's `st` column


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (which may hold spaces)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return text.rsplit(")", 1)[1].split()


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process (all its threads); 0.0 once it is gone."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    # After the name: state is field 3, so utime (14) and stime (15) are at indexes 11 and 12.
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def children(pid: int) -> list[int]:
    """Every live descendant of `pid` (nginx's workers), by scanning /proc for parent ids."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(int(entry))
        if fields is not None:
            parents.setdefault(int(fields[1]), []).append(int(entry))  # field 4: ppid
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def tree(pid: int) -> list[int]:
    return [pid, *children(pid)]


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return 0


def fd_limit(pid: int) -> int | None:
    """The soft RLIMIT_NOFILE of a process (`Max open files`), None if unknown or unlimited."""
    try:
        for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                soft = line.split()[3]
                return int(soft) if soft.isdigit() else None
    except (FileNotFoundError, PermissionError):
        pass
    return None


def machine_cpu() -> tuple[float, float]:
    """(busy, total) jiffies of every CPU since boot, from the first line of /proc/stat.
    Busy is everything but idle and iowait; steal counts as busy (the core was not ours)."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    total = sum(values[:8])  # guest time is already inside user
    return total - idle, total


def accept_queues(ports: Iterable[int]) -> dict[int, int]:
    """Connections waiting to be accept()ed on the loopback LISTEN sockets of `ports` (IPv4)."""
    wanted = {f"{port:04X}": port for port in ports}
    queues = {port: 0 for port in wanted.values()}
    if not wanted:
        return queues
    with open("/proc/net/tcp") as table:
        next(table, None)  # header
        for line in table:
            cols = line.split(None, 5)
            if len(cols) < 5 or cols[3] != _LISTEN:
                continue
            port = wanted.get(cols[1].rsplit(":", 1)[1])
            if port is not None:
                queues[port] += int(cols[4].split(":")[1], 16)  # rx_queue
    return queues


@dataclass
class Usage:
    """One process tree over one interval."""

    name: str
    pid: int
    cpu_s: float = 0.0
    wall_s: float = 0.0
    fds_start: int = 0
    fds_peak: int = 0
    fd_limit: int | None = None

    @property
    def cpu_pct(self) -> float:
        """Percent of ONE core (200% = both cores of this machine)."""
        return 100.0 * self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "pid": self.pid, "cpu_s": round(self.cpu_s, 3),
                "cpu_pct": round(self.cpu_pct, 1), "fds_start": self.fds_start,
                "fds_peak": self.fds_peak, "fd_limit": self.fd_limit}


@dataclass
class Sampler:
    """Samples process trees (fds) and listen ports (accept queue) every `interval_s` in a thread.

        with Sampler({"server": pid}, ports=[8080]) as s:
            ...  # the load
        s.usage["server"].cpu_pct, s.queue_peak[8080]
    """

    pids: dict[str, int]
    ports: Sequence[int] = ()
    interval_s: float = 0.25
    usage: dict[str, Usage] = field(default_factory=dict)
    queue_peak: dict[int, int] = field(default_factory=dict)
    samples: int = 0
    machine_busy_pct: float = 0.0  # of ONE core, all processes on the machine (200% = 2 cores)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="resource-sampler", daemon=True)
        self._trees: dict[str, list[int]] = {}
        self._cpu0: dict[str, float] = {}
        self._t0 = 0.0

    def __enter__(self) -> Sampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._t0 = time.perf_counter()
        for name, pid in self.pids.items():
            self._trees[name] = tree(pid)
            self._cpu0[name] = sum(cpu_s(p) for p in self._trees[name])
            fds = sum(open_fds(p) for p in self._trees[name])
            self.usage[name] = Usage(name, pid, fds_start=fds, fds_peak=fds,
                                     fd_limit=_min_limit(self._trees[name]))
        self.queue_peak = {port: 0 for port in self.ports}
        self._machine0 = machine_cpu()
        self._thread.start()

    def _sample(self) -> None:
        for name, pids in self._trees.items():
            fds = sum(open_fds(p) for p in pids)
            usage = self.usage[name]
            usage.fds_peak = max(usage.fds_peak, fds)
        for port, depth in accept_queues(self.ports).items():
            self.queue_peak[port] = max(self.queue_peak.get(port, 0), depth)
        self.samples += 1

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join()
        self._sample()
        wall = time.perf_counter() - self._t0
        busy, total = (a - b for a, b in zip(machine_cpu(), self._machine0))
        self.machine_busy_pct = 100.0 * (os.cpu_count() or 1) * busy / total if total else 0.0
        for name, pids in self._trees.items():
            usage = self.usage[name]
            usage.cpu_s = sum(cpu_s(p) for p in pids) - self._cpu0[name]
            usage.wall_s = wall


def _min_limit(pids: Sequence[int]) -> int | None:
    limits = [limit for p in pids if (limit := fd_limit(p)) is not None]
    return min(limits) if limits else None


def raise_own_fd_limit() -> int:
    """Raise this process's soft RLIMIT_NOFILE to the hard limit (a load client needs one fd per
    stream, and shells often hand out 1024); returns the soft limit now in force."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1_048_576)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
