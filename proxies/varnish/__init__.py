"""Varnish: settings model and VCL template (`varnish.vcl.j2`)."""
from __future__ import annotations

from proxies.varnish.settings import VarnishSettings

__all__ = ["VarnishSettings"]
