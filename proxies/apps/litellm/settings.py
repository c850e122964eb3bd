"""LiteLLM's settings: the keep-alive pings its variants switch."""
from __future__ import annotations

from typing import ClassVar, Literal

from proxies.apps.settings import AppSettings, knob

LITELLM = "https://docs.litellm.ai/docs/proxy/config_settings"
# Where its /v1/messages (Anthropic Messages) bridge sends an `openai/` model: the Responses API
# (LiteLLM 1.108's default, `_RESPONSES_API_PROVIDERS`) or, with
# `use_chat_completions_url_for_anthropic_messages`, chat/completions.
MESSAGES_BRIDGE = "https://docs.litellm.ai/docs/anthropic_unified"


class LitellmSettings(AppSettings):
    """The LiteLLM proxy (its own venv), one model routed to the upstream, offline."""

    app: ClassVar[str] = "litellm"
    keepalive_ping_s: float | None = knob(
        None, "litellm_settings.sse_keepalive_ping_interval_seconds: a `: ping` after this much "
        "silence (None: LiteLLM's default, no pings)", LITELLM, gt=0, le=3600)
    messages_upstream: Literal["responses", "chat"] = knob(
        "responses", "the upstream route its /v1/messages bridge translates to (chat: "
        "litellm_settings.use_chat_completions_url_for_anthropic_messages)", MESSAGES_BRIDGE)
