"""The pools of Envoy, Traefik, Apache and Varnish behind a judged MCP route (pool.py reads nginx,
HAProxy and Caddy, and lists these in its one table).

- Envoy: the route's cluster, its `load_assignment` endpoints in order; affinity is a route
  `hash_policy` on a RING_HASH or MAGLEV cluster (Envoy ignores a hash policy under any other
  lb_policy), or the `stateful_session` filter on the connection manager with a cookie (a
  header-based session state needs a header the MCP client never sends back).
- Traefik: the router's service, its `loadBalancer.servers`; affinity is `sticky.cookie`.
- Apache: a `balancer://` target's `<Proxy>` members (`BalancerMember`); affinity is a
  `stickysession` on the ProxyPass, a `ProxySet` or a member (mod_proxy_balancer's only kind).
- Varnish: the backends the route's `req.backend_hint` / `bereq.backend` reaches (a vcl_init
  director's members, as verify's VCL reader follows them); a `hash` or `shard` director keeps a
  key on one member, `fallback` sends everything to its first healthy one; `round_robin` and
  `random` keep nothing.
"""
from __future__ import annotations

from typing import Any

from labs.verify.mcp.pool_model import Pool
from labs.verify.model import display_path

# Envoy's load balancers that read a route's hash_policy (envoy docs: route.RouteAction.hash_policy,
# "only used with a hash-based load balancer").
ENVOY_HASHING = ("RING_HASH", "MAGLEV")
STATEFUL_SESSION = "stateful_session"
# Varnish's directors (vmod_directors) that send one client, or every request, to one member.
VARNISH_KEEPING = {"hash": "a hash director keeps one key on one member",
                   "shard": "a shard director keeps one key on one member",
                   "fallback": "a fallback director sends every request to its first healthy member"}


def envoy_pool(config: Any, found: Any) -> Pool:
    from labs.verify.envoy.config import YamlMap
    from labs.verify.yamledit import walk

    cluster = found.cluster
    endpoints = [m for m in walk(cluster.mapping("load_assignment")) if isinstance(m.get("socket_address"), YamlMap)]
    policy = str(cluster.get("lb_policy", "ROUND_ROBIN"))
    hashes = found.route.mapping("route").items_list("hash_policy")
    affinity = None
    if hashes and policy in ENVOY_HASHING:
        affinity = f"lb_policy {policy} with the route's hash_policy {[dict(h) for h in hashes]}"
    stateful = [f for f in found.hcm.items_list("http_filters") if STATEFUL_SESSION in str(f.get("name"))
                or STATEFUL_SESSION in str(f.mapping("typed_config").get("@type", ""))]
    states = [str(f.mapping("typed_config").mapping("session_state").get("name", "")) for f in stateful]
    # The cookie-based state keeps the SDK's client (it keeps cookies); the header-based one needs
    # the client to send a response header back, which it does not (measured: 4 of 4 sessions lost).
    if any("header" not in state for state in states):
        affinity = f"the {stateful[0].get('name')} filter ({states[0] or 'its session state'})"
    where = f"{display_path(config.path)}:{cluster.line()}"
    return Pool(len(endpoints) or 1, where, f"cluster {cluster.get('name')}", affinity,
                f"lb_policy {policy}" + ("" if "lb_policy" in cluster else " (Envoy's default)"))


def traefik_pool(config: Any, router: Any) -> Pool:
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


def apache_pool(config: Any, served: Any) -> Pool:
    rule = served.rule
    if not rule.target.lower().startswith("balancer://"):
        return Pool(1, rule.directive.where, f"{rule.kind} {rule.target}", balancing="one address")
    name = rule.target.split("/")[2].lower()
    block = balancer_block(config, name)
    members = block.children("balancermember") if block is not None else []
    settings = [rule.directive, *(block.children("proxyset") if block is not None else []), *members]
    sticky = next((a for d in settings for a in d.args if a.lower().startswith("stickysession=")), None)
    method = next((a.split("=", 1)[1] for d in settings for a in d.args if a.lower().startswith("lbmethod=")),
                  "byrequests (mod_proxy_balancer's default)")
    return Pool(max(1, len(members)), (block or rule.directive).where, f"balancer://{name}", sticky,
                f"lbmethod={method}")


def balancer_block(config: Any, name: str) -> Any:
    """The `<Proxy balancer://name>` section that lists the members."""
    return next((d for d in config.main.walk() if d.key == "proxy" and d.block is not None and d.args
                 and d.args[0].rstrip("/").lower() == f"balancer://{name}"), None)


def varnish_pool(config: Any, found: Any) -> Pool:
    backends = found.backends
    director = next((d for d in config.directors.values() if d.name in found.scope and
                     [config.backends[m] for m in d.members if m in config.backends] == backends), None)
    if director is None:
        first = backends[0]
        return Pool(1, first.token.where(), f"VCL backend {first.name}", balancing="one backend")
    kept = VARNISH_KEEPING.get(director.kind)
    return Pool(len(backends), director.token.where(), f"director {director.name}",
                f"directors.{director.kind}: {kept}" if kept else None, f"directors.{director.kind}")


READ = {"envoy": envoy_pool, "traefik": traefik_pool, "apache": apache_pool, "varnish": varnish_pool}
