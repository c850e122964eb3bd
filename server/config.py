"""Every server option, and the per-stream settings a request's `lab` object may override.

`ServerConfig` is built once by `python -m server` from its flags. `StreamSettings` holds the
failure modes that can change per request; the server-wide default comes from the flags, and
`StreamSettings.merged(lab)` applies the fields a request set explicitly.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Mapping

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = str(REPO_ROOT / ".models" / "tiny")

DetokenizerKind = Literal["incremental", "naive"]
DisconnectMode = Literal["abort", "ignore"]
ErrorMode = Literal["inband", "silent-close", "fake-done"]

DETOKENIZER_KINDS: tuple[str, ...] = ("incremental", "naive")
DISCONNECT_MODES: tuple[str, ...] = ("abort", "ignore")
ERROR_MODES: tuple[str, ...] = ("inband", "silent-close", "fake-done")
# The headers a streaming response carries, each switchable off (`nginx-accel-header` needs
# X-Accel-Buffering missing). Lower-case: that is how they go on the wire and how they are named.
STREAMING_HEADER_NAMES: tuple[str, ...] = ("content-type", "cache-control", "x-accel-buffering")


@dataclass(frozen=True)
class StreamSettings:
    """How one stream behaves; the defaults are the correct behaviour, the rest are failure modes."""

    # "naive" decodes each token alone: U+FFFD wherever a character spans tokens.
    detokenizer: DetokenizerKind = "incremental"
    # False: stop strings are checked after the text left, so a stop's beginning leaks.
    stop_holdback: bool = True
    # "ignore": the client's departure goes unnoticed; generation runs to the end for nobody.
    disconnect: DisconnectMode = "abort"
    # SSE comment `: ping` after this much silence; None = no heartbeats.
    heartbeat_s: float | None = 10.0
    # How a failure after the first byte reaches the client: an in-band error event then [DONE]
    # (correct), a clean end of the body without [DONE], or a fake successful ending.
    error_mode: ErrorMode = "inband"
    # Frames produced within this window leave in one write; 0 = one write per frame.
    coalesce_ms: float = 0.0
    # Streaming headers left out of the response.
    omit_headers: frozenset[str] = frozenset()
    # No token for this long ends the stream with an in-band timeout error; None = never.
    stall_timeout_s: float | None = None

    def merged(self, overrides: Mapping[str, Any]) -> "StreamSettings":
        """These settings with a request's explicit overrides (0 or null switch a timer off)."""
        if not overrides:
            return self
        changes = dict(overrides)
        for timer in ("heartbeat_s", "stall_timeout_s"):
            if timer in changes and not changes[timer]:
                changes[timer] = None
        if "omit_headers" in changes:
            changes["omit_headers"] = frozenset(h.lower() for h in changes["omit_headers"] or ())
        return replace(self, **changes)


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    model: str = DEFAULT_MODEL  # a local folder or a hub id (HF_HUB_OFFLINE=1: only if cached)
    served_model_name: str | None = None  # default: the model folder's name, or the hub id
    device: Literal["auto", "cpu", "cuda"] = "auto"
    engine: Literal["transformers", "synthetic"] = "transformers"
    slots: int = 8
    max_queue: int = 64
    max_body_bytes: int = 8 * 1024 * 1024
    # Idle keep-alive connections are closed after this long. Longer than the proxies' upstream
    # keep-alive timeouts (nginx 60 s), so a proxy never reuses a connection the server is
    # closing at that moment (a 502 race); uvicorn's own default is 5 s.
    keep_alive_s: float = 75.0
    # uvicorn's HTTP implementation. httptools is the fast one, but answers HTTP/1.0 requests
    # with chunked encoding; h11 answers them close-delimited, as HTTP/1.0 expects.
    http: Literal["httptools", "h11"] = "httptools"
    log_level: str = "info"
    access_log: bool = False
    # Failure mode `server-gzip-middleware`: gzip every response, SSE included...
    gzip_middleware: bool = False
    # ...and its fix: the same middleware, with text/event-stream excluded.
    gzip_exclude_sse: bool = False
    # Starlette's GZipMiddleware instead, which sync-flushes each chunk (and so streams).
    gzip_sync_flush: bool = False
    # Failure mode `server-blocking-loop`: decode steps on the event loop (EngineConfig).
    blocking_loop: bool = False
    # Failure mode `server-fd-limit`: keep the soft RLIMIT_NOFILE the shell gave us.
    keep_fd_limit: bool = False
    stream: StreamSettings = field(default_factory=StreamSettings)

    @property
    def model_name(self) -> str:
        if self.served_model_name:
            return self.served_model_name
        path = Path(self.model)
        return path.name if path.exists() else self.model

    def accepts_model(self, name: str) -> bool:
        """Clients may name the model by its served name or by what --model was given."""
        return name in (self.model_name, self.model)
