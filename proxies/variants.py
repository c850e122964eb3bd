"""Named variants: a registry of settings factories per proxy (`defaults`, `fixed`, and whatever
a caller registers), read by the CLI and the labs.

    register_variant("nginx", "no-buffering", lambda: NginxSettings(proxy_buffering=False))
    settings = variant("nginx", "fixed").with_(listen_port=port, upstream_port=server_port)

A scenario's variants are the labs' own (`python -m labs render SCENARIO --variant broken`):
nothing here imports the layer above.
"""
from __future__ import annotations

from typing import Callable

from proxies import fixed_settings
from proxies.base import PROXY_NAMES, ProxyName, ProxySettings
from proxies.apache.settings import ApacheSettings
from proxies.caddy.settings import CaddySettings
from proxies.envoy.settings import EnvoySettings
from proxies.haproxy.settings import HaproxySettings
from proxies.nginx.settings import NginxSettings
from proxies.varnish.settings import VarnishSettings

SettingsFactory = Callable[[], ProxySettings]
SETTINGS_TYPES: dict[ProxyName, type[ProxySettings]] = {
    "nginx": NginxSettings, "haproxy": HaproxySettings, "envoy": EnvoySettings,
    "varnish": VarnishSettings, "apache": ApacheSettings, "caddy": CaddySettings}

_registry: dict[ProxyName, dict[str, SettingsFactory]] = {proxy: {} for proxy in PROXY_NAMES}


class UnknownVariant(KeyError):
    def __init__(self, proxy: str, name: str, known: list[str]) -> None:
        self.proxy, self.name, self.known = proxy, name, known
        super().__init__(f"no {proxy} variant named {name!r}; known: {', '.join(known)}")

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


def _check_proxy(proxy: str) -> ProxyName:
    if proxy not in PROXY_NAMES:
        raise ValueError(f"unknown proxy {proxy!r}; known: {', '.join(PROXY_NAMES)}")
    return proxy  # type: ignore[return-value]


def register_variant(proxy: ProxyName, name: str, factory: SettingsFactory, *,
                     replace: bool = False) -> None:
    """Add a named variant; the factory runs on each lookup, so its settings are always fresh."""
    variants = _registry[_check_proxy(proxy)]
    if name in variants and not replace and variants[name] is not factory:
        raise ValueError(f"{proxy} variant {name!r} is already registered")
    variants[name] = factory


def variant_names(proxy: ProxyName) -> list[str]:
    return sorted(_registry[_check_proxy(proxy)])


def variant(proxy: ProxyName, name: str) -> ProxySettings:
    """The settings of a named variant; UnknownVariant lists the known names."""
    variants = _registry[_check_proxy(proxy)]
    if name not in variants:
        raise UnknownVariant(proxy, name, variant_names(proxy))
    settings = variants[name]()
    expected = SETTINGS_TYPES[proxy]
    if not isinstance(settings, expected):
        raise TypeError(f"{proxy} variant {name!r} returned {type(settings).__name__}, not {expected.__name__}")
    return settings


for _proxy, _type in SETTINGS_TYPES.items():
    register_variant(_proxy, "defaults", _type)
register_variant("nginx", "fixed", fixed_settings.nginx)
register_variant("haproxy", "fixed", fixed_settings.haproxy)
register_variant("envoy", "fixed", fixed_settings.envoy)
register_variant("varnish", "fixed", fixed_settings.varnish)
register_variant("apache", "fixed", fixed_settings.apache)
register_variant("caddy", "fixed", fixed_settings.caddy)
register_variant("nginx", "fixed-tls", fixed_settings.nginx_tls)
register_variant("envoy", "fixed-tls", fixed_settings.envoy_tls)
