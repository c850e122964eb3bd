"""Chains of the lab's own proxies in front of a canary origin, for the probe's tests.

    with canary() as server, chain([("envoy", "fixed", {}), ("nginx", "nginx-buffering:broken", {})],
                                   server.port) as hops:
        urls = [hop.url + "/v1" for hop in hops]

A hop is (proxy, variant, overrides): the variant is the proxy's own (`fixed`, `defaults`) or a
catalogue scenario's (`nginx-buffering:broken`: that scenario's settings for this proxy).
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, Mapping, Sequence

from labs import catalogue
from labs.lab.exposing import CLOSE_DELIMITED
from labs.lab.hops import hop_settings
from proxies.base import ProxySettings
from proxies.export import with_lab_certificate
from proxies.runtime import get_runtime
from proxies.runtime.base import RunningProxy
from proxies.variants import variant
from server.launcher import ServerHandle, running_server
from server.processes import free_port

# The canary as docs/probe.md tells users to run it: model-free, close-delimited answers to
# HTTP/1.0 (so a buffering nginx shows), enough slots that the origin itself never queues.
CANARY_ARGS = ("--engine", "synthetic", *CLOSE_DELIMITED, "--slots", "64", "--max-queue", "256")
Hop = tuple[str, str, Mapping[str, Any]]


@contextlib.contextmanager
def canary(extra: Sequence[str] = ()) -> Iterator[ServerHandle]:
    with running_server([*CANARY_ARGS, *extra]) as server:
        yield server


@contextlib.contextmanager
def chain(hops: Sequence[Hop], server_port: int) -> Iterator[list[RunningProxy]]:
    """Start the hops from the server outwards on free loopback ports; yields them outermost first."""
    runtime = get_runtime("local")
    with contextlib.ExitStack() as stack:
        upstream, started = server_port, []
        for proxy, name, overrides in reversed(hops):
            ports: dict[str, int] = {"listen_port": free_port(), "upstream_port": upstream}
            if proxy == "envoy":
                ports["admin_port"] = free_port()
            settings = settings_of(proxy, name).with_(**overrides, **ports)  # type: ignore[arg-type]
            started.append(stack.enter_context(runtime.run_proxy(settings)))
            upstream = settings.listen_port
        yield list(reversed(started))


def settings_of(proxy: str, name: str) -> ProxySettings:
    """`fixed`, `defaults`, `fixed-tls` (its certificate the self-signed one made at run time), or
    `<scenario>:broken|fixed` (the lab's settings for that hop)."""
    if ":" not in name:
        return with_lab_certificate(variant(proxy, name))  # type: ignore[arg-type]
    scenario_name, variant_name = name.split(":", 1)
    scenario = catalogue.get(scenario_name)
    chosen = scenario.variant(variant_name)  # type: ignore[arg-type]
    return hop_settings(proxy, chosen.proxy.get(proxy, {}), scenario.base)


def urls(hops: Sequence[RunningProxy]) -> list[str]:
    return [hop.url + "/v1" for hop in hops]
