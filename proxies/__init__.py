"""streamlab proxies: one template per proxy, typed settings, render + validate, runtimes.

    from proxies import NginxSettings, render, validate
    settings = NginxSettings(proxy_buffering=False).with_(listen_port=8081)
    text = validate(render(settings))  # raises ConfigInvalid with nginx's own message

Names are imported lazily: `python -m proxies.install` runs with the stdlib alone, before the
virtualenv (pydantic, jinja2) exists.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "ProxySettings": "proxies.base", "ProxyName": "proxies.base",
    "PROXY_NAMES": "proxies.kinds", "KINDS": "proxies.kinds",
    "NginxSettings": "proxies.nginx.settings",
    "HaproxySettings": "proxies.haproxy.settings",
    "EnvoySettings": "proxies.envoy.settings",
    "VarnishSettings": "proxies.varnish.settings",
    "ApacheSettings": "proxies.apache.settings",
    "CaddySettings": "proxies.caddy.settings",
    "render": "proxies.rendering",
    "validate": "proxies.validation", "ConfigInvalid": "proxies.validation",
    "BinaryProblem": "proxies.install",
    "variant": "proxies.variants", "variant_names": "proxies.variants",
    "register_variant": "proxies.variants", "UnknownVariant": "proxies.variants",
    "SETTINGS_TYPES": "proxies.variants",
}
__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from proxies.apache.settings import ApacheSettings
    from proxies.base import ProxyName, ProxySettings
    from proxies.caddy.settings import CaddySettings
    from proxies.envoy.settings import EnvoySettings
    from proxies.haproxy.settings import HaproxySettings
    from proxies.install import BinaryProblem
    from proxies.kinds import KINDS, PROXY_NAMES
    from proxies.nginx.settings import NginxSettings
    from proxies.varnish.settings import VarnishSettings
    from proxies.rendering import render
    from proxies.validation import ConfigInvalid, validate
    from proxies.variants import SETTINGS_TYPES, UnknownVariant, register_variant, variant, variant_names


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'proxies' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
