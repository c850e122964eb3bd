"""Run an MCP scenario's variant: start the origin's replicas (server/mcp/replicas.py) and one
proxy in front of them, on the release the lab chose (`--proxy-version`, the current one by
default, as every scenario), open the workload's sessions through it with the official SDK client
the variant names (labs/scenario/mcp_clients.py: Python or TypeScript), read what each replica
recorded, and judge.

    run, results = run_mcp(scenario, "nginx", "broken", choice="oldest")
    outcome = run_mcp_scenario(scenario)  # every proxy and variant, as `labs run` shows it

In the lab's runtime (`--runtime`, $LAB_RUNTIME): local processes, or the proxy and each replica in
its container (the mcp image, proxies.runtime.docker_mcp), the client on the host either way.
"""
from __future__ import annotations

import os
import shlex
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from labs import provenance
from labs.lab.hops import hop_settings, runtime_named
from labs.scenario.mcp_clients import DEFAULT_CLIENT, MCP_CLIENTS, measure
from labs.scenario.mcp_model import McpRun, McpScenario
from labs.scenario.model import VARIANTS, CheckResult, VariantName
from proxies.kinds import choose_releases
from proxies.releases import CHOICE_VARIABLE
from server.mcp.knobs import OriginKnobs
from server.mcp.sdks import DEFAULT_SDK
from server.processes import free_port
from server.signals import run_async

Progress = Callable[[str], None]


@dataclass
class McpMeasured:
    """One variant through one proxy, and how its checks judged it."""

    run: McpRun
    results: list[CheckResult]

    @property
    def passed(self) -> bool:
        return bool(self.results) and all(result.passed for result in self.results)


@dataclass
class McpOutcome:
    """Every run of an MCP scenario, grouped as a token stream's outcome is (ScenarioOutcome): the
    broken variant on each proxy under `broken`, each fix on its proxies under `fixed`; so `labs run`,
    `run-all` and the index read either the same way."""

    scenario: McpScenario
    runs: dict[VariantName, list[McpMeasured]] = field(default_factory=dict)
    releases: dict[str, str] = field(default_factory=dict)  # proxy kind -> the series that ran
    provenance: dict[str, Any] = field(default_factory=dict)
    older: list["McpOutcome"] = field(default_factory=list)  # never: measured alike on each release

    @property
    def checks(self) -> dict[VariantName, list[CheckResult]]:
        return {name: [result for measured in runs for result in measured.results] for name, runs in self.runs.items()}

    @property
    def wall_s(self) -> float:
        return sum(measured.run.wall_s for runs in self.runs.values() for measured in runs)

    @property
    def every_release(self) -> list["McpOutcome"]:
        return [self]

    @property
    def all_passed(self) -> bool:
        return all(self.passed(name) for name in self.runs)

    def passed(self, variant: VariantName) -> bool:
        """Every run of that side judged as expected (a look-alike fix: still failing, as measured)."""
        runs = self.runs.get(variant, [])
        return bool(runs) and all(measured.passed for measured in runs)

    @property
    def verdict(self) -> dict[VariantName, str]:
        words = {"broken": ("symptom reproduced", "symptom did NOT reproduce"), "fixed": ("cured", "NOT cured")}
        return {name: words[name][0 if self.passed(name) else 1] for name in self.runs}


def proxy_release(proxy: str, choice: str | None = None) -> str:
    """The series of `proxy` a run uses: `choice` (choose_releases), else $LAB_PROXY_VERSION, else current."""
    return choose_releases(choice or os.environ.get(CHOICE_VARIABLE), [proxy], strict=False)[proxy]


def replicas_command(scenario: McpScenario, variant_name: str) -> str:
    """How each replica of a variant runs, and whose client opens its sessions, for the report's provenance."""
    variant = scenario.variant(variant_name)
    count = variant.replicas if variant.replicas is not None else scenario.workload.replicas
    argv = shlex.join(["python", "-m", "server.mcp", *OriginKnobs(**variant.origin).argv()])
    client = MCP_CLIENTS[variant.client_sdk or DEFAULT_CLIENT].package
    return f"{count} x {argv} (mcp {variant.sdk or DEFAULT_SDK}); client: {client}"


