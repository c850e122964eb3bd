"""All settings models in one place (also importable lazily from `proxies`)."""
from __future__ import annotations

from proxies.apache.settings import ApacheSettings
from proxies.base import PROXY_NAMES, ProxyName, ProxySettings
from proxies.caddy.settings import CaddySettings
from proxies.envoy.settings import EnvoySettings
from proxies.haproxy.settings import HaproxySettings
from proxies.nginx.settings import NginxSettings
from proxies.varnish.settings import VarnishSettings

__all__ = ["PROXY_NAMES", "ApacheSettings", "CaddySettings", "EnvoySettings", "HaproxySettings",
           "NginxSettings", "ProxyName", "ProxySettings", "VarnishSettings"]
