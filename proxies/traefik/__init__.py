"""Traefik: settings model and template (`traefik.yml.j2`)."""
from __future__ import annotations

from proxies.traefik.settings import TraefikSettings

__all__ = ["TraefikSettings"]
