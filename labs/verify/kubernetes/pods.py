"""How many pods stand behind a Service, as the translation's pool: the controllers verify runs as
Envoy Gateway and NGINX Gateway Fabric balance over a Service's pod addresses themselves (never
through kube-proxy), so each pod is one server of the translated pool.

The count is the replicas of the Deployment or StatefulSet among the manifests whose pod labels
carry the Service's selector (Kubernetes' default of 1 when `replicas` is left out). Without one,
the route asked by `--path`/`--mcp` gets ASSUMED_PODS, said in a note: a stateful MCP server's
sessions are lost only across pods, so one pod would prove nothing (`labs verify --mcp` does the
same for a pool it cannot read); the chat route keeps one server, which its checks need.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from labs.findings import UnusableInput
from labs.verify.kubernetes.manifests import where
from labs.verify.model import display_path
from labs.verify.yamlpos import YamlMap

ASSUMED_PODS = 2
WORKLOADS = ("Deployment", "StatefulSet")


@dataclass(frozen=True)
class Pods:
    count: int
    origin: str  # the manifest field that says it, or why it is assumed

    def servers(self, service: str, port: int) -> list[str]:
        """One `host:port` per pod, named like a StatefulSet's pods when there are several (the
        rewrite puts each on its own loopback replica)."""
        if self.count == 1:
            return [f"{service}:{port}"]
        return [f"{service}-{index}:{port}" for index in range(self.count)]


def pods_of(manifest: Path, objects: list[YamlMap], service: str, asked: bool) -> Pods:
    """The pods behind `service`; `asked`: the route was asked by path (an MCP route)."""
    selector = next((o.mapping("spec").mapping("selector") for o in objects
                     if o.get("kind") == "Service" and o.mapping("metadata").get("name") == service), None)
    if selector:
        wanted = {str(k): str(v) for k, v in selector.items()}
        for workload in (o for o in objects if o.get("kind") in WORKLOADS):
            spec = workload.mapping("spec")
            labels = spec.mapping("template").mapping("metadata").mapping("labels")
            if wanted.items() <= {str(k): str(v) for k, v in labels.items()}.items():
                name = f"{workload.get('kind')} {workload.mapping('metadata').get('name')}"
                if "replicas" not in spec:
                    return Pods(1, f"{name}: no replicas, Kubernetes' default of 1")
                replicas = spec["replicas"]
                if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
                    raise UnusableInput(f"{name} spec.replicas: {replicas!r} is not a count of pods",
                                        file=display_path(manifest), line=workload.line())
                return Pods(max(1, replicas), where(manifest, spec, "replicas", f"{name} spec.replicas"))
    if not asked:
        return Pods(1, f"Service {service}")
    return Pods(ASSUMED_PODS, f"Service {service}: no Deployment or StatefulSet among the manifests selects its "
                              f"pods, so {ASSUMED_PODS} are assumed (the controller balances over them itself)")
