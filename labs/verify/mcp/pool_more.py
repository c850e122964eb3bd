"""The pools of Envoy and Traefik behind a judged MCP route (pool.py reads nginx, HAProxy and
Caddy; these build its Pool, imported where used so pool.py can list them in its one table).

- Envoy: the route's cluster, its `load_assignment` endpoints in order; affinity is a route
  `hash_policy` on a RING_HASH or MAGLEV cluster (Envoy ignores a hash policy under any other
  lb_policy), or the `stateful_session` filter on the connection manager.
- Traefik: the router's service, its `loadBalancer.servers`; affinity is `sticky.cookie`.
"""
from __future__ import annotations

from typing import Any

from labs.verify.model import display_path

# Envoy's load balancers that read a route's hash_policy (envoy docs: route.RouteAction.hash_policy,
# "only used with a hash-based load balancer").
ENVOY_HASHING = ("RING_HASH", "MAGLEV")
STATEFUL_SESSION = "stateful_session"


def envoy_pool(config: Any, found: Any) -> Any:
    from labs.verify.envoy.config import YamlMap
    from labs.verify.mcp.pool import Pool
    from labs.verify.yamledit import walk

    cluster = found.cluster
    endpoints = [m for m in walk(cluster.mapping("load_assignment")) if isinstance(m.get("socket_address"), YamlMap)]
    policy = str(cluster.get("lb_policy", "ROUND_ROBIN"))
    hashes = found.route.mapping("route").items_list("hash_policy")
    affinity = None
    if hashes and policy in ENVOY_HASHING:
        affinity = f"lb_policy {policy} with the route's hash_policy {[dict(h) for h in hashes]}"
    stateful = [f.get("name") for f in found.hcm.items_list("http_filters") if STATEFUL_SESSION in str(f.get("name"))
                or STATEFUL_SESSION in str(f.mapping("typed_config").get("@type", ""))]
    if stateful:
        affinity = f"the {stateful[0]} filter"
    where = f"{display_path(config.path)}:{cluster.line()}"
    return Pool(len(endpoints) or 1, where, f"cluster {cluster.get('name')}", affinity,
                f"lb_policy {policy}" + ("" if "lb_policy" in cluster else " (Envoy's default)"))


def traefik_pool(config: Any, router: Any) -> Any:
    from labs.verify.mcp.pool import Pool
    from labs.verify.traefik.config import get

    name = str(get(router.body, "service"))
    service = config.find("services", name)
    balancer = get(service.body, "loadBalancer") if service is not None else None
    servers = get(balancer, "servers") or []
    cookie = get(get(balancer, "sticky"), "cookie")
    affinity = None
    if cookie is not None:
        affinity = "sticky.cookie" + (f" {get(cookie, 'name')}" if isinstance(cookie, dict) and get(cookie, "name")
                                      else "")
    where = service.where() if service is not None else router.where()
    return Pool(max(1, len(servers)), where, f"service {name}", affinity,
                "sticky cookie" if affinity else "weighted round-robin (Traefik's default)")


READ = {"envoy": envoy_pool, "traefik": traefik_pool}
