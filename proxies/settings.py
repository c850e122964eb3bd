"""All settings models in one place (also importable lazily from `proxies`)."""
from __future__ import annotations

from proxies.base import PROXY_NAMES, ProxyName, ProxySettings
from proxies.envoy.settings import EnvoySettings
from proxies.haproxy.settings import HaproxySettings
from proxies.nginx.settings import NginxSettings

__all__ = ["PROXY_NAMES", "EnvoySettings", "HaproxySettings", "NginxSettings", "ProxyName", "ProxySettings"]
