"""HAProxy: settings model and template (`haproxy.cfg.j2`)."""
from __future__ import annotations

from proxies.haproxy.settings import HaproxySettings

__all__ = ["HaproxySettings"]
