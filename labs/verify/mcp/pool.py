"""The upstream pool behind the judged MCP route: how many servers it has, how it balances, and the
line a session-affinity fix goes on. verify starts that many replicas of the lab's MCP origin and
points the pool's servers at them (RunPlan.pool_ports), so the measurement, not this reading,
decides whether a session survives; the reading only places the finding and sizes the run.

Read for nginx (the location's `proxy_pass` to an `upstream` block: its `server`s, `hash`,
`ip_hash`, `sticky`), HAProxy (the backend's `server`s, `balance`, `stick on`/`stick match`,
`cookie`), Caddy (the `reverse_proxy`'s upstreams and `lb_policy`, random by default), Envoy,
Traefik, Apache and Varnish (pool_more.py); other proxies are not read yet: `pool_of` says so and the run refuses
`--mcp` in one line.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from labs.verify.mcp import pool_more
from labs.verify.model import Reading, display_path

# Affinity directives: what keeps one client (or one session) on one server.
NGINX_AFFINITY = ("hash", "ip_hash", "sticky")
HAPROXY_AFFINITY_BALANCE = ("source", "hdr(", "uri", "url_param", "rdp-cookie")
HAPROXY_STICKINESS = (("stick", "on"), ("stick", "match"), ("stick", "store-response"), ("cookie",))


@dataclass(frozen=True)
class Pool:
    """The judged route's upstream servers as the config writes them."""

    servers: int  # addresses in the pool (a `server-template` counts as one: it names one address)
    where: str  # the block a balancing fix goes in: `file:line` of the upstream or backend
    name: str  # "upstream vllm", "backend mcp", "proxy_pass http://127.0.0.1:8000"
    affinity: str | None = None  # the directive that keeps a client on one server, as written
    balancing: str = "round-robin"  # the balancing as written, or the proxy's default

    @property
    def fix(self) -> str:
        # The name's first word says the block ("upstream x", "balancer://x"); one address has no pool.
        return FIXES.get(self.name.split()[0].split("://")[0], FIXES["proxy_pass"]).format(
            name=self.name, bare=self.name.split()[-1])


FIXES = {
    "upstream": "in {name}: `hash $remote_addr;` (or a sticky cookie); hashing $http_mcp_session_id is not "
                "one: initialize carries no id yet (docs/mcp.md)",
    "proxy_pass": "one server: nothing to keep a session on",
    "reverse_proxy": "in {name}: `lb_policy cookie` (the SDK's client keeps cookies) or `lb_policy ip_hash`; "
                     "`lb_policy header Mcp-Session-Id` is not one: initialize carries no id yet (docs/mcp.md)",
    "cluster": "in {name}: `lb_policy: RING_HASH` with a route `hash_policy: [{{connection_properties: "
               "{{source_ip: true}}}}]`, or the stateful_session filter with a cookie (a header-based state is not "
               "one: the client does not send the header back); hashing the mcp-session-id header is not one: initialize carries no id yet (docs/mcp.md)",
    "service": "in {name}: `loadBalancer: {{sticky: {{cookie: {{}}}}}}` (the SDK's client keeps cookies)",
    "balancer": "in <Proxy {name}>: `ProxySet stickysession=ROUTEID`, a `route=` per BalancerMember and "
                "`Header add Set-Cookie \"ROUTEID=.%{{BALANCER_WORKER_ROUTE}}e; path=/\" "
                "env=BALANCER_ROUTE_CHANGED` (the SDK's client keeps cookies)",
    "director": "in vcl_init: `new {bare} = directors.hash();` and `set req.backend_hint = "
                "{bare}.backend(client.identity);` (a key the first request has: the session id does not)",
    "backend": "in {name}: a stick table learnt from the response (`stick-table type string len 64 size 100k "
               "expire 30m`, `stick store-response res.hdr(mcp-session-id)`, `stick match "
               "req.hdr(mcp-session-id)`) or `cookie SERVERID insert indirect nocache` with a cookie per server",
}


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
