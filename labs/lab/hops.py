"""The hops between client and server (proxies and apps) as a product starts them: where they
run, which kind a path entry names, and the settings one starts with."""
from __future__ import annotations

import os
from typing import Any, Mapping

from proxies.apps import AppSettings, app_settings, is_app
from proxies.base import ProxySettings
from proxies.runtime import get_runtime
from proxies.runtime.base import Runtime
from proxies.variants import variant as named_settings


def runtime_named(name: str | None = None) -> Runtime:
    """Where the server and proxies run: `local` host processes (default) or `docker` containers."""
    return get_runtime(name or os.environ.get("LAB_RUNTIME", "local"))


def hop_kind(hop: str) -> str:
    """The proxy or app a path entry runs: a path may hold two hops of one kind, the second
    named with a suffix after a colon (`("nginx", "nginx:inner")`), each with its own settings."""
    return hop.split(":", 1)[0]


def hop_settings(proxy: str, overrides: Mapping[str, Any], base: str = "defaults",
                 **addressing: Any) -> ProxySettings | AppSettings:
    """The base settings (the proxy's defaults or the fixed ones; an app's own defaults), then
    the variant's overrides, then where the hop listens and forwards."""
    kind = hop_kind(proxy)  # `nginx:inner` is an nginx
    if is_app(kind):
        return app_settings(kind).with_(**overrides, **addressing)
    return named_settings(kind, base).with_(**overrides, **addressing)  # type: ignore[arg-type]
