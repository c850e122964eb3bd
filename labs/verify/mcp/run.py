"""`verify_mcp`: a config's MCP route (`labs verify FILE --mcp [PATH]`) read, run here in front of
replicas of the lab's MCP origin, and measured with the probe's MCP checks (labs/probe/mcp/).

    report = verify_mcp(Path("nginx.conf"))                  # the route serving POST /mcp
    report = verify_mcp(Path("haproxy.cfg"), checks=["session-survives"])

The route is the one verify's route search finds for `POST PATH` (labs/verify/route.py), the GET
stream's route said when it differs. What answers behind it: as many replicas of the lab's origin
(server/mcp/replicas.py) as the route's pool has servers (labs/verify/mcp/pool.py; at most
MAX_REPLICAS, a pool's k-th server on replica k mod that), stateful, on the mcp 1.30 line most
deployed servers run, keep-alive comments at the SDK's 15 s. Each pool server is rewritten to its
own replica (RunPlan.pool_ports), so the pool's own balancing decides where a session goes. With
`runtime="docker"` the replicas run in containers of the mcp image (Runtime.run_mcp_replicas) and
the proxy in its release's container, as verify's docker runtime runs it.
"""
from __future__ import annotations

import contextlib
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

from labs.findings import UnusableInput
from labs.verify import releases
from labs.verify.kubernetes.translate import translate
from labs.verify.launch import running, validate
from labs.verify.mcp.hint import MCP_PATH as DEFAULT_MCP_PATH
from labs.verify.mcp.judge import ORIGIN, McpVerifyReport, findings, get_wait, measure
from labs.verify.mcp.pool import POOLS_READ, Pool, pool_of
from labs.verify.model import RouteWanted, display_path
from labs.verify.readers import READERS
from labs.verify.route import Request
from labs.verify.run import loopback_check, proxy_of, read_config, read_translation, rewrite_config
from proxies.runtime import get_runtime
from server.mcp.sdks import SDK_LINES

MCP_SDK = "1.30"  # the 1.x line most deployed servers run (docs/mcp.md), stateful
MAX_REPLICAS = 4  # each is a process here; four show round-robin as well as ten would

Progress = Callable[[str], None]


def replicas_for(pool: Pool | None) -> int:
    """As many replicas as the pool has servers (2 when it cannot be read: a pool that balances
    then shows it), at most MAX_REPLICAS."""
    return min(MAX_REPLICAS, max(1, pool.servers)) if pool is not None else 2


