"""streamlab proxies: one template per proxy, typed settings, render + validate, runtimes.

    from proxies import NginxSettings, render, validate
    settings = NginxSettings(proxy_buffering=False).with_(listen_port=8081)
    text = validate(render(settings))  # raises ConfigInvalid with nginx's own message

Each proxy's folder declares its kind (`proxies/<proxy>/kind.py`), listed in `proxies.kinds.KINDS`.
"""
from __future__ import annotations

from proxies.apache.settings import ApacheSettings
from proxies.base import ProxyName, ProxySettings
from proxies.caddy.settings import CaddySettings
from proxies.envoy.settings import EnvoySettings
from proxies.haproxy.settings import HaproxySettings
from proxies.binaries import BinaryProblem
from proxies.kinds import KINDS, PROXY_NAMES
from proxies.nginx.settings import NginxSettings
from proxies.rendering import render
from proxies.traefik.settings import TraefikSettings
from proxies.validation import ConfigInvalid, validate
from proxies.variants import SETTINGS_TYPES, UnknownVariant, register_variant, variant, variant_names
from proxies.varnish.settings import VarnishSettings

__all__ = ["KINDS", "PROXY_NAMES", "SETTINGS_TYPES", "ApacheSettings", "BinaryProblem", "CaddySettings",
           "ConfigInvalid", "EnvoySettings", "HaproxySettings", "NginxSettings", "ProxyName",
           "ProxySettings", "TraefikSettings", "UnknownVariant", "VarnishSettings", "register_variant", "render",
           "validate", "variant", "variant_names"]
