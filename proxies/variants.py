"""Named variants: a registry of settings factories per proxy (`defaults`, `fixed`, and whatever
a caller registers), read by the CLI and the labs.

    register_variant("nginx", "no-buffering", lambda: NginxSettings(proxy_buffering=False))
    settings = variant("nginx", "fixed").with_(listen_port=port, upstream_port=server_port)

A scenario's variants are the labs' own (`python -m labs render SCENARIO --variant broken`):
nothing here imports the layer above.
"""
from __future__ import annotations

from proxies.base import ProxyName, ProxySettings
from proxies.kind import SettingsFactory
from proxies.kinds import KINDS, kind_of

SETTINGS_TYPES: dict[ProxyName, type[ProxySettings]] = {name: kind.settings for name, kind in KINDS.items()}
# Every kind's own variants (`defaults`, `fixed`, `fixed-tls` where it has one), then the callers'.
_registry: dict[ProxyName, dict[str, SettingsFactory]] = {name: kind.variants() for name, kind in KINDS.items()}


class UnknownVariant(KeyError):
    def __init__(self, proxy: str, name: str, known: list[str]) -> None:
        self.proxy, self.name, self.known = proxy, name, known
        super().__init__(f"no {proxy} variant named {name!r}; known: {', '.join(known)}")

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


def _check_proxy(proxy: str) -> ProxyName:
    return kind_of(proxy).name


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

