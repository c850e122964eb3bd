"""The upstream pool behind the judged MCP route: how many servers it has, how it balances, and the
line a session-affinity fix goes on. verify starts that many replicas of the lab's MCP origin and
points the pool's servers at them (RunPlan.pool_ports), so the measurement, not this reading,
decides whether a session survives; the reading only places the finding and sizes the run.

Read for nginx (the location's `proxy_pass` to an `upstream` block: its `server`s, `hash`,
`ip_hash`, `sticky`), HAProxy (the backend's `server`s, `balance`, `stick on`/`stick match`,
`cookie`), Caddy (the `reverse_proxy`'s upstreams and `lb_policy`, random by default); Envoy,
Traefik, Apache and Varnish in pool_more.py. The Pool and each block's fix: pool_model.py.
"""
from __future__ import annotations

from typing import Any

from labs.verify.mcp import pool_more
from labs.verify.mcp.pool_model import FIXES, Pool
from labs.verify.model import Reading, display_path

__all__ = ["FIXES", "POOLS_READ", "Pool", "pool_of"]

# Affinity directives: what keeps one client (or one session) on one server.
NGINX_AFFINITY = ("hash", "ip_hash", "sticky")
HAPROXY_AFFINITY_BALANCE = ("source", "hdr(", "uri", "url_param", "rdp-cookie")
HAPROXY_STICKINESS = (("stick", "on"), ("stick", "match"), ("stick", "store-response"), ("cookie",))


def pool_of(reading: Reading) -> Pool | None:
    """The pool of the route `reading` chose (None: this proxy's pools are not read)."""
    parsed = reading.parsed
    if parsed is None or reading.proxy not in POOLS_READ:
        return None
    return READ[reading.proxy](parsed.config, parsed.chosen.route.handle)


def _nginx(config: Any, served: Any) -> Pool | None:
    from labs.verify.nginx.targets import names_upstream

    passes = served.location.children("proxy_pass") or [d for d in served.location.walk() if d.name == "proxy_pass"]
    target = passes[0] if passes else None
    if target is None or not target.args:
        return None
    blocks = {block.args[0]: block for block in config.blocks("upstream") if block.args}
    name = names_upstream(target.args[0], set(blocks))
    if name is None:
        return Pool(1, target.where, f"proxy_pass {target.args[0]}", balancing="one address")
    block = blocks[name]
    chosen = [d for d in block.children() if d.name in NGINX_AFFINITY]
    balancing = next((d.text() for d in block.children() if d.name in (*NGINX_AFFINITY, "least_conn", "random")),
                     "round-robin (nginx's default)")
    return Pool(len(block.children("server")), block.where, f"upstream {name}",
                chosen[0].text() if chosen else None, balancing)


def _haproxy(config: Any, served: Any) -> Pool:
    backend = served.backend
    defaults = config.defaults_for(backend)
    chain = [backend, defaults]
    balance = next((s for section in chain if section is not None for s in [section.last("balance")] if s), None)
    balancing = " ".join(balance.words) if balance else "balance roundrobin (HAProxy's default)"
    sticky = [" ".join(s.words) for words in HAPROXY_STICKINESS for s in backend.find(*words)]
    if balance is not None and any(balance.words[1:2] and balance.words[1].startswith(b)
                                   for b in HAPROXY_AFFINITY_BALANCE):
        sticky.insert(0, balancing)
    servers = [s for s in backend.statements if s.keyword in ("server", "server-template")]
    return Pool(len(servers), f"{display_path(config.file)}:{backend.line}", f"backend {backend.name}",
                sticky[0] if sticky else None, balancing)


# Caddy's selection policies that keep a client on one upstream (its default is `random`).
CADDY_AFFINITY = ("ip_hash", "client_ip_hash", "cookie", "uri_hash")


def _caddy(config: Any, found: Any) -> Pool:
    handler = found.handler
    policy = ((handler.get("load_balancing") or {}).get("selection_policy") or {}).get("policy")
    dials = [u.get("dial", "?") for u in handler.get("upstreams") or []]
    name = "reverse_proxy " + " ".join(dials)
    return Pool(len(dials) or 1, config.where(found.proxy_line or found.site), name,
                f"lb_policy {policy}" if policy in CADDY_AFFINITY else None,
                f"lb_policy {policy}" if policy else "lb_policy random (Caddy's default)")


READ = {"nginx": _nginx, "haproxy": _haproxy, "caddy": _caddy, **pool_more.READ}
POOLS_READ = tuple(READ)
