"""What verify --mcp reads of a pool (pool.py and pool_more.py read it per proxy): the servers, the
balancing, the affinity as written, and the fix each proxy's pool block takes for session affinity."""
from __future__ import annotations

from dataclasses import dataclass


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
