"""LiteLLM's settings: the keep-alive pings its variants switch."""
from __future__ import annotations

from typing import ClassVar, Literal

from proxies.apps.settings import AppSettings, knob

LITELLM = "https://docs.litellm.ai/docs/proxy/config_settings"
# Where its /v1/messages (Anthropic Messages) bridge sends an `openai/` model: the Responses API
# (LiteLLM 1.108's default, `_RESPONSES_API_PROVIDERS`) or, with
# `use_chat_completions_url_for_anthropic_messages`, chat/completions.
MESSAGES_BRIDGE = "https://docs.litellm.ai/docs/anthropic_unified"
LITELLM_MODELS = "https://docs.litellm.ai/docs/proxy/configs#quick-start---config"


class LitellmSettings(AppSettings):
    """The LiteLLM proxy (its own venv), one model routed to the upstream, offline."""

    app: ClassVar[str] = "litellm"
    keepalive_ping_s: float | None = knob(
        None, "litellm_settings.sse_keepalive_ping_interval_seconds: a `: ping` after this much "
        "silence (None: LiteLLM's default, no pings)", LITELLM, gt=0, le=3600)
    messages_upstream: Literal["responses", "chat"] = knob(
        "responses", "the upstream route its /v1/messages bridge translates to (chat: "
        "litellm_settings.use_chat_completions_url_for_anthropic_messages)", MESSAGES_BRIDGE)
    named_model: str | None = knob(
        None, "a model_list entry of its own for this model name, before the wildcard `*` (None: "
        "the wildcard alone). LiteLLM's Responses route pseudo-streams a model its model map does "
        "not know (the upstream is called without streaming, the answer re-framed as SSE); a named "
        "entry is known", LITELLM_MODELS, pattern=r"^[A-Za-z0-9._:-]{1,64}$")
