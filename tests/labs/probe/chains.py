"""Chains of the lab's own proxies in front of a canary origin, for the probe's tests.

    with canary() as server, chain([("envoy", "fixed", {}), ("nginx", "nginx-buffering:broken", {})],
                                   server.port) as hops:
        urls = [hop.url + "/v1" for hop in hops]

A hop is (proxy, named variant, overrides); the variants are proxies/variants.py's (`fixed`,
`defaults` and the catalogue's `<scenario>:broken|fixed`).
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, Mapping, Sequence

from proxies.runtime import get_runtime
from proxies.runtime.base import RunningProxy
from proxies.runtime.process import free_port
from proxies.variants import load_extensions, variant
from server.launcher import ServerHandle, running_server

# The canary as the README tells users to run it: model-free, close-delimited answers to
# HTTP/1.0 (so a buffering nginx shows), enough slots that the origin itself never queues.
CANARY_ARGS = ("--engine", "synthetic", "--http", "h11", "--slots", "64", "--max-queue", "256")
Hop = tuple[str, str, Mapping[str, Any]]


@contextlib.contextmanager
def canary(extra: Sequence[str] = ()) -> Iterator[ServerHandle]:
    with running_server([*CANARY_ARGS, *extra]) as server:
        yield server


@contextlib.contextmanager
def chain(hops: Sequence[Hop], server_port: int) -> Iterator[list[RunningProxy]]:
    """Start the hops from the server outwards on free loopback ports; yields them outermost first."""
    load_extensions()
    runtime = get_runtime("local")
    with contextlib.ExitStack() as stack:
        upstream, started = server_port, []
        for proxy, name, overrides in reversed(hops):
            ports: dict[str, int] = {"listen_port": free_port(), "upstream_port": upstream}
            if proxy == "envoy":
                ports["admin_port"] = free_port()
            settings = variant(proxy, name).with_(**overrides, **ports)  # type: ignore[arg-type]
            started.append(stack.enter_context(runtime.run_proxy(settings)))
            upstream = settings.listen_port
        yield list(reversed(started))


def urls(hops: Sequence[RunningProxy]) -> list[str]:
    return [hop.url + "/v1" for hop in hops]
