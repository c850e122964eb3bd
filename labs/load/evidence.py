"""The evidence a step leaves behind: the server's and proxy's log lines (deduplicated), the
server's HTTP status counters, the proxy's access log, Envoy's counters and the machine's TCP
counters, each as what the step added to them."""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from labs.load.results import StepResult

_NOISE = [
    (re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d "), ""),  # nginx timestamp
    (re.compile(r"^\[[^\]]*\]\s*"), ""),  # Envoy / HAProxy timestamp
    (re.compile(r"\b\d+#\d+: \*\d+ "), ""),  # nginx pid#tid: *connection
    (re.compile(r"\b\d+#\d+: "), ""),
    (re.compile(r"client: [\d.]+, server: [^,]*, "), ""),
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:PORT"),
    (re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ "), ""),  # Python logging
]
_NOTABLE = re.compile(r"warn|error|crit|alert|emerg|too many|refused|overflow|traceback|exception", re.I)


def _dedupe(lines: Sequence[str], limit: int = 8) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for line in lines:
        if not _NOTABLE.search(line):
            continue
        for pattern, repl in _NOISE:
            line = pattern.sub(repl, line)
        counts[line.strip()[:200]] += 1
    return dict(counts.most_common(limit))


class _Marks:
    """Where the logs and counters stood before a step, to report what the step added."""

    def __init__(self, server: Any, proxy: Any | None) -> None:
        self.server, self.proxy = server, proxy
        self.metrics = server.metrics()
        self.server_log = _lines(server.process.log_path)
        self.access = len(proxy.access_log()) if proxy is not None else 0
        self.errors = len(proxy.error_log().splitlines()) if proxy is not None else 0
        self.stats = _envoy_stats(proxy)
        self.tcp = tcp_counters()

    def fill(self, step: StepResult) -> None:
        after = self.server.metrics()
        for name, value in after.items():
            if name.startswith("streamlab_requests_total{"):
                status = name.split('"')[1]
                if change := int(value - self.metrics.get(name, 0.0)):
                    step.server_statuses[status] = change
        tokens = "streamlab_tokens_generated_total"
        step.server_tokens = int(after.get(tokens, 0.0) - self.metrics.get(tokens, 0.0))
        writes = "streamlab_stream_writes_total"
        step.server_writes = int(after.get(writes, 0.0) - self.metrics.get(writes, 0.0))
        step.server_log = _dedupe(_lines(self.server.process.log_path)[len(self.server_log):])
        step.tcp_counters = {k: v - self.tcp.get(k, 0) for k, v in tcp_counters().items()
                             if v - self.tcp.get(k, 0) > 0}
        if self.proxy is None:
            return
        step.proxy_log = _dedupe(self.proxy.error_log().splitlines()[self.errors:])
        entries = self.proxy.access_entries()[self.access:]
        keys = Counter(" ".join(filter(None, (e.get("status"), e.get("termination_state"),
                                               e.get("flags") if e.get("flags") != "-" else None)))
                       for e in entries)
        step.proxy_access = dict(keys.most_common(8))
        after_stats = _envoy_stats(self.proxy)
        interesting = re.compile(r"overflow|rq_5xx|rq_503|_reset|timeout|connect_fail|cx_destroy_remote")
        step.proxy_counters = {k: v - self.stats.get(k, 0) for k, v in after_stats.items()
                               if interesting.search(k) and v - self.stats.get(k, 0) > 0}


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []


def _envoy_stats(proxy: Any | None) -> dict[str, int]:
    if proxy is None:
        return {}
    # Imported here: only the load lab's own proxies get this far; `labs load URL` (which reads
    # the rest of this module) would otherwise load every proxy kind at start-up (~0.2 s).
    from proxies.kinds import has_admin
    if not has_admin(proxy.settings.proxy):
        return {}
    try:
        return proxy.stats()
    except OSError:
        return {}


TCP_COUNTERS = ("ListenOverflows", "ListenDrops", "TCPSynRetrans", "TCPTimeouts", "TCPAbortOnData")


def tcp_counters() -> dict[str, int]:
    """Selected TcpExt counters of the whole machine (other processes' traffic included)."""
    try:
        lines = Path("/proc/net/netstat").read_text().splitlines()
    except OSError:
        return {}
    for names, values in zip(lines[::2], lines[1::2]):
        if names.startswith("TcpExt:"):
            table = dict(zip(names.split()[1:], values.split()[1:]))
            return {k: int(table[k]) for k in TCP_COUNTERS if k in table}
    return {}
