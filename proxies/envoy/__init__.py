"""Envoy: settings model and template (`envoy.yaml.j2`)."""
from __future__ import annotations

from proxies.envoy.settings import EnvoySettings

__all__ = ["EnvoySettings"]
