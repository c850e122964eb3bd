"""The relay's settings: how it cuts the response and which HTTP version it forwards."""
from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator
from typing_extensions import Self

from proxies.apps.settings import AppSettings


class RelaySettings(AppSettings):
    """proxies/apps/relay/tcp_relay.py: a TCP relay that re-splits what the server sends, deterministically."""

    app: ClassVar[str] = "relay"
    split: tuple[int, int] | None = Field(
        None, description="write the response in pieces of a random size in [min, max] bytes, one "
                          "send each (None: pass reads through as they come)")
    seed: int = Field(0, description="seed of the piece sizes: one seed, the same split every run")
    upstream_http: Literal["1.1", "1.0"] = Field(
        "1.1", description="1.0: forward the request line as HTTP/1.0, so the server answers "
                           "close-delimited (no chunked framing) as it does to an HTTP/1.0 hop")

    @model_validator(mode="after")
    def _split_range(self) -> Self:
        if self.split is not None and not 1 <= self.split[0] <= self.split[1] <= 65536:
            raise ValueError(f"split {self.split}: need 1 <= min <= max <= 65536")
        return self
