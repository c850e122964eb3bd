"""The proxy kinds, one row each: everything about a proxy is in its folder (`proxies/<proxy>/`,
its `kind.py` declares a proxies.kind.ProxyKind); this table is where the shared modules find it.
The model is uvicorn's `config.py`, which names one implementation per protocol in one table."""
from __future__ import annotations

from proxies.apache.kind import KIND as APACHE
from proxies.caddy.kind import KIND as CADDY
from proxies.envoy.kind import KIND as ENVOY
from proxies.haproxy.kind import KIND as HAPROXY
from proxies.kind import ProxyKind
from proxies.nginx.kind import KIND as NGINX
from proxies.traefik.kind import KIND as TRAEFIK
from proxies.varnish.kind import KIND as VARNISH

KINDS: dict[str, ProxyKind] = {kind.name: kind for kind in (NGINX, HAPROXY, ENVOY, VARNISH, APACHE, CADDY, TRAEFIK)}
PROXY_NAMES: tuple[str, ...] = tuple(KINDS)


def kind_of(proxy: str) -> ProxyKind:
    """The kind named `proxy`; ValueError lists the known ones."""
    if proxy not in KINDS:
        raise ValueError(f"unknown proxy {proxy!r}; known: {', '.join(PROXY_NAMES)}")
    return KINDS[proxy]


def has_admin(proxy: str | None) -> bool:
    """Whether `proxy` is a kind with an admin endpoint (its settings then take an `admin_port`);
    False for the app hops and names no kind holds."""
    kind = KINDS.get(proxy or "")
    return kind is not None and kind.admin is not None
