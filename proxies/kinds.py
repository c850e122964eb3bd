"""The proxy kinds, one row each: everything about a proxy is in its folder (`proxies/<proxy>/`,
its `kind.py` declares a proxies.kind.ProxyKind); this table is where the shared modules find it.
The model is uvicorn's `config.py`, which names one implementation per protocol in one table."""
from __future__ import annotations

from typing import Iterable

from proxies.apache.kind import KIND as APACHE
from proxies.caddy.kind import KIND as CADDY
from proxies.envoy.kind import KIND as ENVOY
from proxies.haproxy.kind import KIND as HAPROXY
from proxies.base import ProxySettings
from proxies.kind import ProxyKind
from proxies.nginx.kind import KIND as NGINX
from proxies.releases import Release
from proxies.traefik.kind import KIND as TRAEFIK
from proxies.varnish.kind import KIND as VARNISH

KINDS: dict[str, ProxyKind] = {kind.name: kind for kind in (NGINX, HAPROXY, ENVOY, VARNISH, APACHE, CADDY, TRAEFIK)}
PROXY_NAMES: tuple[str, ...] = tuple(KINDS)


def kind_of(proxy: str) -> ProxyKind:
    """The kind named `proxy`; ValueError lists the known ones."""
    if proxy not in KINDS:
        raise ValueError(f"unknown proxy {proxy!r}; known: {', '.join(PROXY_NAMES)}")
    return KINDS[proxy]


def release_of(settings: ProxySettings) -> Release:
    """The release that runs these settings (their `version`, else the kind's current one);
    ValueError names the releases the lab has."""
    return kind_of(settings.proxy).release(settings.version)


def has_admin(proxy: str | None) -> bool:
    """Whether `proxy` is a kind with an admin endpoint (its settings then take an `admin_port`);
    False for the app hops and names no kind holds."""
    kind = KINDS.get(proxy or "")
    return kind is not None and kind.admin is not None


def choose_releases(choice: str | None, proxies: Iterable[str], strict: bool = True) -> dict[str, str]:
    """The release each of `proxies` (kind names) runs, by `--proxy-version` / LAB_PROXY_VERSION:

    `current` (or nothing): every proxy's current release, the default;
    `oldest`: every proxy's first release (Debian 12's);
    `X.Y`: that release of each proxy here that has one (1.22: nginx's);
    `PROXY=X.Y[,PROXY=X.Y]`: per proxy.

    Proxy -> series; one not named runs its current release. ValueError says what the lab has;
    with `strict=False` an `X.Y` no proxy here has leaves them all current (a run of every
    scenario where only some paths hold that proxy).
    """
    here = [name for name in dict.fromkeys(proxies) if name in KINDS]
    text = (choice or "").strip()
    if text in ("", "current"):
        return {name: KINDS[name].current.series for name in here}
    if text == "oldest":
        return {name: KINDS[name].releases[0].series for name in here}
    if "=" not in text:
        chosen = {name: text for name in here if any(r.series == text for r in KINDS[name].releases)}
        if not chosen and strict:
            raise ValueError(f"no proxy here has a release {text}: the lab runs {_releases(here or KINDS)}")
        return {**{name: KINDS[name].current.series for name in here}, **chosen}
    chosen = {}
    for part in text.split(","):
        name, _, series = (word.strip() for word in part.partition("="))
        if name not in KINDS:
            raise ValueError(f"{part!r}: unknown proxy {name!r}; known: {', '.join(PROXY_NAMES)}")
        chosen[name] = KINDS[name].release(series).series  # ValueError names its releases
    return {**{name: KINDS[name].current.series for name in here}, **chosen}


def _releases(names: Iterable[str]) -> str:
    return "; ".join(f"{name} " + ", ".join(r.label for r in KINDS[name].releases) for name in names)