def verify_mcp(path: Path, *, mcp_path: str = DEFAULT_MCP_PATH, proxy: str | None = None,
               checks: Sequence[str] | None = None, runtime: str = "local", progress: Progress | None = None,
               wanted: RouteWanted = RouteWanted(), headers: dict[str, str] | None = None) -> McpVerifyReport:
    """Verify one config's MCP route; UnusableInput (exit status 2) when it cannot be used (no
    route serves POST `mcp_path`, a proxy whose pools verify does not read, mcp 1.30 missing)."""
    started = time.monotonic()
    say = progress or (lambda message: None)
    path = Path(path)
    if headers:
        wanted = replace(wanted, headers=tuple(headers.items()))
    # Kubernetes manifests run as their controller's proxy, whatever the file's name says.
    translation = translate(path, proxy, paths=(mcp_path,))
    proxy = translation.proxy if translation is not None else proxy_of(path, proxy)
    runs_on = releases.chosen(proxy, wanted.version, READERS[proxy].defaults, runtime)
    wanted = replace(wanted, path=mcp_path, series=runs_on.series)
    say(f"reading {display_path(path)} ({proxy}) for POST and GET {mcp_path}")
    reading = read_translation(translation, wanted) if translation is not None else read_config(path, proxy, wanted)
    pool = pool_of(reading)
    if translation is not None and pool is not None and translation.pool_where:
        pool = replace(pool, where=translation.pool_where)  # the manifest's field, not the translated file
    if pool is None and proxy not in POOLS_READ:
        raise UnusableInput(f"--mcp reads the upstream pools of {', '.join(POOLS_READ)} configs; {proxy}'s are "
                            "not read yet")
    if not SDK_LINES[MCP_SDK].present():
        raise UnusableInput(f"mcp {MCP_SDK} is not installed here: python -m labs setup mcp-session-affinity")
    if runtime == "docker" and (problem := _replicas_problem()) is not None:
        raise UnusableInput(f"--runtime docker: the MCP origin's replicas cannot run in containers: {problem}")
    report = McpVerifyReport(proxy=proxy, file=display_path(path), route=reading.route, path=reading.path,
                             why=reading.why, routes=list(reading.routes), version=reading.version,
                             settings=reading.settings, notes=[*reading.notes, *_get_route(reading)],
                             measured_on=runs_on.to_json(), pool=pool)
    count = replicas_for(pool)
    limit_s = _idle_limit(reading)
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"streamlab-verify-mcp-{proxy}-")))
        say(f"starting {count} replica(s) of the lab's MCP origin (mcp {MCP_SDK}, stateful)")
        # In containers (--runtime docker) through the runtime's hook, the proxy in its own beside them.
        replicas = stack.enter_context(get_runtime(runtime).run_mcp_replicas(count, ORIGIN, sdk=MCP_SDK))
        rewritten = rewrite_config(reading, replicas.ports[0], folder, pool_ports=tuple(replicas.ports))
        report.rewrites, report.notes = rewritten.diff, report.notes + rewritten.notes
        where = " in containers of the mcp image" if runtime == "docker" else ""
        report.notes.append(f"behind the route: {count} replica(s) of the lab's MCP origin{where} "
                            f"({replicas.command()}, mcp {MCP_SDK}), one per server of the pool" + (
                                f" ({pool.name}, {pool.servers} servers: server k is replica k mod {count})"
                                if pool is not None and pool.servers > count else ""))
        say(f"checking it with {proxy}'s own validator")
        validate(rewritten, runtime)
        say(f"starting {proxy} on 127.0.0.1:{rewritten.listen_port}")
        proxy_run = stack.enter_context(running(rewritten, runtime))
        host = rewritten.host_header or reading.host
        request_headers = {**dict(wanted.headers), **({"Host": host} if host else {})}
        measured = measure(f"{proxy_run.url}{reading.path}", request_headers, pool, get_wait(limit_s), limit_s,
                           checks, say, tls=rewritten.tls)
        report.checks = [*(m.outcome for m in measured), loopback_check(proxy_run, *replicas.ports)]
    report.findings = findings(reading, pool, measured)
    if translation is not None:  # a manifest's fix is said in its controller's objects
        report.findings = [replace(f, fix=translation.affinity_fix or f.fix) if f.kind == "session-affinity"
                           else replace(f, fix=translation.refix(f.fix)) for f in report.findings]
    report.wall_s = time.monotonic() - started
    return report


def _replicas_problem() -> str | None:
    """Why the replicas cannot run in containers here (no engine, no mcp image): one line, or None."""
    from proxies.runtime.docker_mcp import image_problem
    return image_problem()


def _idle_limit(reading) -> float | None:
    """The idle limit the reading holds on the route (nginx proxy_read_timeout, HAProxy timeout
    server: the setting of the reader's first idle-timeout rule), in seconds; None: not read."""
    from labs.verify.readers import fallback
    setting, _ = fallback(reading.proxy, "idle-timeout")
    value = reading.settings[setting].value if setting in reading.settings else None
    return float(value) if isinstance(value, (int, float)) else None


def _get_route(reading) -> list[str]:
    """A note when the GET stream's route is another than the POST's (a `limit_except`-style split)."""
    parsed = reading.parsed
    request = parsed.chosen.request
    found = parsed.reader.match(parsed.config, Request(request.path, request.host, request.headers, method="GET"))
    if found is None:
        return [f"no route serves GET {request.path}: the GET stream is measured as the proxy answers it"]
    if found.describe != parsed.chosen.route.describe:
        return [f"GET {request.path} (the notification stream) is served by {found.describe}"]
    return []
