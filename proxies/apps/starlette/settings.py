"""The Starlette relay's settings: how it forwards the body (`mode`) and the chunk size of `iter-raw`."""
from __future__ import annotations

from typing import ClassVar

from pydantic import field_validator

from proxies.apps.settings import AppSettings, knob
from proxies.apps.starlette.modes import DEFAULT_CHUNK_BYTES, HTTPX_RAW, MODE_NAMES, MODES

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

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, mode: str) -> str:
        if mode not in MODES:
            raise ValueError(f"unknown relay mode {mode!r}; known: {', '.join(MODE_NAMES)}")
        return mode
