"""Run an MCP scenario's variant: start the origin's replicas (server/mcp/replicas.py) and one
proxy in front of them, open the workload's sessions through it with the official SDK client
(labs/client/mcp_session.py), read what each replica recorded, and judge.

    run, results = run_mcp(scenario, "nginx", "broken")

Local processes only: the origin is not in the lab's images yet (docs/mcp.md).
"""
from __future__ import annotations

import time
from typing import Callable

from labs.client.mcp_session import measure_session
from labs.lab.hops import hop_settings, runtime_named
from labs.scenario.mcp_model import McpRun, McpScenario
from labs.scenario.model import CheckResult
from server.mcp.app import MCP_PATH
from server.mcp.knobs import OriginKnobs
from server.mcp.replicas import running_replicas
from server.mcp.sdks import DEFAULT_SDK
from server.processes import free_port
from server.signals import run_async

Progress = Callable[[str], None]


def run_mcp(scenario: McpScenario, proxy: str, variant_name: str,
            progress: Progress | None = None) -> tuple[McpRun, list[CheckResult]]:
    """One variant through one proxy, measured and judged."""
    say = progress or (lambda message: None)
    variant = scenario.variant(variant_name)
    workload = scenario.workload
    count = variant.replicas if variant.replicas is not None else workload.replicas
    knobs = OriginKnobs(**variant.origin)
    started = time.monotonic()
    sdk = variant.sdk or DEFAULT_SDK
    say(f"{scenario.name}: {variant_name} through {proxy}, {count} replica(s) of "
        f"{' '.join(['python -m server.mcp', *knobs.argv()])} on mcp {sdk}")
    with running_replicas(count, knobs, sdk=sdk) as replicas:
        settings = hop_settings(proxy, variant.proxy.get(proxy, {}), listen_port=free_port(),
                                upstream_port=replicas.ports[0], upstream_replica_ports=tuple(replicas.ports[1:]))
        with runtime_named("local").run_proxy(settings) as hop:  # type: ignore[arg-type]
            options = {"calls": workload.calls, "timeout_s": workload.timeout_s, **variant.client}
            sessions = [run_async(measure_session(hop.url + MCP_PATH, **options))
                        for _ in range(variant.sessions or workload.sessions)]
            config = hop.config_text
        requests = replicas.requests()
    run = McpRun(proxy=proxy, variant=variant_name, sessions=sessions, requests=requests, replicas=count,
                 config=config, wall_s=time.monotonic() - started)
    return run, [check(run) for check in scenario.checks(variant_name)]