def run_mcp(scenario: McpScenario, proxy: str, variant_name: str, progress: Progress | None = None,
            choice: str | None = None, runtime: str | None = None) -> tuple[McpRun, list[CheckResult]]:
    """One variant through one proxy, on the release `choice` names (else the lab's), in the
    runtime named (else $LAB_RUNTIME's), measured and judged."""
    from labs.client.mcp_get_stream import measure_get_stream
    from server.mcp.app import MCP_PATH

    say = progress or (lambda message: None)
    variant = scenario.variant(variant_name)
    workload = scenario.workload
    count = variant.replicas if variant.replicas is not None else workload.replicas
    knobs = OriginKnobs(**variant.origin)
    release = proxy_release(proxy, choice)
    started = time.monotonic()
    sdk = variant.sdk or DEFAULT_SDK
    client = variant.client_sdk or DEFAULT_CLIENT
    say(f"{scenario.name}: {variant_name} through {proxy} {release}, {count} replica(s) of "
        f"{' '.join(['python -m server.mcp', *knobs.argv()])} on mcp {sdk}, the {client} client")
    where = runtime_named(runtime)
    with where.run_mcp_replicas(count, knobs, sdk=sdk) as replicas:
        settings = hop_settings(proxy, variant.proxy.get(proxy, {}), listen_port=free_port(), version=release,
                                upstream_port=replicas.ports[0], upstream_replica_ports=tuple(replicas.ports[1:]))
        with where.run_proxy(settings) as hop:  # type: ignore[arg-type]
            options = {"calls": workload.calls, "timeout_s": workload.timeout_s, **variant.client}
            lone_get_s = options.pop("lone_get_s", None)
            sessions = [run_async(measure(client, hop.url + MCP_PATH, **options))
                        for _ in range(variant.sessions or workload.sessions)]
            lone_gets = [] if lone_get_s is None else [run_async(measure_get_stream(
                hop.url + MCP_PATH, lone_get_s, verify_tls=options.get("verify_tls", True),
                http2=options.get("http2", False)))]
            config = hop.config_text
        requests = replicas.requests()
    run = McpRun(proxy=proxy, variant=variant_name, sessions=sessions, requests=requests, replicas=count,
                 config=config, wall_s=time.monotonic() - started, release=release, lone_gets=lone_gets,
                 client_sdk=client)
    return run, [check(run) for check in scenario.checks(variant_name)]


def run_mcp_scenario(scenario: McpScenario, variants: Sequence[VariantName] = VARIANTS, choice: str | None = None,
                     progress: Progress | None = None, runtime: str | None = None) -> McpOutcome:
    """`labs run NAME`: the broken variant on each proxy (`broken`), every fix on its proxies (`fixed`)."""
    started_at = provenance.started_now()
    outcome = McpOutcome(scenario, releases={proxy: proxy_release(proxy, choice) for proxy in scenario.proxies})
    for proxy, name in scenario.runs():
        side: VariantName = "broken" if name == "broken" else "fixed"
        if side in variants:
            run, results = run_mcp(scenario, proxy, name, progress, choice, runtime)
            outcome.runs.setdefault(side, []).append(McpMeasured(run, results))
    commands = {name: replicas_command(scenario, name) for name in dict.fromkeys(name for _, name in scenario.runs())}
    where = runtime_named(runtime).name
    # The replicas' image is the record of the origin that ran (not the model server's).
    outcome.provenance = provenance.collect(where, list(scenario.proxies), commands, started_at,
                                            server_in_runtime=False, releases=outcome.releases)
    if where == "docker":
        outcome.provenance["server_image"] = provenance.image_origin("mcp")
    return outcome
