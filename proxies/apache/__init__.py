"""Apache httpd: settings model and template (`apache.conf.j2`)."""
from __future__ import annotations

from proxies.apache.settings import ApacheSettings

__all__ = ["ApacheSettings"]
