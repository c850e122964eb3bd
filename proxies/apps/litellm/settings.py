"""LiteLLM's settings: the keep-alive pings its variants switch."""
from __future__ import annotations

from typing import ClassVar

from proxies.apps.settings import AppSettings, knob

LITELLM = "https://docs.litellm.ai/docs/proxy/config_settings"


class LitellmSettings(AppSettings):
    """The LiteLLM proxy (its own venv), one model routed to the upstream, offline."""

    app: ClassVar[str] = "litellm"
    keepalive_ping_s: float | None = knob(
        None, "litellm_settings.sse_keepalive_ping_interval_seconds: a `: ping` after this much "
        "silence (None: LiteLLM's default, no pings)", LITELLM, gt=0, le=3600)
