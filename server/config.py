"""Every server option, and the per-stream settings a request's `lab` object may override.

`ServerConfig` is built once by `python -m server` from its flags. `StreamSettings` holds the
failure modes that can change per request; the server-wide default comes from the flags, and
`StreamSettings.merged(lab)` applies the fields a request set explicitly.
"""
from __future__ import annotations

from dataclasses import dataclass, field, make_dataclass, replace
from pathlib import Path
from typing import Any, Literal, Mapping

from server.knobs import BY_NAME, STREAM_KNOBS, STREAMING_HEADER_NAMES, setting_value
from server.locations import default_model_dir

# The checkout's .models/tiny (make setup builds it), else the user's cache folder (built on
# first use by the transformers engine; the synthetic engine needs only the shipped tokenizer).
DEFAULT_MODEL = str(default_model_dir())

# The per-stream settings, one field per per-stream knob (server/knobs.py), defaults included:
# the defaults are the correct behaviour, every other value a failure mode.
def _merged(self: Any, overrides: Mapping[str, Any]) -> Any:
    """These settings with a request's explicit overrides (0 or null switch a timer off)."""
    if not overrides:
        return self
    return replace(self, **{name: setting_value(BY_NAME[name], value)
                            for name, value in overrides.items()})


StreamSettings = make_dataclass(
    "StreamSettings",
    [(k.name, Any, field(default=setting_value(k, k.default))) for k in STREAM_KNOBS],
    frozen=True, namespace={"merged": _merged, "__doc__": "How one stream behaves (server/knobs.py)."})
StreamSettings.__module__ = __name__


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    model: str = DEFAULT_MODEL  # a local folder or a hub id (HF_HUB_OFFLINE=1: only if cached)
    served_model_name: str | None = None  # default: the model folder's name, or the hub id
    device: Literal["auto", "cpu", "cuda"] = "auto"
    engine: Literal["transformers", "synthetic"] = "transformers"
    # The synthetic engine's context (None: the model's). The coding agents' prompts (~11,100
    # tokens, labs/client/agents.py) do not fit the tiny model's 2,048.
    context_length: int | None = None
    slots: int = 8
    max_queue: int = 64
    max_body_bytes: int = 8 * 1024 * 1024
    # Idle keep-alive connections are closed after this long. Longer than the proxies' upstream
    # keep-alive timeouts (nginx 60 s), so a proxy never reuses a connection the server is
    # closing at that moment (a 502 race); uvicorn's own default is 5 s.
    keep_alive_s: float = 75.0
    # HTTP limits against slow or huge clients (server/http/connections.py, server/http/middleware.py):
    # a header block over max_header_bytes or max_headers fields gets 431; headers not complete
    # header_timeout_s after the connection opened (or the request began) get 408, and so does a
    # body not complete body_timeout_s after the headers; a stream whose writes stay blocked on
    # a client that does not read for send_timeout_s is aborted and its slot freed.
    max_header_bytes: int = 32 * 1024
    max_headers: int = 100
    header_timeout_s: float = 15.0
    body_timeout_s: float = 60.0
    send_timeout_s: float = 30.0
    # Origins a browser may call the API from (CORS); none by default.
    cors_origins: tuple[str, ...] = ()
    # The chat route at any POST path the other routes do not take (`/api/chat/completions`, an
    # app's own `/api/chat/send-message`): `labs verify` puts this server where a user's config
    # sends its streaming route, whatever path the proxy forwards, so that route is measured,
    # not a 404.
    chat_any_path: bool = False
    # The lab extension (server/http/lab_access.py): off entirely with lab_enabled False; with a token,
    # lab fields and /lab/ endpoints need `X-Lab-Token`; beyond loopback they need one.
    lab_enabled: bool = True
    lab_token: str | None = None
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
    serial_prefill: bool = False  # EngineConfig.serial_prefill
    # Failure mode `server-fd-limit`: keep the soft RLIMIT_NOFILE the shell gave us.
    keep_fd_limit: bool = False
    stream: StreamSettings = field(default_factory=StreamSettings)
    # How long `GET /v1/responses/{id}` finds a response (and can resume its stream) after its
    # creation: OpenAI keeps background responses for resuming ~10 minutes.
    responses_window_s: float = 600.0
    # --workers N: processes on one port (server/workers.py); --reuse-port: bind as one of them.
    workers: int = 1
    reuse_port: bool = False

    @property
    def model_name(self) -> str:
        if self.served_model_name:
            return self.served_model_name
        path = Path(self.model)
        return path.name if path.exists() or self.model == DEFAULT_MODEL else self.model

    def accepts_model(self, name: str) -> bool:
        """Clients may name the model by its served name or by what --model was given."""
        return name in (self.model_name, self.model)
