"""nginx: settings model and template (`nginx.conf.j2`)."""
from __future__ import annotations

from proxies.nginx.settings import NginxSettings

__all__ = ["NginxSettings"]
