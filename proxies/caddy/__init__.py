"""Caddy: settings model and template (`Caddyfile.j2`)."""
from __future__ import annotations

from proxies.caddy.settings import CaddySettings

__all__ = ["CaddySettings"]
