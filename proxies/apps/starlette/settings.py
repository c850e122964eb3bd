"""The Starlette relay's settings: how it forwards the body (`mode`) and the chunk size of `iter-raw`."""
from __future__ import annotations

from typing import ClassVar

from pydantic import field_validator

from proxies.apps.settings import AppSettings, knob
from proxies.apps.starlette.modes import CLAUDE_CODE_PROXY, DEFAULT_CHUNK_BYTES, HTTPX_RAW, MODE_NAMES, MODES

STREAMING_RESPONSE = "https://www.starlette.io/responses/#streamingresponse"


class StarletteSettings(AppSettings):
    """proxies/apps/starlette/relay_app.py: Starlette + httpx relaying any path, one forwarding mode."""

    app: ClassVar[str] = "starlette"
    # The default is the relay that streams; each scenario's broken side names the mode its report's
    # relay used (proxies/apps/starlette/modes.py has the sentence and the source of each).
    mode: str = knob("lines", f"how the body is forwarded: {', '.join(MODE_NAMES)}",
                     STREAMING_RESPONSE)
    chunk_bytes: int = knob(DEFAULT_CHUNK_BYTES, "iter-raw's chunk size: `aiter_raw(chunk_bytes)` yields "
                            "only whole chunks of this many bytes", HTTPX_RAW, ge=1, le=1 << 20)

    upstream_key: str | None = knob(
        None, "the key it sends upstream as `x-api-key` and `Authorization: Bearer`, in place of the "
        "client's (a relay that holds the provider's key, as claude-code-proxy does; None: the "
        "client's headers pass)", CLAUDE_CODE_PROXY, pattern=r"^[\w.-]{1,200}$")

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, mode: str) -> str:
        if mode not in MODES:
            raise ValueError(f"unknown relay mode {mode!r}; known: {', '.join(MODE_NAMES)}")
        return mode
